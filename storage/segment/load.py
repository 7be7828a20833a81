"""Opening a partition directory: which segments there are, which need recovery, where the log
starts and ends. Blocking; the store runs it in a worker thread.

Recovery rules
--------------
0. Swaps of cleaned segments are completed or rolled back first (``swap.complete_swaps``).
1. Strays go first: ``*.tmp`` and ``*.deleted`` files, and index files without their ``.log``,
   only if the name is one this backend writes; any other file is reported and left alone.
2. The segments are the ``<20-digit base offset>.log`` files, in base offset order.
3. A segment that is not the last is trusted if both its index files pass the sanity checks
   (``Segment.open_sealed``). Otherwise (an index missing, cut mid-entry, out of order, or its
   last entry not landing on the right batch) the segment is recovered.
4. The last segment is recovered after an unclean shutdown (the store found no clean-shutdown
   marker). After a clean one it is loaded from its index files and its end found by walking
   the headers after the last index entry; if that does not add up, it is recovered.
5. Recovering validates every batch from position 0 (header, magic, length, CRC-32C, offsets
   contiguous from the base offset; in a segment before the last only ascending, since the
   cleaner leaves gaps), truncates the file after the last good batch and rebuilds both
   indexes. If a segment that is not the last had to be truncated, or runs past the next
   segment's base offset, every later segment is deleted: the log is always a prefix of what
   was written (minus what the cleaner removed), never a log with a hole. (A segment before
   the last that ends early at a batch boundary now reads as a cleaned one: such a loss inside
   a sealed, fsynced segment is no longer detected.)
6. The log start offset is the larger of the checkpoint (``log-start-offset``, written by
   ``delete_before``) and the first segment's base offset. If it is beyond the recovered end
   (the tail was lost, or a ``delete_before`` reached an end that never got to disk), the log
   restarts empty at the log start offset, as Kafka does. Segments wholly below the
   checkpoint (a crash came between ``delete_before``'s checkpoint and its deletion) are
   deleted before anything is recovered, as Kafka's retention deletes segments the log start
   offset has passed.
7. The last segment becomes the active one: its index files are deleted and the directory
   fsynced, so that from now on "no index files" means "was active when the process died".
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from storage.api import StorageError
from storage.segment.files import (
    DELETED_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SNAPSHOT_SUFFIX,
    TMP_SUFFIX,
    fsync_dir,
    parse_segment_name,
    unlink_quietly,
    write_atomic,
)
from storage.segment.segment import Segment
from storage.segment.swap import CLEANED_SUFFIX, SWAP_SUFFIX, complete_swaps

log = logging.getLogger("kafkad.storage")

CHECKPOINT = "log-start-offset"
OWN_SUFFIXES = (*SEGMENT_SUFFIXES, SNAPSHOT_SUFFIX, SWAP_SUFFIX)


@dataclass
class Loaded:
    segments: list[Segment]
    log_start_offset: int
    log_end_offset: int
    notes: list[str] = field(default_factory=list)  # what recovery did, for the broker's log


def read_checkpoint(directory: Path) -> int:
    """The persisted log start offset, 0 if there is none (or it is unreadable)."""
    try:
        version, value = (directory / CHECKPOINT).read_text().split()
        return int(value) if version == "0" else 0
    except (OSError, ValueError):
        return 0


def write_checkpoint(directory: Path, offset: int) -> None:
    write_atomic(directory / CHECKPOINT, f"0\n{offset}\n".encode())


def _own_name(name: str) -> bool:
    """A file name this backend writes in a partition directory (a stray ``.tmp`` of one
    included): segment files, snapshots, swap manifests and ``.cleaned`` files, metadata."""
    for suffix in (TMP_SUFFIX, CLEANED_SUFFIX):
        name = name.removesuffix(suffix)
    if name in (CHECKPOINT, "partition.metadata"):
        return True
    stem, dot, suffix = name.partition(".")
    return len(stem) == 20 and stem.isdigit() and dot + suffix in OWN_SUFFIXES


def _remove_strays(directory: Path, notes: list[str]) -> list[int]:
    """Delete leftovers of interrupted writes (our ``.tmp`` files, index files without their
    ``.log``); return the segment base offsets. Files of other names are reported in ``notes``
    and left alone."""
    names = os.listdir(directory)
    bases: set[int] = set()
    for name in names:
        parsed = parse_segment_name(name)
        if parsed is not None and parsed[1] == LOG_SUFFIX:
            bases.add(parsed[0])
    for name in names:
        if not _own_name(name.removesuffix(DELETED_SUFFIX)):
            notes.append(f"leaving alone {name}: not a file kafkad writes")
            continue
        parsed = parse_segment_name(name)
        if name.endswith((TMP_SUFFIX, DELETED_SUFFIX)) or (
            parsed is not None and parsed[0] not in bases
        ):
            unlink_quietly(directory / name)
    return sorted(bases)


def load_partition(directory: Path, interval: int, clean: bool) -> Loaded:
    """Open the partition in ``directory`` (rules above). If anything fails, every segment
    opened so far is closed: the store answers the failure and tries again at the next request,
    so an fd kept per try would run the process out of them."""
    opened: list[Segment] = []
    try:
        return _load(directory, interval, clean, opened)
    except BaseException:
        for seg in opened:
            seg.close()
        raise


def _load(directory: Path, interval: int, clean: bool, opened: list[Segment]) -> Loaded:
    directory.mkdir(parents=True, exist_ok=True)
    notes: list[str] = complete_swaps(directory)
    bases = _remove_strays(directory, notes)
    checkpoint = read_checkpoint(directory)
    while len(bases) > 1 and bases[1] <= checkpoint:  # rule 6: wholly below the start
        notes.append(f"segment {bases[0]}: below the log start offset {checkpoint}: deleted")
        Segment(directory, bases.pop(0), 0).delete_files()
    segments: list[Segment] = []
    next_offset = 0
    for i, base in enumerate(bases):
        last = i == len(bases) - 1
        limit = None if last else bases[i + 1]
        size = os.stat(directory / f"{base:020d}{LOG_SUFFIX}").st_size
        seg: Segment | None = None
        if not last or clean:
            try:
                if last:
                    seg, next_offset = Segment.open_active(directory, base, size, interval)
                else:
                    seg = Segment.open_sealed(directory, base, size, limit)
                    next_offset = bases[i + 1]
                opened.append(seg)
            except (OSError, ValueError, StorageError) as exc:
                notes.append(f"segment {base}: rebuilding its indexes ({exc})")
        if seg is None:
            seg, next_offset, reason = Segment.open_recovered(
                directory, base, interval, gaps=not last
            )
            opened.append(seg)
            if reason:
                notes.append(f"segment {base}: truncated to {seg.size} bytes: {reason}")
            if not last and (reason or limit is None or next_offset > limit):
                notes.append(f"segment {base}: deleting the {len(bases) - i - 1} after it")
                for later in bases[i + 1 :]:
                    Segment(directory, later, 0).delete_files()
                segments.append(seg)
                break
            if not last:
                assert seg.writer is not None and limit is not None
                next_offset = limit  # a cleaned segment may end before the next one's base
                seg.writer.finish()
                seg.persist(seg.fd())
                seg.mark_sealed()
        segments.append(seg)

    log_start = max(checkpoint, segments[0].base if segments else checkpoint)
    if not segments or log_start > next_offset:
        if segments:
            notes.append(f"log start offset {log_start} is past the end {next_offset}: emptied")
        for seg in segments:
            seg.close()
            seg.delete_files()
        segments = [Segment.create(directory, log_start, interval)]
        opened.append(segments[0])
        next_offset = log_start
    segments[-1].unlink_index_files()
    fsync_dir(directory)
    for note in notes:
        log.warning("%s: %s", directory.name, note)
    return Loaded(segments, log_start, next_offset, notes)
