"""The storage interface: the only module of storage/ that code outside storage/ imports.

Theory of operation
-------------------
A *store* owns a set of topics. Each topic has a stable UUID, a partition count and the
topic-level config overrides it was created or altered with; the store persists these so a
restart finds the same topics with the same ids. Each partition is a *partition log*: an
append-only sequence of record batches (v2, "magic 2") addressed by offset.

The log is deliberately dumb: bytes and offsets only. It never decides offsets, never checks
producer sequences and never looks inside records. The layer above (``storage/partition.py``)
validates a batch, assigns its offsets by patching the base offset in place (``wire.records``),
and hands the finished bytes to ``PartitionLog.append``. Producer state, the aborted-transaction
index and the last stable offset live above the log too (``storage/partition.py``,
``storage/producer_state.py``), so a second backend only has to store bytes.

Backends are picked by URL scheme in ``storage.backends.open_store`` (not here: the interface
imports no backend): ``file:///path`` (segment files with sparse offset and time indexes,
recovery of a torn tail after a crash) and ``memory://`` (for tests and throwaway brokers).
Both pass ``tests/storage/test_contract.py``.

Invariants every backend keeps:
* ``log_start_offset <= log_end_offset``; batches are contiguous: an append's ``base_offset``
  equals the current ``log_end_offset`` (else ``ValueError``), and afterwards
  ``log_end_offset == last_offset + 1``.
* what ``read`` returns is whole batches, exactly the bytes appended (offsets already in place).
* an acknowledged append survives a crash of the process (page cache) unless the machine
  itself loses power; with ``flush_every_append`` it survives that too.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from wire.batch import BatchHeader

_METADATA_NAME = re.compile(r"^[a-z0-9._-]+$")


def check_metadata_name(name: str) -> None:
    if not _METADATA_NAME.match(name) or name in (".", ".."):
        raise ValueError(f"bad metadata name {name!r}")


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


# The coordinators' internal topics: the one definition of their names.
CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"
INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS, TRANSACTION_STATE})
# Kafka's Topic.isInternal names one more, the share coordinator's (kafkad has none, but a
# topic of that name is internal as in Kafka), and Kafka's metadata log's name can never be
# a topic's (kafkad keeps no such log).
SHARE_GROUP_STATE = "__share_group_state"
KAFKA_INTERNAL_TOPICS = INTERNAL_TOPICS | {SHARE_GROUP_STATE}
CLUSTER_METADATA = "__cluster_metadata"

NEVER = 2**63 - 1  # Kafka's Long.MAX_VALUE defaults


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Effective per-partition log settings (topic overrides applied over broker defaults).

    Names follow Kafka's topic configs in snake case; defaults are Kafka 4.x defaults.
    """

    segment_bytes: int = 1024 * 1024 * 1024  # segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000  # segment.ms
    retention_ms: int = 7 * 24 * 3600 * 1000  # retention.ms (-1: keep forever)
    retention_bytes: int = -1  # retention.bytes (-1: no size limit)
    index_interval_bytes: int = 4096  # index.interval.bytes
    segment_index_bytes: int = 10 * 1024 * 1024  # segment.index.bytes
    # flush.messages / flush.ms: fsync once this many offsets are unflushed (before the append
    # that reached the count is acknowledged), or once this long has passed since the last
    # fsync (a timer per log); Kafka's defaults, Long.MAX_VALUE, mean "never": the page cache,
    # fsync on roll and shutdown. Only the file backend has anything to fsync.
    flush_messages: int = NEVER
    flush_ms: int = NEVER
    file_delete_delay_ms: int = 60_000  # file.delete.delay.ms (files of deleted segments)
    # the log cleaner (storage/cleaner/): cleanup.policy as two flags, then its knobs
    compact: bool = False  # cleanup.policy contains "compact"
    delete: bool = True  # cleanup.policy contains "delete" (time/size retention applies)
    delete_retention_ms: int = 24 * 3600 * 1000  # delete.retention.ms
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = 2**63 - 1  # max.compaction.lag.ms

    @property
    def flush_every_append(self) -> bool:
        """Every append waits for an fsync covering it (``flush.messages=1``)."""
        return self.flush_messages <= 1


@dataclass(frozen=True, slots=True)
class TopicMeta:
    """What the store persists about a topic."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)  # topic-level overrides only


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """A segment as the log cleaner sees it (``PartitionLog.segment_infos``)."""

    base_offset: int
    size: int
    largest_timestamp: int  # -1 if no batch has a timestamp
    first_batch_timestamp: int  # the first batch's max timestamp, -1 if empty


@dataclass(frozen=True, slots=True)
class TimestampLookup:
    """Where a timestamp search landed: the first batch whose max timestamp is >= the target."""

    batch_base_offset: int
    batch_bytes: bytes  # the whole batch, so the caller can find the exact record


class StorageError(Exception):
    """An I/O failure (disk full, failed write or fsync). The append it interrupted did not
    happen as far as the log's offsets are concerned; the caller must not acknowledge it.

    Also raised by every call on a closed log, and on a log that went *offline*: after a
    failure that leaves its files in doubt (a failed fsync, a write that could not be undone)
    a file log refuses everything until the store is reopened and recovery runs, as Kafka
    takes a failed log directory offline. A failed write that was undone (ENOSPC) does not
    take the log offline."""


class PartitionLog(Protocol):
    """One partition's batches. Bytes and offsets only."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def size_bytes(self) -> int:
        """Total bytes of all retained segments. Segments go whole, so batches below
        ``log_start_offset`` in the first retained segment still count (as in Kafka)."""
        ...

    async def append(
        self, base_offset: int, last_offset: int, max_timestamp: int, batch: bytes
    ) -> None:
        """Append one or more whole batches whose offsets are already written in place.

        ``base_offset`` must equal ``log_end_offset`` (else ``ValueError``), and so must the base
        offset written in the first batch; ``last_offset`` must be >= ``base_offset``.
        ``max_timestamp`` is the batches' max timestamp, for the time index. Raises
        ``StorageError`` on I/O failure, leaving ``log_end_offset`` unchanged.

        Without ``flush_every_append`` the bytes are in the page cache when this returns
        (survives ``kill -9``); with it, an fsync covering them has completed (survives a power
        loss). Durable appends share fsyncs (group commit), including appends to different
        partitions, so concurrent callers should not serialise around this call.
        """
        ...

    async def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches starting with the batch that contains ``offset``.

        Stops before the batch that would take the result past ``max_bytes``, except that the
        first batch is always returned whole, however large (it may start below ``offset``,
        even below ``log_start_offset``). ``b""`` when ``offset`` is ``log_end_offset``.
        ``offset`` outside [log_start_offset, log_end_offset] is ``ValueError`` (the caller
        answers OFFSET_OUT_OF_RANGE). Results may span segments.
        """
        ...

    async def find_timestamp(self, timestamp: int) -> TimestampLookup | None:
        """The first retained batch whose max timestamp is >= ``timestamp`` (through the time
        index, not a full scan), or None if there is none. Batches entirely below
        ``log_start_offset`` are not considered."""
        ...

    async def max_timestamp(self) -> tuple[int, int] | None:
        """(max timestamp, base offset of the first batch holding it) over the retained
        segments, or None if no batch has a timestamp >= 0. Like ``size_bytes`` this counts
        whole segments (Kafka's ListOffsets MAX_TIMESTAMP does the same)."""
        ...

    async def delete_before(self, offset: int) -> None:
        """Advance the log start offset to ``offset`` (DeleteRecords); whole segments below it
        are removed. Persisted before it takes effect. No-op if ``offset`` is at or below the
        log start offset; ``ValueError`` if it is past ``log_end_offset``."""
        ...

    async def apply_retention(
        self, now_ms: int, after_roll: Callable[[], Awaitable[None]] | None = None
    ) -> int:
        """Roll an over-age active segment, then delete whole segments past ``retention_ms`` /
        ``retention_bytes`` (``log_policy.retention_deletable``). The active segment counts
        too: if it goes, the log rolls first and a new empty segment at the log end offset
        remains. Returns the number of segments deleted. If it rolled, ``after_roll`` is
        awaited before anything is deleted (the partition snapshots its producer state there,
        as Kafka's ``roll`` does, so a crash never leaves a log without a snapshot that covers
        what retention removed).

        Time: leading segments whose largest timestamp is more than ``retention_ms`` before
        ``now_ms`` (deletion stops at the first segment that is not). Size: the oldest segments
        while the log without them would still be at least ``retention_bytes``. The log start
        offset moves to the first remaining segment's base offset if that is further."""
        ...

    @property
    def active_segment_base(self) -> int:
        """Base offset of the active (last) segment: it changes when the log rolls, which is
        when the partition takes a producer-state snapshot."""
        ...

    async def producer_snapshots(self) -> list[int]:
        """Offsets of the stored producer-state snapshots, ascending."""
        ...

    async def read_producer_snapshot(self, offset: int) -> bytes | None:
        """The snapshot stored at ``offset`` exactly as written, or None if there is none."""
        ...

    async def write_producer_snapshot(self, offset: int, data: bytes) -> None:
        """Store an opaque producer-state snapshot taken at ``offset`` (replacing one at the
        same offset). Atomic and durable when this returns: a crash leaves the old or the new
        snapshot, never a torn one (the file backend: ``<offset:020d>.snapshot``). Raises
        ``StorageError``. The log never interprets snapshots (``storage/producer_snapshot.py``
        does); they survive ``close`` and are removed with the topic."""
        ...

    async def delete_producer_snapshot(self, offset: int) -> None:
        """Remove the snapshot at ``offset`` (no-op if there is none)."""
        ...

    def update_config(self, config: LogConfig) -> None:
        """Topic configs were altered: later rolls, retention and cleaning use ``config``."""
        ...

    def segment_infos(self) -> list[SegmentInfo]:
        """Every segment, oldest first; the last one is the active segment."""
        ...

    async def read_segment(self, base_offset: int) -> bytes:
        """The whole content of a rolled (not active) segment: its batches back to back.
        ``ValueError`` if there is no such rolled segment. Raises ``StorageError``."""
        ...

    async def replace_segments(self, bases: Sequence[int], data: bytes) -> bool:
        """Atomically replace the contiguous rolled segments starting at ``bases`` by one
        segment at ``bases[0]`` holding ``data`` (whole batches, offsets in place, ascending,
        within the replaced segments' offset range; may be empty). A crash leaves either the
        old segments or the new one, never a mix (the file backend's swap protocol,
        ``storage/segment/swap.py``). Returns False, changing nothing, if those segments are no
        longer all there (retention removed some meanwhile). Raises ``StorageError``."""
        ...

    async def flush(self) -> None:
        """fsync what was appended."""
        ...

    async def close(self) -> None:
        """Flush and release the log; every later call raises ``StorageError``. Reopen it with
        ``Store.open_partition``."""
        ...


class Store(Protocol):
    """Topics and their partition logs."""

    def topics(self) -> list[TopicMeta]:
        """Every topic the store holds (loaded at open)."""
        ...

    async def create_topic(self, meta: TopicMeta) -> None:
        """Persist a new topic (``ValueError`` if the name exists). Partition logs are created
        by ``open_partition``."""
        ...

    async def delete_topic(self, name: str) -> None:
        """Forget the topic and remove its data (closing its open partition logs first). The file
        backend makes the topic disappear atomically: a crash mid-delete never brings back a
        half topic. ``ValueError`` for an unknown name."""
        ...

    async def update_topic(self, meta: TopicMeta) -> None:
        """Persist a changed partition count or config overrides (``ValueError`` for an unknown
        name or a different topic id). Open logs keep their ``LogConfig`` until the caller passes
        the new one to ``PartitionLog.update_config``."""
        ...

    async def open_partition(self, tp: TopicPartition, config: LogConfig) -> PartitionLog:
        """Open (creating if needed) the log of an existing topic's partition (``ValueError`` if
        there is no such topic or partition); an already open log is returned as is. The file
        backend recovers the tail here: batches are checked by length and CRC from the last
        flushed point and a torn or corrupt tail is truncated."""
        ...

    async def read_metadata(self, name: str) -> bytes | None:
        """A small broker metadata blob (e.g. the producer-id high-water mark) as last written,
        or None. ``name`` is ``[a-z0-9._-]+`` (else ``ValueError``)."""
        ...

    async def write_metadata(self, name: str, data: bytes) -> None:
        """Replace the blob ``name`` atomically and durably (fsynced before this returns; the
        file backend keeps it in ``__kafkad_meta/<name>``). Raises ``StorageError``."""
        ...

    async def close(self) -> None:
        """Flush and close every open partition log (the file backend then writes its
        clean-shutdown marker, so the next open skips recovery)."""
        ...


# -- what the coordinators see of the partition layer ----------------------------------------


class PartitionWriter(Protocol):
    """One partition of a coordinator's internal topic, as the coordinators write and replay
    it (Kafka's coordinator-common ``PartitionWriter``); ``storage.partition.Partition``
    implements it. Appends go through the partition layer, so producer state, markers and the
    durability settings apply to internal topics as to any other."""

    @property
    def tp(self) -> TopicPartition: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    async def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from ``offset`` (at least one if any), below the high watermark."""
        ...

    async def append(
        self,
        data: bytes,
        header: BatchHeader,
        now_ms: int,
        *,
        coordinator: bool = False,
        verify: Callable[[], ErrorCode] | None = None,
    ) -> tuple[int, int] | ErrorCode:
        """Append one batch: (base offset, log append time or -1), or the code that refused
        it. Raises ``StorageError`` if the write failed."""
        ...

    async def write_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        now_ms: int,
        *,
        transaction_version: int = 0,
    ) -> int | ErrorCode:
        """A COMMIT/ABORT control batch for the producer: its offset, or the refusal
        (``transaction_version`` 2: the marker's epoch must exceed the producer's)."""
        ...


class TopicPartitions(Protocol):
    @property
    def partitions(self) -> Sequence[PartitionWriter]: ...


class InternalTopics(Protocol):
    """The topic layer as the coordinators use it (``storage.topics.TopicManager``): their
    internal topics, registered up front and created on first use, and partition lookup."""

    def register_internal(self, name: str, partitions: int, configs: Mapping[str, str]) -> None:
        """``name`` is created with these partitions and configs by whoever asks first."""
        ...

    def get(self, name: str) -> TopicPartitions | None: ...

    async def create_internal(self, name: str) -> TopicPartitions:
        """The registered internal topic ``name``, created now if need be (StorageError)."""
        ...

    def partition(self, topic: str, index: int) -> PartitionWriter | None: ...
