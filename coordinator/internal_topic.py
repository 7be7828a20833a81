"""A coordinator's internal compacted topic (``__consumer_offsets``, ``__transaction_state``):
the one piece of code both coordinators use to place a key, create the topic on first use and
append to it, on the narrow ``storage.api.InternalTopics`` / ``PartitionWriter`` interface
(Kafka's coordinator-common ``CoordinatorRuntime`` + ``PartitionWriter``).

Theory of operation
-------------------
* The topic is registered with the topic layer when the coordinator is built (its partition
  count and configs), and created by whoever needs it first: the first append here, or a
  Metadata request that auto-creates it. A broker that never sees a group or a transaction
  never creates it.
* A key (group id, transactional id) lives on ``placement.partition_for(key, n)``, ``n`` being
  the partition count of the topic as it exists (or the configured count before it exists).
* ``append`` writes records as one uncompressed batch without a producer id through the
  partition layer, and returns only once the batch is in the log (``StorageError`` if not).
* ``partitions`` lists what exists, and ``read_batches`` reads a partition from its log start
  to its high watermark, batch by batch: the one read loop of both coordinators' replay at
  startup (what each does with a batch is its own).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence

from kio.schema.errors import ErrorCode

from coordinator.placement import partition_for
from storage.api import (
    CONSUMER_OFFSETS,
    TRANSACTION_STATE,
    InternalTopics,
    PartitionWriter,
    StorageError,
)
from wire.batch import BatchHeader, iter_batches
from wire.records import Record, build_batch, build_one_record_batch, read_batch_header

__all__ = ["CONSUMER_OFFSETS", "TRANSACTION_STATE", "InternalTopic", "read_batches"]

READ_CHUNK = 1 << 20


async def read_batches(p: PartitionWriter) -> AsyncIterator[tuple[BatchHeader, bytes, int]]:
    """Every batch of ``p`` from its log start to its high watermark, in offset order, each
    with the first offset not read before it (a first batch may begin below the log start)."""
    offset = p.log_start_offset
    while offset < p.high_watermark:
        data = await p.read(offset, READ_CHUNK)
        if not data:
            break
        for pos, h in iter_batches(data):
            if h.last_offset < offset:
                continue
            yield h, data[pos : pos + h.total_size], offset
            offset = h.last_offset + 1


class InternalTopic:
    def __init__(
        self,
        topics: InternalTopics,
        name: str,
        num_partitions: int,
        configs: Mapping[str, str],
    ) -> None:
        self.topics = topics
        self.name = name
        self.num_partitions = num_partitions
        topics.register_internal(name, num_partitions, configs)

    def partitions(self) -> Sequence[PartitionWriter]:
        """The topic's partitions, none if it does not exist yet."""
        topic = self.topics.get(self.name)
        return topic.partitions if topic is not None else ()

    def partition_count(self) -> int:
        """The partition count keys are placed by: the topic's, or the configured one."""
        return len(self.partitions()) or self.num_partitions

    def index_for(self, key: str) -> int:
        return partition_for(key, self.partition_count())

    async def partition_for(self, key: str) -> PartitionWriter:
        """``key``'s partition, creating the topic if nobody has yet (StorageError)."""
        topic = self.topics.get(self.name)
        if topic is None:
            topic = await self.topics.create_internal(self.name)
        return topic.partitions[partition_for(key, len(topic.partitions))]

    async def append(
        self, key: str, records: Sequence[tuple[bytes, bytes | None]], now_ms: int
    ) -> int:
        """Append ``records`` as one batch to ``key``'s partition; returns its base offset.
        Raises StorageError."""
        p = await self.partition_for(key)
        if len(records) == 1:  # the coordinators' usual write: the one-record fast path
            batch, header = build_one_record_batch(*records[0], now_ms)
        else:
            batch = build_batch(
                [Record(i, 0, k, v) for i, (k, v) in enumerate(records)], base_timestamp=now_ms
            )
            header = read_batch_header(batch)
        appended = await p.append(batch, header, now_ms)
        if isinstance(appended, ErrorCode):  # only producer-id batches are refused; ours has none
            raise StorageError(f"append to {p.tp} refused: {appended.name}")
        return appended[0]
