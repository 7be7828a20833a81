"""A partition as the request handlers see it: its log plus the broker-side rules around it.

Theory of operation
-------------------
Appends happen in Kafka's order: the handler validated the batch (``wire.records``); here the
next offset is written into the batch in place, the bytes go to the log, and only then do the
high watermark move and fetchers waiting for data wake. A per-partition lock keeps offset
assignment and the write together even when the backend awaits an fsync, so two produce
requests can never be given the same offsets.

kafkad is a single-replica broker: the high watermark is the log end offset, and the last
stable offset equals it until transactions arrive (a later issue).

Long polls: a Fetch that wants more data registers a ``trio.Event`` with every partition it
reads; each append sets (and forgets) the events registered with it.
"""

from __future__ import annotations

import struct
import uuid

import crc32c
import trio

from storage.api import LogConfig, PartitionLog, TimestampLookup, TopicPartition
from wire.records import (
    ATTR_TIMESTAMP_TYPE,
    CRC_START,
    BatchHeader,
    set_base_offset,
    set_partition_leader_epoch,
)

_ATTRS = struct.Struct(">h")
_TS = struct.Struct(">q")
_CRC = struct.Struct(">I")
LEADER_EPOCH = 0  # one node, never re-elected: every partition stays at leader epoch 0


def stamp_log_append_time(buf: bytearray, now_ms: int) -> None:
    """For LogAppendTime topics: set the timestamp-type bit and write the broker's time as the
    max timestamp, then recompute the CRC (the only case where the broker re-signs a batch)."""
    attrs = _ATTRS.unpack_from(buf, 21)[0] | ATTR_TIMESTAMP_TYPE
    _ATTRS.pack_into(buf, 21, attrs)
    _TS.pack_into(buf, 35, now_ms)
    _CRC.pack_into(buf, 17, crc32c.crc32c(memoryview(buf)[CRC_START:]))


class Partition:
    def __init__(
        self,
        tp: TopicPartition,
        topic_id: uuid.UUID,
        log: PartitionLog,
        config: LogConfig,
        log_append_time: bool = False,
    ) -> None:
        self.tp = tp
        self.topic_id = topic_id
        self.log = log
        self.config = config
        self.log_append_time = log_append_time
        self._lock = trio.Lock()
        self._waiters: set[trio.Event] = set()
        self.deleted = False

    @property
    def high_watermark(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    async def append(self, data: bytes, header: BatchHeader, now_ms: int) -> tuple[int, int]:
        """Append one validated client batch; returns (base offset, log append time or -1).

        Raises ``storage.api.StorageError`` if the write failed (nothing is acknowledged)."""
        async with self._lock:
            base = self.log.log_end_offset
            buf = bytearray(data)
            set_base_offset(buf, 0, base)
            set_partition_leader_epoch(buf, 0, LEADER_EPOCH)
            append_time = -1
            max_ts = header.max_timestamp
            if self.log_append_time:
                stamp_log_append_time(buf, now_ms)
                append_time = max_ts = now_ms
            await self.log.append(base, base + header.last_offset_delta, max_ts, bytes(buf))
        self.wake_waiters()
        return base, append_time

    def wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for event in waiters:
            event.set()

    def add_waiter(self, event: trio.Event) -> None:
        self._waiters.add(event)

    def remove_waiter(self, event: trio.Event) -> None:
        self._waiters.discard(event)

    async def read(self, offset: int, max_bytes: int) -> bytes:
        return await self.log.read(offset, max_bytes)

    async def find_timestamp(self, timestamp: int) -> TimestampLookup | None:
        return await self.log.find_timestamp(timestamp)
