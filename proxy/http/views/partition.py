"""One partition: what holds its last stable offset back and since when, its open
transactions, its aborted-transaction index, and its producers (DescribeProducers' answer).

An open transaction is *hanging* when the coordinator does not have its producer's
transaction open on this partition, Ongoing or being completed (Kafka's
``kafka-transactions.sh find-hanging``: the coordinator aborted or forgot it, so no marker
will ever come), when the coordinator's transaction is past its timeout, or when it has been
open here longer than ``kafkad.http.hanging.transaction.ms``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from coordinator.txn.metadata import TxnMetadata
from coordinator.txn.state import TxnState
from proxy.http.views.topics import PartitionRow, partition_row
from storage.api import StorageError, TopicPartition
from storage.partition import Partition
from wire.batch import RecordBatchError, iter_batches

if TYPE_CHECKING:
    from proxy.broker import Broker

FIRST_BATCH_READ_BYTES = 64 * 1024
# Coordinator states in which a partition of the transaction may still lack its marker.
OPEN_STATES = frozenset(
    {
        TxnState.ONGOING,
        TxnState.PREPARE_COMMIT,
        TxnState.PREPARE_ABORT,
        TxnState.PREPARE_EPOCH_FENCE,
    }
)


@dataclass(frozen=True, slots=True)
class OpenTxnRow:
    tp: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    first_offset: int
    since_ms: int  # the timestamp of the transaction's first batch here (-1: unknown)
    transactional_id: str | None  # None: no transactional id has this producer id now
    holds_lso: bool
    hanging: tuple[str, ...]  # why it is flagged hanging; empty: it is not


@dataclass(frozen=True, slots=True)
class AbortedRow:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class ProducerRow:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


@dataclass(frozen=True, slots=True)
class PartitionDetail:
    row: PartitionRow
    open_transactions: tuple[OpenTxnRow, ...]
    aborted: tuple[AbortedRow, ...]
    producers: tuple[ProducerRow, ...]

    @property
    def lso_holder(self) -> OpenTxnRow | None:
        return next((t for t in self.open_transactions if t.holds_lso), None)


def txn_by_producer(broker: Broker) -> dict[int, TxnMetadata]:
    return {m.producer_id: m for m in broker.txns.cache.values()}


def hanging_reasons(
    tp: TopicPartition,
    first_offset_age_ms: int | None,
    meta: TxnMetadata | None,
    now_ms: int,
    hanging_ms: int,
) -> tuple[str, ...]:
    """Why a transaction open on ``tp`` is hanging (empty if it is not)."""
    why = []
    if meta is None:
        why.append("no transactional id has this producer id")
    elif meta.state not in OPEN_STATES or (tp.topic, tp.partition) not in meta.partitions:
        why.append(f"the coordinator's transaction is {meta.state.kafka_name}, not open here")
    elif meta.txn_start_timestamp >= 0 and now_ms - meta.txn_start_timestamp > meta.txn_timeout_ms:
        why.append(f"past its timeout of {meta.txn_timeout_ms} ms")
    if first_offset_age_ms is not None and first_offset_age_ms > hanging_ms:
        why.append(f"open here for more than {hanging_ms} ms")
    return tuple(why)


async def first_batch_timestamp(p: Partition, producer_id: int, offset: int) -> int:
    """The max timestamp of ``producer_id``'s batch at ``offset`` (-1 if it cannot be read):
    from the producer's retained batches, else from the log."""
    entry = p.producers.get(producer_id)
    retained = [] if entry is None else [b for b in entry.batches if b.first_offset == offset]
    if retained:
        return retained[0].timestamp
    if not p.log_start_offset <= offset < p.high_watermark:
        return -1
    try:
        data = await p.read(offset, FIRST_BATCH_READ_BYTES)
        for _, h in iter_batches(data):
            if h.last_offset >= offset:
                return h.max_timestamp
    except (StorageError, RecordBatchError, ValueError):
        pass
    return -1


async def open_transactions(
    broker: Broker,
    p: Partition,
    now_ms: int,
    hanging_ms: int,
    by_pid: dict[int, TxnMetadata] | None = None,
) -> list[OpenTxnRow]:
    """``by_pid``: ``txn_by_producer(broker)``, made once by a caller that walks many
    partitions (it is a pass over every transactional id)."""
    if by_pid is None:
        by_pid = txn_by_producer(broker)
    lso = p.last_stable_offset
    holder = p.producers.first_unstable_offset()
    out = []
    for pid, first in sorted(p.producers.ongoing.items(), key=lambda kv: kv[1]):
        entry = p.producers.get(pid)
        since = await first_batch_timestamp(p, pid, first)
        meta = by_pid.get(pid)
        age = now_ms - since if since >= 0 else None
        out.append(
            OpenTxnRow(
                tp=p.tp,
                producer_id=pid,
                producer_epoch=entry.producer_epoch if entry is not None else -1,
                coordinator_epoch=entry.coordinator_epoch if entry is not None else -1,
                first_offset=first,
                since_ms=since,
                transactional_id=meta.transactional_id if meta is not None else None,
                holds_lso=first == holder and lso < p.high_watermark,
                hanging=hanging_reasons(p.tp, age, meta, now_ms, hanging_ms),
            )
        )
    return out


def producer_rows(p: Partition) -> tuple[ProducerRow, ...]:
    """What DescribeProducers answers for ``p`` (proxy/handlers/describe_producers.py)."""
    return tuple(
        ProducerRow(
            e.producer_id,
            e.producer_epoch,
            e.last_seq,
            e.last_timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
        for e in sorted(p.producers, key=lambda e: e.producer_id)
    )


async def partition_detail(
    broker: Broker, topic: str, index: int, now_ms: int, hanging_ms: int
) -> PartitionDetail | None:
    p = broker.topics.partition(topic, index)
    if p is None or p.deleted:
        return None
    return PartitionDetail(
        row=partition_row(broker, p, now_ms),
        open_transactions=tuple(await open_transactions(broker, p, now_ms, hanging_ms)),
        aborted=tuple(
            AbortedRow(a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset)
            for a in p.producers.aborted
        ),
        producers=producer_rows(p),
    )


def producers_by_partition(broker: Broker) -> list[tuple[TopicPartition, tuple[ProducerRow, ...]]]:
    """DescribeProducers over every partition that has producer state."""
    return [
        (p.tp, producer_rows(p))
        for topic in broker.topics
        for p in topic.partitions
        if not p.deleted and len(p.producers)
    ]
