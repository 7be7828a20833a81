"""``__transaction_state`` on disk: lazy creation, one-record appends, and replay at startup.

Theory of operation
-------------------
The transaction coordinator's durable state is the internal topic ``__transaction_state``
(``transaction.state.log.num.partitions`` partitions, default 50). A transactional id lives on
partition ``log_format.partition_for(id, n)`` where ``n`` is the partition count of the topic
as it exists (or the configured count before it exists), exactly as Kafka places it.

* Creation is lazy: the topic appears with the first append (an InitProducerId), or when a
  Metadata request auto-creates it, whichever comes first (``TopicManager.create_internal``,
  with the spec registered here), so a broker
  that never sees a transaction never creates 50 partitions and starts fast. It is created with
  ``cleanup.policy=compact`` and 1 MiB segments (Kafka: 100 MiB; the active segment, which the
  cleaner never touches, is replayed whole at startup): the log cleaner keeps the latest
  record per transactional id and, after ``delete.retention.ms``, drops expired ids'
  tombstones; time and size retention never apply.
* Each transit is one record (key and value from ``log_format.encode``, a tombstone for an
  expired id) in its own uncompressed batch with no producer id, appended through
  ``Partition.append`` (so the file backend's durability setting applies). ``append`` returns
  only once the batch is in the log; it raises ``StorageError`` otherwise.
* ``replay`` reads every partition from its log start in offset order and yields the decoded
  transits; a record that does not decode is skipped with a warning (Kafka skips unknown key
  versions the same way), so one bad record cannot keep the coordinator from starting.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from typing import Final

from coordinator.internal_topic import InternalTopic, read_batches
from coordinator.txn.log_format import LogFormatError, decode, encode
from coordinator.txn.metadata import TxnTransit
from storage.api import TRANSACTION_STATE, InternalTopics, PartitionWriter
from wire.batch import ATTR_CONTROL, RecordBatchError
from wire.records import decode_batch_records

__all__ = ["TXN_TOPIC", "TXN_TOPIC_CONFIGS", "TxnLog"]

log = logging.getLogger("kafkad.txn")

TXN_TOPIC: Final = TRANSACTION_STATE
TXN_TOPIC_CONFIGS: Final[Mapping[str, str]] = {
    "cleanup.policy": "compact",
    "segment.bytes": "1048576",  # Kafka: 100 MiB (see above)
}


class TxnLog:
    def __init__(self, topics: InternalTopics, num_partitions: int, wall_ms: Callable[[], int]):
        self.topics = topics
        self.topic = InternalTopic(topics, TXN_TOPIC, num_partitions, TXN_TOPIC_CONFIGS)
        self.num_partitions = num_partitions
        self.wall_ms = wall_ms

    async def append(self, transit: TxnTransit) -> None:
        """Append the record of ``transit``; raises StorageError if it is not in the log."""
        await self.topic.append(transit.transactional_id, [encode(transit)], self.wall_ms())

    async def replay(self) -> AsyncIterator[TxnTransit]:
        """Every record of every partition, in offset order per partition."""
        for p in self.topic.partitions():
            async for _, _, transit in self.records(p):
                yield transit

    async def history(
        self, transactional_id: str
    ) -> AsyncGenerator[tuple[int, int, TxnTransit], None]:
        """(offset, timestamp, transit) of every record of ``transactional_id`` still in the
        log, oldest first (read-only: the web console's timeline)."""
        partitions = self.topic.partitions()
        if not partitions:
            return
        p = partitions[self.topic.index_for(transactional_id)]
        async for offset, timestamp, transit in self.records(p):
            if transit.transactional_id == transactional_id:
                yield offset, timestamp, transit

    @staticmethod
    async def records(p: PartitionWriter) -> AsyncIterator[tuple[int, int, TxnTransit]]:
        """(offset, timestamp, transit) of every record of ``p`` from its log start; a batch or
        record that does not decode is skipped with a warning."""
        async for h, batch, start in read_batches(p):
            if h.attributes & ATTR_CONTROL:
                continue
            try:
                records = decode_batch_records(batch)
            except RecordBatchError as exc:
                log.warning("%s: skipping batch at %d: %s", p.tp, h.base_offset, exc)
                continue
            for r in records:
                at = h.base_offset + r.offset_delta
                if at < start or r.key is None:
                    continue
                try:
                    yield at, h.base_timestamp + r.timestamp_delta, decode(r.key, r.value)
                except LogFormatError as exc:
                    log.warning("%s: skipping record at %d: %s", p.tp, at, exc)
