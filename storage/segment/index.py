"""A segment's sparse offset index and time index.

Theory of operation
-------------------
Formats (big-endian, fixed-size entries, Kafka's layouts):

``<base>.index``      (relative offset u32, position u32): the batch starting at byte
                      ``position`` of the ``.log`` has base offset ``base + relative offset``.
``<base>.timeindex``  (timestamp i64, relative offset u32): ``timestamp`` is the largest batch
                      max timestamp in the segment up to the batch at ``relative offset``, the
                      batch where that maximum first appeared.

Both are sorted: offset index entries by offset and by position (strictly), time index entries
by timestamp (strictly) and offset. They are sparse: an entry is added for a batch when more
than ``index.interval.bytes`` were appended since the previous entry (never for the segment's
first batch, whose position is 0), and a time entry only when the maximum timestamp grew. A
lookup therefore gives a batch boundary at or before the target, from which the reader scans
batch headers forward.

Lifecycle. The *active* segment's indexes live in memory (a growing ``bytearray`` in the file
format) and are absent from disk: they are written (tmp + fsync + rename) when the segment is
sealed at a roll, and when the log closes. A sealed segment's index files are memory-mapped
read-only on first use, so a large retained log costs page cache, not heap.

Deviations from Kafka: the offset index stores a batch's *base* offset (Kafka stores its last
offset; both give a batch boundary at or before the target), and files are never preallocated
to ``segment.index.bytes``: they are exactly as long as their entries.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

from storage.segment.files import Buffer

OFFSET_ENTRY = struct.Struct(">II")
TIME_ENTRY = struct.Struct(">qI")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")


class Index:
    """Sorted fixed-size entries (key, value) in a buffer laid out as on disk."""

    __slots__ = ("_buf", "_entry", "_key", "_key_size", "_val", "_width")

    def __init__(self, entry: struct.Struct, buf: Buffer | None = None) -> None:
        self._entry = entry
        self._width = entry.size
        self._key = _I64 if entry is TIME_ENTRY else _U32
        self._key_size = self._key.size
        self._val = _U32
        self._buf: Buffer = bytearray() if buf is None else buf

    def __len__(self) -> int:
        return len(self._buf) // self._width

    @property
    def buffer(self) -> Buffer:
        return self._buf

    def append(self, key: int, value: int) -> None:
        buf = self._buf
        assert isinstance(buf, bytearray), "only an active segment's index grows"
        buf += self._entry.pack(key, value)

    def entry(self, i: int) -> tuple[int, int]:
        key, value = self._entry.unpack_from(self._buf, i * self._width)
        return int(key), int(value)

    def last(self) -> tuple[int, int] | None:
        n = len(self)
        return self.entry(n - 1) if n else None

    def floor_key(self, key: int) -> int:
        """Index of the last entry whose key is <= ``key``, or -1."""
        return self._floor(key, self._key, 0)

    def floor_value(self, value: int) -> int:
        """Index of the last entry whose value is <= ``value`` (values are sorted too), or -1."""
        return self._floor(value, self._val, self._key_size)

    def _floor(self, x: int, field: struct.Struct, at: int) -> int:
        buf, width, unpack = self._buf, self._width, field.unpack_from
        lo, hi, found = 0, len(buf) // width - 1, -1
        while lo <= hi:
            mid = (lo + hi) >> 1
            if unpack(buf, mid * width + at)[0] <= x:
                found, lo = mid, mid + 1
            else:
                hi = mid - 1
        return found

    def close(self) -> None:
        if isinstance(self._buf, mmap.mmap):
            self._buf.close()
        self._buf = b""


def map_index(path: Path, entry: struct.Struct) -> Index:
    """A sealed segment's index, memory-mapped read-only (an empty file maps to no entries).
    Raises OSError if it cannot be read, ValueError if its size is not whole entries."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size % entry.size:
            raise ValueError(f"{path.name}: {size} bytes is not a whole number of entries")
        buf: Buffer = mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else b""
    finally:
        os.close(fd)
    return Index(entry, buf)


def load_index(path: Path, entry: struct.Struct) -> Index:
    """An index file read into a growable buffer (the segment becomes active again)."""
    data = path.read_bytes()
    if len(data) % entry.size:
        raise ValueError(f"{path.name}: {len(data)} bytes is not a whole number of entries")
    return Index(entry, bytearray(data))


def peek_index(path: Path, entry: struct.Struct) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The first and last entries of an index file without mapping it (None if it is empty).
    Raises OSError if it cannot be read, ValueError if its size is not whole entries."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size % entry.size:
            raise ValueError(f"{path.name}: {size} bytes is not a whole number of entries")
        if size == 0:
            return None
        first = entry.unpack(os.pread(fd, entry.size, 0))
        last = entry.unpack(os.pread(fd, entry.size, size - entry.size))
    finally:
        os.close(fd)
    return (int(first[0]), int(first[1])), (int(last[0]), int(last[1]))


def plausible(
    ends: tuple[tuple[int, int], tuple[int, int]] | None, offset_index: bool, log_size: int
) -> bool:
    """Kafka's cheap sanity check instead of reading every entry: the first and last entries
    are in order and (offset index) point inside the log, past its first batch. The segment
    also checks that the last offset entry lands on a batch with the right base offset."""
    if ends is None:
        return True
    (k0, v0), (k1, v1) = ends
    if offset_index:
        return 0 < v0 <= v1 < log_size and 0 <= k0 <= k1
    return k0 <= k1 and 0 <= v0 <= v1


def ends_of(index: Index) -> tuple[tuple[int, int], tuple[int, int]] | None:
    n = len(index)
    return (index.entry(0), index.entry(n - 1)) if n else None


class IndexWriter:
    """The growing indexes of an active segment, with its running maximum timestamp.

    ``add`` is called once per append (live) or per batch (recovery) in Kafka's order: update
    the maximum, add entries if more than ``interval`` bytes went by since the last entry, then
    count the new bytes. ``finish`` adds the final time entry when the segment is sealed or
    closed, so the time index's last entry is the segment's maximum timestamp.
    """

    __slots__ = ("interval", "max_ts", "max_ts_rel", "offsets", "since", "times")

    def __init__(
        self, interval: int, offsets: Index | None = None, times: Index | None = None
    ) -> None:
        self.interval = interval
        self.offsets = offsets if offsets is not None else Index(OFFSET_ENTRY)
        self.times = times if times is not None else Index(TIME_ENTRY)
        self.since = 0
        last = self.times.last()
        self.max_ts, self.max_ts_rel = last if last is not None else (-1, 0)

    def add(self, pos: int, rel: int, nbytes: int, max_ts: int, ts_rel: int) -> None:
        if max_ts > self.max_ts:
            self.max_ts, self.max_ts_rel = max_ts, ts_rel
        if self.since > self.interval:
            self.offsets.append(rel, pos)
            self._time_entry()
            self.since = 0
        self.since += nbytes

    def finish(self) -> None:
        self._time_entry()

    def _time_entry(self) -> None:
        last = self.times.last()
        if self.max_ts > (last[0] if last is not None else -1):
            self.times.append(self.max_ts, self.max_ts_rel)
