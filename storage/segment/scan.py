"""Walking the batches of a segment file: lookups, read cuts, timestamp search, recovery.

Theory of operation
-------------------
A ``.log`` file is record batches back to back, exactly as appended (see ``wire.records``):
nothing else, no file header. Every function here starts at a known batch boundary (position
0, or a position from the offset index) and walks forward by each batch's length field.

Lookups read only headers: a 16 KiB ``pread`` yields every header that lies in it, so small
batches cost one syscall per chunk, and a large batch costs one ``pread`` for its header (the
walk jumps over its body). They trust the bytes (CRC is not checked on the read path, as in
Kafka) but a length that would not advance the walk is reported as corruption.

Recovery reads the whole segment in large chunks and validates every batch: a full header
(magic 2, sane length), the CRC-32C, and offsets contiguous from the segment's base offset (in
a rolled segment only ascending: the log cleaner leaves gaps). The
valid prefix is what the segment keeps; its indexes are rebuilt on the way. All functions are
blocking and take plain fds: the caller decides whether to run them in a worker thread.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from storage.api import StorageError
from storage.segment.index import IndexWriter
from wire.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    RecordBatchError,
    crc_ok,
    read_batch_header,
)

# base_offset i64 @0, batch_length i32 @8, last_offset_delta i32 @23, max_timestamp i64 @35
PEEK = struct.Struct(">qi11xi8xq")
WALK_CHUNK = 16 * 1024
RECOVERY_CHUNK = 8 * 1024 * 1024


class CorruptSegment(StorageError):
    """A segment's bytes do not walk as batches (found on the read path, after open)."""


def iter_headers(fd: int, pos: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(position, base offset, total size, last offset, max timestamp) of each batch from the
    boundary ``pos`` up to ``end``."""
    unpack, peek = PEEK.unpack_from, PEEK.size
    while pos < end:
        buf = os.pread(fd, min(WALK_CHUNK, end - pos), pos)
        n, p = len(buf), 0
        while p + peek <= n:
            base, length, delta, max_ts = unpack(buf, p)
            total = length + LOG_OVERHEAD
            if total < BATCH_HEADER_SIZE:
                raise CorruptSegment(f"batch length {length} at position {pos + p}")
            yield pos + p, base, total, base + delta, max_ts
            p += total
        if p == 0:
            raise CorruptSegment(f"no whole batch header at position {pos} (end {end})")
        pos += p


def locate(fd: int, pos: int, end: int, offset: int) -> tuple[int, int]:
    """(position, total size) of the first batch from ``pos`` whose last offset is >= ``offset``
    (the batch holding it), or (-1, 0) if the walk reaches ``end`` first."""
    for p, _, total, last, _ in iter_headers(fd, pos, end):
        if last >= offset:
            return p, total
    return -1, 0


def cut(fd: int, pos: int, end: int, limit: int) -> int:
    """The last batch boundary <= ``limit`` reached walking from the boundary ``pos``."""
    if limit >= end:
        return end
    for p, _, total, _, _ in iter_headers(fd, pos, end):
        if p + total > limit:
            return p
    return end


def first_at_or_after(
    fd: int, pos: int, end: int, timestamp: int, min_offset: int
) -> tuple[int, int, int] | None:
    """(position, base offset, size) of the first batch from ``pos`` whose max timestamp is >=
    ``timestamp`` and whose last offset is >= ``min_offset``, or None."""
    for p, base, total, last, max_ts in iter_headers(fd, pos, end):
        if max_ts >= timestamp and last >= min_offset:
            return p, base, total
    return None


def resident(fd: int, pos: int, end: int) -> bool:
    """Whether the first and last bytes of [pos, end) are in the page cache (so a read will not
    wait for the disk): two 1-byte ``preadv(RWF_NOWAIT)`` probes, about a microsecond each."""
    probe = bytearray(1)
    try:
        return all(
            os.preadv(fd, [probe], at, os.RWF_NOWAIT) == 1 for at in {pos, max(pos, end - 1)}
        )
    except (BlockingIOError, AttributeError, OSError):
        return False


def read_exact(fd: int, pos: int, size: int) -> bytes:
    data = os.pread(fd, size, pos)
    if len(data) != size:
        raise CorruptSegment(f"short read: {len(data)} of {size} bytes at position {pos}")
    return data


@dataclass
class Recovered:
    """What validating a segment from position 0 found."""

    size: int  # bytes of the valid prefix
    next_offset: int  # one past the last valid batch (the base offset if none)
    indexes: IndexWriter  # rebuilt over the valid prefix
    first_max_ts: int | None  # the first batch's max timestamp (Kafka's roll basis)
    reason: str | None  # why the walk stopped before the end of the file, if it did


def recover(fd: int, base: int, file_size: int, interval: int, *, gaps: bool = False) -> Recovered:
    """Validate every batch of a segment; stop at the first torn or corrupt one. ``gaps``:
    offsets may jump forward (a rolled segment the cleaner rewrote; never the active one)."""
    indexes = IndexWriter(interval)
    pos, expect, first_ts = 0, base, None
    buf, buf_pos, reason = b"", 0, None
    while pos < file_size:
        at = pos - buf_pos
        if len(buf) - at < BATCH_HEADER_SIZE:
            buf, buf_pos, at = os.pread(fd, RECOVERY_CHUNK, pos), pos, 0
        try:
            h = read_batch_header(buf, at)
        except RecordBatchError as exc:
            reason = f"bad header at {pos}: {exc}"
            break
        total = h.total_size
        if pos + total > file_size:
            reason = f"torn batch at {pos}: {total} bytes declared, {file_size - pos} left"
            break
        if at + total > len(buf):
            buf, buf_pos, at = os.pread(fd, max(RECOVERY_CHUNK, total), pos), pos, 0
            if len(buf) < total:
                reason = f"short read at {pos}"
                break
        if not crc_ok(buf, at, h):
            reason = f"CRC mismatch at {pos} (offset {h.base_offset})"
            break
        if h.last_offset_delta < 0 or (h.base_offset < expect if gaps else h.base_offset != expect):
            reason = f"offset {h.base_offset} at {pos}, expected {expect}"
            break
        if first_ts is None:
            first_ts = h.max_timestamp
        rel = h.base_offset - base
        indexes.add(pos, rel, total, h.max_timestamp, rel)
        expect = h.last_offset + 1
        pos += total
    return Recovered(pos, expect, indexes, first_ts, reason)
