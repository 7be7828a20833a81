"""One log segment: a ``.log`` file of batches plus its ``.index`` and ``.timeindex``.

Theory of operation
-------------------
A segment is named by its base offset, the offset of its first batch, and holds a contiguous
run of batches. Exactly one segment per partition is *active* (the last): it takes appends, its
fd is open read-write, and its indexes grow in memory (``IndexWriter``) with no index files on
disk. Every other segment is *sealed*: fsynced, immutable, with complete index files that are
memory-mapped on first use and an fd opened on first read.

Sealing (at a roll, and for the active segment when the log closes) fsyncs the ``.log``,
writes both index files atomically and fsyncs the directory. Because an active segment never
has index files, a segment found at open without them was being appended to or sealed when the
process died, and is validated batch by batch (``scan.recover``). That rule, together with the
store's clean-shutdown marker, is the whole recovery point bookkeeping: no checkpoint of a
"recovery point offset" as in Kafka.

Appends are one ``os.pwrite`` at the segment's size. A failed or short write is truncated back
(``ftruncate``), so the file always ends at a batch boundary; if even that fails the caller
must treat the log as failed.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path

from storage.api import StorageError
from storage.segment import osio, scan
from storage.segment.files import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    FileHandle,
    fsync_dir,
    segment_path,
    unlink_quietly,
    write_atomic,
)
from storage.segment.index import (
    OFFSET_ENTRY,
    TIME_ENTRY,
    Index,
    IndexWriter,
    ends_of,
    load_index,
    map_index,
    peek_index,
    plausible,
)
from wire.records import BATCH_HEADER_SIZE


class WriteFailed(StorageError):
    """A write failed and could not be undone: the file may end inside a batch."""


class Segment:
    __slots__ = (
        "_handle",
        "_offsets",
        "_times",
        "base",
        "created_ms",
        "directory",
        "first_batch_ts",
        "max_ts",
        "max_ts_offset",
        "size",
        "writer",
    )

    def __init__(self, directory: Path, base: int, size: int) -> None:
        self.directory = directory
        self.base = base
        self.size = size
        self.writer: IndexWriter | None = None  # set while active
        self.first_batch_ts: int | None = None  # first batch's max timestamp (roll basis)
        self.created_ms = 0  # wall time it was created or opened (roll basis without timestamps)
        self.max_ts = -1  # sealed segments; an active one asks its writer
        self.max_ts_offset = base
        self._handle: FileHandle | None = None
        self._offsets: Index | None = None
        self._times: Index | None = None

    def path(self, suffix: str = ".log") -> Path:
        return segment_path(self.directory, self.base, suffix)

    # -- opening (blocking) ------------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path, base: int, interval: int) -> Segment:
        """A new empty active segment. Raises StorageError (nothing created) on failure."""
        seg = cls(directory, base, 0)
        try:
            fd = os.open(seg.path(), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError as exc:
            raise StorageError(f"cannot create segment {seg.path()}: {exc}") from exc
        seg._handle = FileHandle(fd)
        seg.writer = IndexWriter(interval)
        return seg

    @classmethod
    def open_sealed(cls, directory: Path, base: int, size: int, limit: int | None) -> Segment:
        """A segment with index files that pass the sanity checks; ValueError/OSError if they
        are missing or implausible. ``limit`` is the next segment's base offset, if known."""
        seg = cls(directory, base, size)
        offsets = peek_index(seg.path(INDEX_SUFFIX), OFFSET_ENTRY)
        times = peek_index(seg.path(TIME_INDEX_SUFFIX), TIME_ENTRY)
        if not plausible(offsets, True, size) or not plausible(times, False, size):
            raise ValueError("index entries out of order or outside the log")
        if offsets is not None:
            rel, pos = offsets[1]
            fd = os.open(seg.path(), os.O_RDONLY)
            try:
                header = os.pread(fd, scan.PEEK.size, pos)
            finally:
                os.close(fd)
            if len(header) < scan.PEEK.size or scan.PEEK.unpack(header)[0] != base + rel:
                raise ValueError("last index entry does not point at its batch")
        if times is not None:
            ts, rel = times[1]
            if limit is not None and base + rel >= limit:
                raise ValueError("time index points past the segment")
            seg.max_ts, seg.max_ts_offset = ts, base + rel
        return seg

    @classmethod
    def open_active(
        cls, directory: Path, base: int, size: int, interval: int
    ) -> tuple[Segment, int]:
        """The last segment after a clean shutdown: its index files become the in-memory
        indexes (the caller then deletes them), and its end is found by walking the headers
        from the last entry. Returns the segment and its next offset; ValueError if anything
        does not add up (the caller then recovers the segment instead)."""
        seg = cls(directory, base, size)
        writer = IndexWriter(
            interval,
            load_index(seg.path(INDEX_SUFFIX), OFFSET_ENTRY),
            load_index(seg.path(TIME_INDEX_SUFFIX), TIME_ENTRY),
        )
        if not plausible(ends_of(writer.offsets), True, size) or not plausible(
            ends_of(writer.times), False, size
        ):
            raise ValueError("index entries out of order or outside the log")
        seg._handle = FileHandle(os.open(seg.path(), os.O_RDWR))
        try:
            last = writer.offsets.last()
            pos = last[1] if last is not None else 0
            next_offset, end = base + (last[0] if last is not None else 0), pos
            for p, batch_base, total, last_offset, max_ts in scan.iter_headers(
                seg._handle.fd, pos, size
            ):
                if batch_base != next_offset or p + total > size:
                    raise ValueError(f"batch at {p} does not follow its predecessor")
                if max_ts > writer.max_ts:
                    writer.max_ts, writer.max_ts_rel = max_ts, batch_base - base
                next_offset, end = last_offset + 1, p + total
            if end != size:
                raise ValueError("segment does not end at a batch boundary")
            writer.since = size - pos
            seg.writer = writer
            seg.first_batch_ts = seg.first_max_ts()
        except BaseException:  # ValueError, or an OSError the caller recovers from: no fd kept
            seg._handle.close()
            raise
        return seg, next_offset

    @classmethod
    def open_recovered(
        cls, directory: Path, base: int, interval: int, *, gaps: bool = False
    ) -> tuple[Segment, int, str]:
        """Validate every batch, truncate the file after the last good one, rebuild the
        indexes. Returns the segment (active), its next offset, and why it was truncated
        ("" if it was not)."""
        seg = cls(directory, base, 0)
        fd = os.open(seg.path(), os.O_RDWR)
        seg._handle = FileHandle(fd)
        try:
            file_size = os.fstat(fd).st_size
            rec = scan.recover(fd, base, file_size, interval, gaps=gaps)
            if rec.size < file_size:
                os.ftruncate(fd, rec.size)
                os.fsync(fd)
        except BaseException:
            seg._handle.close()
            raise
        seg.size, seg.writer = rec.size, rec.indexes
        seg.first_batch_ts = rec.first_max_ts if rec.size else None
        return seg, rec.next_offset, (rec.reason or "") if rec.size < file_size else ""

    def first_max_ts(self) -> int | None:
        """The first batch's max timestamp: the segment's age counts from it (Kafka)."""
        if self.size < BATCH_HEADER_SIZE:
            return None
        header = os.pread(self.fd(), scan.PEEK.size, 0)
        return int(scan.PEEK.unpack(header)[3])

    def unlink_index_files(self) -> None:
        unlink_quietly(self.path(INDEX_SUFFIX))
        unlink_quietly(self.path(TIME_INDEX_SUFFIX))

    # -- state -------------------------------------------------------------------------------

    def fd(self) -> int:
        """The segment's fd, opened read-only on first use for a sealed segment."""
        if self._handle is None:
            self._handle = FileHandle(os.open(self.path(), os.O_RDONLY))
        return self._handle.fd

    def handle(self) -> FileHandle:
        self.fd()
        assert self._handle is not None
        return self._handle

    @property
    def largest_timestamp(self) -> int:
        return self.writer.max_ts if self.writer is not None else self.max_ts

    @property
    def largest_timestamp_offset(self) -> int:
        w = self.writer
        return self.base + w.max_ts_rel if w is not None else self.max_ts_offset

    def offsets(self) -> Index:
        if self.writer is not None:
            return self.writer.offsets
        if self._offsets is None:
            self._offsets = map_index(self.path(INDEX_SUFFIX), OFFSET_ENTRY)
        return self._offsets

    def times(self) -> Index:
        if self.writer is not None:
            return self.writer.times
        if self._times is None:
            self._times = map_index(self.path(TIME_INDEX_SUFFIX), TIME_ENTRY)
        return self._times

    def lookup(self, offset: int) -> int:
        """Position of the indexed batch boundary at or before ``offset``."""
        idx = self.offsets()
        i = idx.floor_key(offset - self.base)
        return idx.entry(i)[1] if i >= 0 else 0

    def time_lookup(self, timestamp: int) -> int:
        """An offset at or before the first batch whose max timestamp is >= ``timestamp``."""
        idx = self.times()
        i = idx.floor_key(timestamp - 1)
        return self.base + idx.entry(i)[1] if i >= 0 else self.base

    # -- reads (blocking; the caller pins the fd if it runs this in a thread) ----------------

    def read(self, fd: int, offset: int | None, budget: int, end: int) -> tuple[bytes, bool]:
        """Whole batches from the batch holding ``offset`` (or from the segment's start if
        None), stopping before the batch that would pass ``budget`` bytes, but the batch
        holding ``offset`` always whole. ``end`` is the segment size to respect. Returns the
        bytes and whether they reach ``end`` (so the caller may go on in the next segment)."""
        if offset is None:
            start, first = 0, 0
        else:
            start, first = scan.locate(fd, self.lookup(offset), end, offset)
            if start < 0:
                return b"", True
        limit = start + max(budget, first)
        if limit >= end:
            stop = end
        else:
            idx = self.offsets()
            i = idx.floor_value(limit)
            jump = max(idx.entry(i)[1], start) if i >= 0 else start
            stop = scan.cut(fd, jump, end, limit)
        if stop <= start:
            return b"", stop == end  # at the end: an empty (cleaned) segment
        return scan.read_exact(fd, start, stop - start), stop == end

    # -- appends (event loop) ----------------------------------------------------------------

    def append(self, data: bytes, rel: int, max_ts: int, ts_rel: int) -> None:
        """Write ``data`` at the end; StorageError (file unchanged) or WriteFailed if not."""
        assert self.writer is not None and self._handle is not None
        fd, pos, n = self._handle.fd, self.size, len(data)
        try:
            done = osio.ops.pwrite(fd, data, pos)
            while done < n:
                more = osio.ops.pwrite(fd, memoryview(data)[done:], pos + done)
                if more <= 0:
                    raise OSError(errno.ENOSPC, "short write")
                done += more
        except OSError as exc:
            try:
                osio.ops.ftruncate(fd, pos)
            except OSError as again:
                raise WriteFailed(f"write failed ({exc}), truncating failed ({again})") from exc
            raise StorageError(f"write to {self.path().name} failed: {exc}") from exc
        self.writer.add(pos, rel, n, max_ts, ts_rel)
        self.size = pos + n

    # -- sealing and closing -----------------------------------------------------------------

    def persist(self, fd: int) -> None:
        """Blocking: fsync the log, then ``write_indexes``. The writer must be finished (no
        more appends) while this runs in a thread."""
        osio.ops.fsync(fd)
        self.write_indexes()

    def write_indexes(self) -> None:
        """Blocking: write both index files atomically and fsync the directory."""
        assert self.writer is not None
        write_atomic(self.path(INDEX_SUFFIX), self.writer.offsets.buffer, sync_dir=False)
        write_atomic(self.path(TIME_INDEX_SUFFIX), self.writer.times.buffer, sync_dir=False)
        fsync_dir(self.directory)

    def mark_sealed(self) -> None:
        """After ``persist``: lookups switch to the mapped index files."""
        w = self.writer
        if w is not None:
            self.max_ts, self.max_ts_offset = w.max_ts, self.base + w.max_ts_rel
            self.writer = None

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()

    def delete_files(self) -> None:
        """Blocking. The .log goes first: index files without a .log are removed at open."""
        unlink_quietly(self.path())
        self.unlink_index_files()

    def rename_deleted(self) -> list[Path]:
        """Blocking: Kafka's first step of an asynchronous delete, the files renamed to
        ``*.deleted`` (the .log first, as in ``delete_files``); the open fds stay usable and
        the next open removes ``*.deleted`` files. Returns the new paths."""
        out = []
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            src = self.path(suffix)
            dst = src.with_name(src.name + DELETED_SUFFIX)
            try:
                os.rename(src, dst)
            except FileNotFoundError:
                continue
            out.append(dst)
        return out


def read_segments(
    plan: list[tuple[Segment, int]], fds: Sequence[int], offset: int, budget: int
) -> bytes:
    """Blocking: whole batches from the batch holding ``offset`` across the ``plan``'s
    segments (each with the size to respect) while ``budget`` lasts."""
    parts: list[bytes] = []
    for (seg, end), fd in zip(plan, fds, strict=True):
        data, at_end = seg.read(fd, offset if not parts else None, budget, end)
        if data:
            parts.append(data)
            budget -= len(data)
        if not at_end or budget < BATCH_HEADER_SIZE:
            break
    return parts[0] if len(parts) == 1 else b"".join(parts)
