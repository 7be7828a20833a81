"""The in-memory backend (``memory://``): the file backend's semantics without files.

Theory of operation
-------------------
Each partition log keeps segments like the file backend does, each a list of whole batches
with their base offsets, last offsets and max timestamps, and rolls them by the same rules
(``log_policy``): retention, ``delete_before`` and ``size_bytes`` then behave exactly as with
files, which is what the contract suite checks. Nothing is persisted: closing the store loses
everything, and topics live as long as the store object. ``flush`` is a no-op. The log
cleaner's ``replace_segments`` swaps the segment list entry in one step (atomic by
construction).
"""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from storage.api import (
    LogConfig,
    PartitionLog,
    SegmentInfo,
    StorageError,
    TimestampLookup,
    TopicMeta,
    check_metadata_name,
)
from storage.api import TopicPartition as TP
from storage.clock import wall_clock_ms
from storage.log_policy import retention_deletable, segment_expired, should_roll
from storage.log_positions import LogPositions, check_append
from wire.records import iter_batches

_BASE = struct.Struct(">q")


@dataclass
class _Segment:
    base: int
    batches: list[bytes] = field(default_factory=list)
    bases: list[int] = field(default_factory=list)
    lasts: list[int] = field(default_factory=list)
    max_tss: list[int] = field(default_factory=list)
    size: int = 0
    max_ts: int = -1
    max_ts_offset: int = 0
    first_batch_ts: int | None = None  # roll basis, as in the file backend
    created_ms: int = 0
    last_append_ms: int = 0

    def add(self, data: bytes, base: int, last: int, max_ts: int) -> None:
        self.batches.append(data)
        self.bases.append(base)
        self.lasts.append(last)
        self.max_tss.append(max_ts)
        self.size += len(data)
        if max_ts > self.max_ts:
            self.max_ts, self.max_ts_offset = max_ts, base


class MemoryLog(LogPositions):
    def __init__(self, tp: TP, config: LogConfig, clock: Callable[[], int]) -> None:
        self.tp = tp
        self.config = config
        self._clock = clock
        self._segments = [_Segment(0, created_ms=clock())]
        self._lso = self._leo = self._size = 0
        self._closed = False
        self._snapshots: dict[int, bytes] = {}

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"log {self.tp} is closed")

    async def append(
        self, base_offset: int, last_offset: int, max_timestamp: int, batch: bytes
    ) -> None:
        self._check_open()
        check_append(self._leo, base_offset, last_offset, batch)
        seg, now = self._segments[-1], self._clock()
        if should_roll(
            self.config,
            seg_size=seg.size,
            seg_base=seg.base,
            add_bytes=len(batch),
            last_offset=last_offset,
            max_timestamp=max_timestamp,
            first_batch_ts=seg.first_batch_ts,
            created_ms=seg.created_ms,
            now_ms=now,
        ):
            seg = self._roll()
        if seg.size == 0:
            seg.first_batch_ts = max_timestamp
        pieces = list(iter_batches(batch))
        if len(pieces) <= 1:
            seg.add(batch, base_offset, last_offset, max_timestamp)
        else:
            for pos, h in pieces:
                piece = batch[pos : pos + h.total_size]
                seg.add(piece, h.base_offset, h.last_offset, h.max_timestamp)
        seg.last_append_ms = now
        self._leo = last_offset + 1
        self._size += len(batch)

    def _roll(self) -> _Segment:
        seg = _Segment(self._leo, created_ms=self._clock())
        self._segments.append(seg)
        return seg

    async def read(self, offset: int, max_bytes: int) -> bytes:
        self._check_open()
        if not self._lso <= offset <= self._leo:
            raise ValueError(f"offset {offset} is outside the log [{self._lso}, {self._leo}]")
        if offset == self._leo:
            return b""
        bases = [s.base for s in self._segments]
        k = bisect_right(bases, offset) - 1
        out: list[bytes] = []
        budget = max_bytes
        for seg in self._segments[k:]:
            j = bisect_left(seg.lasts, offset) if not out else 0
            for data in seg.batches[j:]:
                if out and len(data) > budget:
                    return b"".join(out)
                out.append(data)
                budget -= len(data)
        return b"".join(out)

    async def find_timestamp(self, timestamp: int) -> TimestampLookup | None:
        self._check_open()
        for seg in self._segments:
            if seg.max_ts < timestamp:
                continue
            for data, base, last, ts in zip(
                seg.batches, seg.bases, seg.lasts, seg.max_tss, strict=True
            ):
                if ts >= timestamp and last >= self._lso:
                    return TimestampLookup(base, data)
        return None

    async def max_timestamp(self) -> tuple[int, int] | None:
        self._check_open()
        best: tuple[int, int] | None = None
        for seg in self._segments:
            if seg.max_ts >= 0 and (best is None or seg.max_ts > best[0]):
                best = (seg.max_ts, seg.max_ts_offset)
        return best

    async def delete_before(self, offset: int) -> None:
        self._check_open()
        if offset > self._leo:
            raise ValueError(f"delete_before({offset}) is past the log end offset {self._leo}")
        if offset <= self._lso:
            return
        self._lso = offset
        n = 0
        while n + 1 < len(self._segments) and self._segments[n + 1].base <= offset:
            n += 1
        self._delete_oldest(n)

    async def apply_retention(
        self, now_ms: int, after_roll: Callable[[], Awaitable[None]] | None = None
    ) -> int:
        self._check_open()
        active = self._segments[-1]
        if active.size and segment_expired(self.config, active.created_ms, now_ms):
            self._roll()
        aged = [(s.size, s.max_ts if s.max_ts >= 0 else s.last_append_ms) for s in self._segments]
        n = retention_deletable(self.config, aged, self._size, now_ms)
        if n == len(self._segments):  # the active segment too: roll, then delete it
            self._roll()
        if after_roll is not None and self._segments[-1] is not active:
            await after_roll()
        self._delete_oldest(n)
        return n

    def _delete_oldest(self, n: int) -> None:
        n = min(n, len(self._segments) - 1)
        if n > 0:
            self._size -= sum(s.size for s in self._segments[:n])
            del self._segments[:n]
            self._lso = max(self._lso, self._segments[0].base)

    def update_config(self, config: LogConfig) -> None:
        self.config = config

    def segment_infos(self) -> list[SegmentInfo]:
        return [
            SegmentInfo(s.base, s.size, s.max_ts, s.max_tss[0] if s.max_tss else -1)
            for s in self._segments
        ]

    def _rolled(self, base: int) -> int:
        for i, seg in enumerate(self._segments[:-1]):
            if seg.base == base:
                return i
        raise ValueError(f"no rolled segment {base} in {self.tp}")

    async def read_segment(self, base_offset: int) -> bytes:
        self._check_open()
        return b"".join(self._segments[self._rolled(base_offset)].batches)

    async def replace_segments(self, bases: Sequence[int], data: bytes) -> bool:
        self._check_open()
        try:
            i = self._rolled(bases[0])
        except ValueError:
            return False
        n = len(bases)
        old = self._segments[i : i + n]
        if [s.base for s in old] != list(bases) or i + n >= len(self._segments):
            return False
        new = _Segment(bases[0], first_batch_ts=old[0].first_batch_ts)
        new.last_append_ms = max(s.last_append_ms for s in old)
        for pos, h in iter_batches(data):
            new.add(data[pos : pos + h.total_size], h.base_offset, h.last_offset, h.max_timestamp)
        self._segments[i : i + n] = [new]
        self._size += new.size - sum(s.size for s in old)
        return True

    @property
    def active_segment_base(self) -> int:
        return self._segments[-1].base

    async def producer_snapshots(self) -> list[int]:
        self._check_open()
        return sorted(self._snapshots)

    async def read_producer_snapshot(self, offset: int) -> bytes | None:
        self._check_open()
        return self._snapshots.get(offset)

    async def write_producer_snapshot(self, offset: int, data: bytes) -> None:
        self._check_open()
        self._snapshots[offset] = bytes(data)

    async def delete_producer_snapshot(self, offset: int) -> None:
        self._check_open()
        self._snapshots.pop(offset, None)

    async def flush(self) -> None:
        self._check_open()

    async def close(self) -> None:
        self._closed = True


class MemoryStore:
    def __init__(self, clock: Callable[[], int] | None = None) -> None:
        self._clock = clock or wall_clock_ms
        self._topics: dict[str, TopicMeta] = {}
        self._logs: dict[TP, MemoryLog] = {}
        self._metadata: dict[str, bytes] = {}

    async def read_metadata(self, name: str) -> bytes | None:
        check_metadata_name(name)
        return self._metadata.get(name)

    async def write_metadata(self, name: str, data: bytes) -> None:
        check_metadata_name(name)
        self._metadata[name] = bytes(data)

    def topics(self) -> list[TopicMeta]:
        return sorted(self._topics.values(), key=lambda m: m.name)

    async def create_topic(self, meta: TopicMeta) -> None:
        if meta.name in self._topics:
            raise ValueError(f"topic {meta.name} already exists")
        self._topics[meta.name] = meta

    async def update_topic(self, meta: TopicMeta) -> None:
        old = self._topics.get(meta.name)
        if old is None:
            raise ValueError(f"unknown topic {meta.name}")
        if old.topic_id != meta.topic_id:
            raise ValueError(f"topic {meta.name} has id {old.topic_id}, not {meta.topic_id}")
        self._topics[meta.name] = meta

    async def delete_topic(self, name: str) -> None:
        if self._topics.pop(name, None) is None:
            raise ValueError(f"unknown topic {name}")
        for tp in [tp for tp in self._logs if tp.topic == name]:
            await self._logs.pop(tp).close()

    async def open_partition(self, tp: TP, config: LogConfig) -> PartitionLog:
        meta = self._topics.get(tp.topic)
        if meta is None or not 0 <= tp.partition < meta.partitions:
            raise ValueError(f"no partition {tp}")
        log = self._logs.get(tp)
        if log is None:
            log = self._logs[tp] = MemoryLog(tp, config, self._clock)
        log._closed = False  # a closed memory log reopens with its data, like a file one
        return log

    async def close(self) -> None:
        for log in self._logs.values():
            await log.close()
