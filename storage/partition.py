"""A partition as the request handlers see it: its log plus the broker-side rules around it.

Theory of operation
-------------------
Appends happen in Kafka's order: the handler validated the batch (``wire.records``); here the
next offset is written into the batch in place, the bytes go to the log, and only then do the
high watermark move and fetchers waiting for data wake. A per-partition lock keeps offset
assignment and the write together even when the backend awaits an fsync, so two produce
requests can never be given the same offsets.

Idempotent producers (spec eos.md §3): a batch with a producer id is checked against the
partition's ``ProducerStateManager`` under the lock *before* anything is written; an exact
duplicate of one of the producer's last 5 batches is answered with its original offsets and
nothing is appended; a refused batch gets its ``ErrorCode``. The producer state is updated only
after the log append returned, so a failed write leaves it untouched.

Producer-state durability: a snapshot (``storage/producer_snapshot.py``) is written when the
log rolls (taken at the new segment's base offset, before the batch that caused the roll is
applied) and by ``take_snapshot`` at clean shutdown. ``load_producer_state`` rebuilds the state
when the partition is opened: the newest valid snapshot at or below the log end offset, then a
replay of the batch headers after it (records are never decoded). Only the two newest snapshots
are kept.

kafkad is a single-replica broker: the high watermark is the log end offset, and the last
stable offset equals it until transactions arrive (a later issue).

Long polls: a Fetch that wants more data registers a ``trio.Event`` with every partition it
reads; each append sets (and forgets) the events registered with it.
"""

from __future__ import annotations

import logging
import struct
import uuid

import crc32c
import trio
from kio.schema.errors import ErrorCode

from storage.api import LogConfig, PartitionLog, StorageError, TimestampLookup, TopicPartition
from storage.producer_snapshot import SnapshotError, decode_snapshot, encode_snapshot
from storage.producer_state import (
    BatchMetadata,
    ProducerAppendInfo,
    ProducerStateEntry,
    ProducerStateManager,
)
from wire.records import (
    ATTR_TIMESTAMP_TYPE,
    CRC_START,
    BatchHeader,
    iter_batches,
    set_base_offset,
    set_partition_leader_epoch,
)

log = logging.getLogger("kafkad.partition")

_ATTRS = struct.Struct(">h")
_TS = struct.Struct(">q")
_CRC = struct.Struct(">I")
LEADER_EPOCH = 0  # one node, never re-elected: every partition stays at leader epoch 0
SNAPSHOTS_KEPT = 2
REPLAY_READ_BYTES = 8 * 1024 * 1024


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
        self.producers = ProducerStateManager()

    @property
    def high_watermark(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    async def append(
        self, data: bytes, header: BatchHeader, now_ms: int
    ) -> tuple[int, int] | ErrorCode:
        """Append one validated client batch; returns (base offset, log append time or -1), or
        the error that refused it (INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER). A
        duplicate of a retained batch returns that batch's original offset and append time.

        Raises ``storage.api.StorageError`` if the write failed (nothing is acknowledged)."""
        async with self._lock:
            info: ProducerAppendInfo | None = None
            if header.producer_id >= 0:
                checked = self.producers.prepare_update(
                    header, now_ms if self.log_append_time else None
                )
                if isinstance(checked, ErrorCode):
                    return checked
                if isinstance(checked, BatchMetadata):
                    return checked.first_offset, (checked.timestamp if self.log_append_time else -1)
                info = checked
            base = self.log.log_end_offset
            buf = bytearray(data)
            set_base_offset(buf, 0, base)
            set_partition_leader_epoch(buf, 0, LEADER_EPOCH)
            append_time = -1
            max_ts = header.max_timestamp
            if self.log_append_time:
                stamp_log_append_time(buf, now_ms)
                append_time = max_ts = now_ms
            segment_before = self.log.active_segment_base
            await self.log.append(base, base + header.last_offset_delta, max_ts, bytes(buf))
            rolled = self.log.active_segment_base != segment_before
            snapshot = encode_snapshot(base, list(self.producers)) if rolled and base > 0 else None
            if info is not None:
                self.producers.update(info, base)
            if snapshot is not None:
                await self._write_snapshot(base, snapshot)
        self.wake_waiters()
        return base, append_time

    # -- producer state ----------------------------------------------------------------------

    async def _write_snapshot(self, offset: int, data: bytes) -> None:
        """Store a snapshot and prune old ones. A failure only costs a longer replay."""
        try:
            await self.log.write_producer_snapshot(offset, data)
            for old in (await self.log.producer_snapshots())[:-SNAPSHOTS_KEPT]:
                await self.log.delete_producer_snapshot(old)
        except StorageError as exc:
            log.warning("%s: producer snapshot at %d not written: %s", self.tp, offset, exc)

    async def take_snapshot(self) -> None:
        """Snapshot the producer state at the log end offset (clean shutdown)."""
        async with self._lock:
            end = self.log.log_end_offset
            try:
                if end in await self.log.producer_snapshots():
                    return
            except StorageError as exc:
                log.warning("%s: no producer snapshot at shutdown: %s", self.tp, exc)
                return
            await self._write_snapshot(end, encode_snapshot(end, list(self.producers)))

    async def load_producer_state(self) -> None:
        """Rebuild the producer state: newest valid snapshot <= the log end, then replay."""
        async with self._lock:
            end = self.log.log_end_offset
            start = 0
            entries: list[ProducerStateEntry] = []
            for offset in reversed(await self.log.producer_snapshots()):
                if offset > end:  # its log tail was lost in a crash
                    await self.log.delete_producer_snapshot(offset)
                    continue
                data = await self.log.read_producer_snapshot(offset)
                try:
                    taken_at, entries = decode_snapshot(data or b"")
                except SnapshotError as exc:
                    log.warning("%s: skipping snapshot %d: %s", self.tp, offset, exc)
                    continue
                if taken_at != offset:
                    log.warning("%s: snapshot %d says offset %d", self.tp, offset, taken_at)
                    continue
                start = offset
                break
            self.producers.load(entries)
            position = max(start, self.log.log_start_offset)
            while position < end:
                chunk = await self.log.read(position, REPLAY_READ_BYTES)
                if not chunk:
                    break
                for _, h in iter_batches(chunk):
                    if h.last_offset >= position:
                        self.producers.replay(h)
                    position = max(position, h.last_offset + 1)

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> list[int]:
        return self.producers.remove_expired(now_ms, expiration_ms)

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
