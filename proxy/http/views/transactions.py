"""Transactions: every transactional id the coordinator knows, its history from
``__transaction_state``, the hanging ones, and the admin abort.

The abort is Kafka's ``kafka-transactions.sh abort --topic T --partition P --start-offset N``
(tools' ``TransactionsCommand.AbortTransactionCommand``): find the producer whose open
transaction on the partition starts at N (what DescribeProducers answers), and write an ABORT
marker for its producer id and epoch with its coordinator epoch (0 if it has none yet), as the
WriteTxnMarkers request the tool's ``Admin.abortTransaction`` sends to the partition leader.
"""

from __future__ import annotations

from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from coordinator.txn.metadata import TxnMetadata
from coordinator.txn.state import TxnState
from proxy.http.views.partition import (
    OpenTxnRow,
    first_batch_timestamp,
    open_transactions,
    txn_by_producer,
)
from storage.api import StorageError, TopicPartition

if TYPE_CHECKING:
    from proxy.broker import Broker

HISTORY_MAX_ENTRIES = 500


@dataclass(frozen=True, slots=True)
class TxnRow:
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]
    start_ms: int  # -1: no transaction open
    timeout_ms: int
    age_ms: int | None
    last_update_ms: int
    pending: str | None  # the state being written, if any
    hanging: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HistoryRow:
    offset: int
    timestamp: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    partitions: tuple[TopicPartition, ...]
    start_ms: int


def _tps(partitions: frozenset[tuple[str, int]]) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(t, p) for t, p in sorted(partitions))


async def txn_row(
    broker: Broker,
    meta: TxnMetadata,
    now_ms: int,
    hanging_ms: int,
    lsos: dict[TopicPartition, int] | None = None,
) -> TxnRow:
    """One transactional id; hanging if past its timeout, or if one of its partitions has its
    transaction open (pinning the LSO) for longer than ``hanging_ms``. ``lsos`` memoises
    each partition's LSO (a pass over its open transactions) for a caller doing many rows."""
    lsos = {} if lsos is None else lsos
    ongoing = meta.state is TxnState.ONGOING and meta.txn_start_timestamp >= 0
    age = now_ms - meta.txn_start_timestamp if meta.txn_start_timestamp >= 0 else None
    why: list[str] = []
    if ongoing and age is not None and age > meta.txn_timeout_ms:
        why.append(f"past its timeout of {meta.txn_timeout_ms} ms")
    for tp in _tps(meta.partitions):
        p = broker.topics.partition(tp.topic, tp.partition)
        first = None if p is None else p.producers.ongoing.get(meta.producer_id)
        if p is None or first is None:
            continue
        since = await first_batch_timestamp(p, meta.producer_id, first)
        if since >= 0 and now_ms - since > hanging_ms:
            lso = lsos.get(tp)
            if lso is None:
                lso = lsos[tp] = p.last_stable_offset
            pins = " (pinning its LSO)" if lso == first < p.high_watermark else ""
            why.append(f"open on {tp} since offset {first} for over {hanging_ms} ms{pins}")
    return TxnRow(
        transactional_id=meta.transactional_id,
        state=meta.state.kafka_name,
        producer_id=meta.producer_id,
        producer_epoch=meta.producer_epoch,
        partitions=_tps(meta.partitions),
        start_ms=meta.txn_start_timestamp,
        timeout_ms=meta.txn_timeout_ms,
        age_ms=age if ongoing else None,
        last_update_ms=meta.txn_last_update_timestamp,
        pending=meta.pending_state.kafka_name if meta.pending_state is not None else None,
        hanging=tuple(why),
    )


async def txn_rows(
    broker: Broker, now_ms: int, hanging_ms: int, first: int = 0, limit: int | None = None
) -> list[TxnRow]:
    """The transactional ids in order, ``limit`` of them from the ``first``-th (all: None)."""
    cache, lsos = broker.txns.cache, dict[TopicPartition, int]()
    tids = sorted(cache)[first : None if limit is None else first + limit]
    return [await txn_row(broker, cache[tid], now_ms, hanging_ms, lsos) for tid in tids]


async def find_txn(broker: Broker, tid: str, now_ms: int, hanging_ms: int) -> TxnRow | None:
    meta = broker.txns.cache.get(tid)
    return None if meta is None else await txn_row(broker, meta, now_ms, hanging_ms)


async def hanging_on_partitions(broker: Broker, now_ms: int, hanging_ms: int) -> list[OpenTxnRow]:
    """Transactions open on a partition that are hanging there (``partition.hanging_reasons``),
    over every partition of every topic: what ``find-hanging`` would list."""
    by_pid = txn_by_producer(broker)
    out = []
    for topic in broker.topics:
        for p in topic.partitions:
            if p.deleted or not p.producers.ongoing:
                continue
            out += [
                t
                for t in await open_transactions(broker, p, now_ms, hanging_ms, by_pid)
                if t.hanging
            ]
    return out


async def txn_history(broker: Broker, tid: str) -> list[HistoryRow]:
    """Every record of ``tid`` still in ``__transaction_state`` (the cleaner keeps only the
    latest per id once it has compacted a segment), oldest first, at most
    ``HISTORY_MAX_ENTRIES``."""
    out: list[HistoryRow] = []
    try:
        async with aclosing(broker.txns.txn_log.history(tid)) as records:
            async for offset, timestamp, t in records:
                out.append(
                    HistoryRow(
                        offset,
                        timestamp,
                        t.state.kafka_name,
                        t.producer_id,
                        t.producer_epoch,
                        t.txn_timeout_ms,
                        _tps(t.partitions),
                        t.txn_start_timestamp,
                    )
                )
                if len(out) >= HISTORY_MAX_ENTRIES:
                    break
    except (StorageError, ValueError):  # the log moved under the read (retention, cleaning)
        pass
    return out


async def abort_open_transaction(
    broker: Broker, topic: str, index: int, start_offset: int
) -> ErrorCode | None:
    """``kafka-transactions.sh abort --start-offset``: None if no transaction open on the
    partition starts at ``start_offset``, else the marker write's result."""
    p = broker.topics.partition(topic, index)
    if p is None or p.deleted:
        return ErrorCode.unknown_topic_or_partition
    pid = next((pid for pid, first in p.producers.ongoing.items() if first == start_offset), None)
    entry = None if pid is None else p.producers.get(pid)
    if pid is None or entry is None:
        return None
    return await broker.write_txn_marker(
        p.tp, pid, entry.producer_epoch, False, max(entry.coordinator_epoch, 0)
    )
