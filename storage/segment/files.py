"""File helpers of the file backend: names, small atomic files, directory fsync, shared fds.

Theory of operation
-------------------
Small metadata files (topic metadata, ``partition.metadata``, the log start offset checkpoint)
are replaced atomically: write ``<name>.tmp``, fsync it, rename it over ``<name>``, fsync the
directory. A crash leaves the old or the new content, plus maybe a stray ``.tmp`` that the next
open removes.

Segment files are shared between the event loop and worker threads (cold reads, fsyncs, seals).
``FileHandle`` counts the users of an fd, so closing or deleting a segment while a thread still
uses it closes the fd only when that thread is done: otherwise the fd number could be reused by
another file and a late ``fsync`` or ``pread`` would hit the wrong file.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from pathlib import Path

from storage.api import StorageError
from storage.segment import osio

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TMP_SUFFIX = ".tmp"
DELETED_SUFFIX = ".deleted"
SNAPSHOT_SUFFIX = ".snapshot"  # producer-state snapshots, Kafka's name
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)

Buffer = bytes | bytearray | mmap.mmap


def segment_path(directory: Path, base_offset: int, suffix: str = LOG_SUFFIX) -> Path:
    """``<dir>/<20-digit base offset><suffix>``, Kafka's file names."""
    return directory / f"{base_offset:020d}{suffix}"


def parse_segment_name(name: str) -> tuple[int, str] | None:
    """(base offset, suffix) of a segment file name, or None for any other file."""
    for suffix in SEGMENT_SUFFIXES:
        stem = name[: -len(suffix)]
        if name.endswith(suffix) and len(stem) == 20 and stem.isdigit():
            return int(stem), suffix
    return None


def snapshot_offsets(directory: Path) -> list[int]:
    """Offsets of the ``<20-digit offset>.snapshot`` files in ``directory``, ascending."""
    out = []
    for name in os.listdir(directory):
        stem = name[: -len(SNAPSHOT_SUFFIX)]
        if name.endswith(SNAPSHOT_SUFFIX) and len(stem) == 20 and stem.isdigit():
            out.append(int(stem))
    return sorted(out)


def read_if_exists(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced(path: Path, data: Buffer) -> None:
    """Create or truncate ``path``, write all of ``data`` and fsync the file (not its
    directory). Raises OSError."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[osio.ops.write(fd, view) :]
        osio.ops.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: Buffer, *, sync_dir: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file (once the
    directory is fsynced: here, or by the caller when it writes several files)."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    write_synced(tmp, data)
    os.replace(tmp, path)
    if sync_dir:
        fsync_dir(path.parent)


def unlink_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


class FileHandle:
    """An fd with a count of users; ``close()`` takes effect when the last user releases it."""

    __slots__ = ("_close_requested", "_fd", "_users")

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._users = 0
        self._close_requested = False

    @property
    def fd(self) -> int:
        """The fd, for use without an await in between (event-loop thread only)."""
        if self._close_requested:
            raise StorageError("segment file is closed")
        return self._fd

    def acquire(self) -> int:
        """Pin the fd for use in a worker thread; pair with ``release()`` on the loop thread."""
        fd = self.fd
        self._users += 1
        return fd

    def release(self) -> None:
        self._users -= 1
        if self._users == 0 and self._close_requested:
            self._really_close()

    def close(self) -> None:
        if self._close_requested:
            return
        self._close_requested = True
        if self._users == 0:
            self._really_close()

    def _really_close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)
