"""Swapping cleaned segments in, crash-safely (Kafka's ``.cleaned``/``.swap`` files, plus a
manifest). Blocking; ``FileLog.replace_segments`` runs it in a worker thread.

Theory of operation
-------------------
Replacing the consecutive rolled segments B = [b0, b1, ..., bk] by one cleaned segment at b0:

1. ``<b0>.log.cleaned``, ``<b0>.index.cleaned`` and ``<b0>.timeindex.cleaned`` are written and
   fsynced, then the directory is fsynced. A crash here leaves the old segments untouched and
   stray ``.cleaned`` files, which the next open deletes.
2. The manifest ``<b0>.swap`` (the list B, one base offset a line) is written atomically
   (tmp, fsync, rename, fsync dir). **This is the commit point**: from here on the swap is
   completed, now or by the next open.
3. Each ``<b0><suffix>.cleaned`` is renamed over ``<b0><suffix>`` (``rename`` replaces
   atomically; the ``.log`` first), then the files of b1..bk are unlinked (``.log`` first);
   the directory is fsynced.
4. The manifest is unlinked and the directory fsynced.

Recovery (``complete_swaps``, when a partition is opened, before its segments are listed): for
each manifest, redo steps 3 and 4; both are idempotent (only ``.cleaned`` files still there are
renamed, unlinks ignore missing files). Then ``.cleaned`` files without a manifest are deleted.
So after a crash at any point the directory holds either all of B or only the cleaned
segment, never a mix; readers of the live log keep the old files open (and their index maps)
until the in-memory switch, so a swap never disturbs a read in flight.

``hook`` is the test seam: it is called with the name of each step before the step runs, and a
test makes it raise to simulate a crash there (then abandons the store, as ``kill -9`` would).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from storage.segment.files import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    fsync_dir,
    parse_segment_name,
    segment_path,
    unlink_quietly,
    write_atomic,
    write_synced,
)
from storage.segment.index import IndexWriter
from wire.records import iter_batches

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)
STEPS = ("write-cleaned", "write-manifest", "rename", "unlink-old", "remove-manifest")

hook: Callable[[str], None] | None = None


class SwapFailed(OSError):
    """The swap failed; ``committed`` says whether it got past the commit point (then the
    files are in doubt until recovery completes the swap)."""

    def __init__(self, message: str, committed: bool) -> None:
        super().__init__(message)
        self.committed = committed


def _step(name: str) -> None:
    if hook is not None:
        hook(name)


def build_indexes(data: bytes, base: int, interval: int) -> IndexWriter:
    """The offset and time indexes of a segment holding ``data``."""
    writer = IndexWriter(interval)
    for pos, h in iter_batches(data):
        rel = h.base_offset - base
        writer.add(pos, rel, h.total_size, h.max_timestamp, rel)
    writer.finish()
    return writer


def _manifest_path(directory: Path, base: int) -> Path:
    return segment_path(directory, base, SWAP_SUFFIX)


def _finish(directory: Path, bases: Sequence[int]) -> None:
    """Steps 3 and 4 (idempotent)."""
    b0 = bases[0]
    _step("rename")
    for suffix in SUFFIXES:
        cleaned = segment_path(directory, b0, suffix + CLEANED_SUFFIX)
        if cleaned.exists():
            os.replace(cleaned, segment_path(directory, b0, suffix))
    _step("unlink-old")
    for old in bases[1:]:
        for suffix in SUFFIXES:
            unlink_quietly(segment_path(directory, old, suffix))
    fsync_dir(directory)
    _step("remove-manifest")
    unlink_quietly(_manifest_path(directory, b0))
    fsync_dir(directory)


def swap_in(directory: Path, bases: Sequence[int], data: bytes, interval: int) -> None:
    """Replace the segments ``bases`` by one at ``bases[0]`` holding ``data``. Raises
    ``SwapFailed``."""
    b0 = bases[0]
    committed = False
    try:
        _step("write-cleaned")
        writer = build_indexes(data, b0, interval)
        write_synced(segment_path(directory, b0, LOG_SUFFIX + CLEANED_SUFFIX), data)
        write_synced(
            segment_path(directory, b0, INDEX_SUFFIX + CLEANED_SUFFIX), writer.offsets.buffer
        )
        write_synced(
            segment_path(directory, b0, TIME_INDEX_SUFFIX + CLEANED_SUFFIX), writer.times.buffer
        )
        fsync_dir(directory)
        _step("write-manifest")
        write_atomic(_manifest_path(directory, b0), "".join(f"{b}\n" for b in bases).encode())
        committed = True
        _finish(directory, bases)
    except OSError as exc:
        if not committed:
            for suffix in SUFFIXES:
                unlink_quietly(segment_path(directory, b0, suffix + CLEANED_SUFFIX))
        raise SwapFailed(f"swapping in cleaned segment {b0}: {exc}", committed) from exc


def complete_swaps(directory: Path) -> list[str]:
    """Recovery: finish committed swaps, delete uncommitted ``.cleaned`` files. Returns notes."""
    notes = []
    names = os.listdir(directory)
    for name in sorted(names):
        stem = name[: -len(SWAP_SUFFIX)]
        if name.endswith(SWAP_SUFFIX) and len(stem) == 20 and stem.isdigit():
            try:
                bases = [int(x) for x in (directory / name).read_text().split()]
            except (OSError, ValueError):
                bases = []
            if not bases or bases[0] != int(stem):
                notes.append(f"ignoring unreadable swap manifest {name}")
                unlink_quietly(directory / name)
                continue
            _finish(directory, bases)
            notes.append(f"completed the swap of cleaned segment {bases[0]} for {len(bases)}")
    for name in os.listdir(directory):
        parsed = parse_segment_name(name.removesuffix(CLEANED_SUFFIX))
        if name.endswith(CLEANED_SUFFIX) and parsed is not None:
            unlink_quietly(directory / name)
            notes.append(f"deleted {name} of an unfinished cleaning")
    return notes
