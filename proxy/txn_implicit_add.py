"""Transaction version 2: the partition added to the transaction by the produce itself (KIP-890
part 2; Kafka's ReplicaManager.appendRecords with ``transactionSupportedOperation`` addPartition,
through AddPartitionsToTxnManager, which sends AddPartitionsToTxn v5 with VerifyOnly false).

A Produce v12 / TxnOffsetCommit v5 client never sends AddPartitionsToTxn. Before the first
transactional batch of a producer epoch on a partition (the partition has no transaction of that
producer open at that epoch), the leader asks the coordinator to add the partition with client
transaction version 2, and only then appends; the append's own KIP-890 check
(``Partition.append(verify=...)``, under the partition lock) is the verification guard that
catches a transaction that ended in between. The coordinator's answer goes back as is:
``wire/errors.py`` rewrites it for Produce (PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH,
retriable coordinator codes -> NOT_ENOUGH_REPLICAS but CONCURRENT_TRANSACTIONS, which a TV2
client retries as is), so a late batch of a finished transaction
(its epoch already bumped by EndTxn v5) is refused and cannot open a hanging transaction.

The add happens before the partition lock is taken, never under it: the coordinator may wait
for the id's previous transaction to complete, and completing writes markers to partitions.

``add_offsets_for_commit`` is the same for TxnOffsetCommit v5 (Kafka's
``txnOffsetCommitRequestVersionToTransactionSupportedOperation``: ``ADD_PARTITION`` from v5):
the group's ``__consumer_offsets`` partition is added before the group coordinator verifies and
appends, outside its write lock (a marker on that partition takes it).

Callers: the Produce handler for v12+ transactional batches, the TxnOffsetCommit handler for
v5 (``proxy/handlers/``).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.group.offsets_log import OFFSETS_TOPIC
from coordinator.placement import partition_for
from coordinator.txn.runtime import TxnCoordinator
from coordinator.txn.state import TV2
from storage.api import TopicPartition
from storage.partition import Partition
from storage.topics import TopicManager

__all__ = ["add_for_produce", "add_offsets_for_commit"]


async def add_for_produce(
    txns: TxnCoordinator,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partition: Partition,
    sequence: int,
    now_ms: int,
) -> ErrorCode:
    """NONE when the batch may go on to the append (the partition is in the producer's
    transaction at this epoch, already or now); otherwise the code to answer. Before asking
    the coordinator, the partition starts the producer's verification state with the batch's
    first ``sequence`` (Kafka's ``maybeStartTransactionVerification``, ``supportsEpochBump``),
    kept if the add fails: a higher sequence cannot be written before this one is retried."""
    if partition.has_open_transaction(producer_id, producer_epoch):
        return ErrorCode.none
    partition.producers.start_verification(producer_id, sequence, producer_epoch, True, now_ms)
    tp = partition.tp
    return await txns.add_partitions(
        transactional_id, producer_id, producer_epoch, [(tp.topic, tp.partition)], TV2
    )


async def add_offsets_for_commit(
    txns: TxnCoordinator,
    topics: TopicManager,
    offsets_partitions: int,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    group_id: str,
) -> ErrorCode:
    """NONE when the group's offsets partition is in the producer's transaction (already or
    now); ``offsets_partitions`` is the configured count, used until the topic exists."""
    topic = topics.get(OFFSETS_TOPIC)
    n = len(topic.partitions) if topic is not None else offsets_partitions
    index = partition_for(group_id, n)
    tp = TopicPartition(OFFSETS_TOPIC, index)
    if txns.verify_partition(transactional_id, producer_id, producer_epoch, tp) is ErrorCode.none:
        return ErrorCode.none
    return await txns.add_offsets(transactional_id, producer_id, producer_epoch, index, TV2)
