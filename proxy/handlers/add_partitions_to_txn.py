"""AddPartitionsToTxn (key 24), v0-3 (spec eos.md §4.5).

v0: one transaction (id, producer id, epoch, topics with partitions); one error code per
partition. v1: same (throttling). v2: may answer PRODUCER_FENCED (older versions get
INVALID_PRODUCER_EPOCH, ``wire/errors.py``). v3: flexible. v4-5 (KIP-890: batched
broker-to-coordinator form with VerifyOnly; v5 TRANSACTION_ABORTABLE) are not advertised:
kafkad's partitions verify in process (``TxnCoordinator.verify_partition``) and no client
sends them.

Per partition a topic or partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION, and then
nothing is added: every other partition gets OPERATION_NOT_ATTEMPTED
(``decisions.partition_errors``). Otherwise the coordinator's single answer is repeated for
every requested partition.

Authorization (Kafka's ``handleAddPartitionsToTxnRequest`` below v4): WRITE on the
transactional id, else every partition is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED; WRITE
on each topic (never granted for an internal topic), else TOPIC_AUTHORIZATION_FAILED, the
unknown ones UNKNOWN_TOPIC_OR_PARTITION and the rest OPERATION_NOT_ATTEMPTED.
"""

from __future__ import annotations

from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest
from kio.schema.add_partitions_to_txn.v3.response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32

from coordinator.txn.decisions import partition_errors
from coordinator.txn.metadata import TP
from proxy.acl.checks import allowed_names
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.outcomes import ErrorReply
from proxy.registry import handler
from storage.api import KAFKA_INTERNAL_TOPICS
from wire.values import NO_THROTTLE


def _response(results: dict[TP, ErrorCode]) -> AddPartitionsToTxnResponse:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, index), code in results.items():
        by_topic.setdefault(topic, []).append(
            AddPartitionsToTxnPartitionResult(partition_index=i32(index), partition_error_code=code)
        )
    return AddPartitionsToTxnResponse(
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=tuple(
            AddPartitionsToTxnTopicResult(name=TopicName(name), results_by_partition=tuple(parts))
            for name, parts in by_topic.items()
        ),
    )


def _wanted(req: AddPartitionsToTxnRequest) -> list[TP]:
    return [(t.name, int(p)) for t in req.v3_and_below_topics for p in t.partitions]


def _error_reply(req: AddPartitionsToTxnRequest, code: ErrorCode) -> AddPartitionsToTxnResponse:
    """Every topic asked for, even one naming no partitions (Kafka's
    ``errorResponseForTopics``), each partition with ``code``."""
    return AddPartitionsToTxnResponse(
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=tuple(
            AddPartitionsToTxnTopicResult(
                name=t.name,
                results_by_partition=tuple(
                    AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code)
                    for p in t.partitions
                ),
            )
            for t in req.v3_and_below_topics
        ),
    )


@handler(
    api_key=24,
    versions=(0, 3),
    request=AddPartitionsToTxnRequest,
    response=AddPartitionsToTxnResponse,
    error_reply=_error_reply,
)
async def add_partitions_to_txn(
    ctx: RequestContext, req: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    broker = ctx.broker
    txn_id = req.v3_and_below_transactional_id
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        raise ErrorReply(ErrorCode.transactional_id_authorization_failed)
    wanted = _wanted(req)
    # Kafka filters internal topics out before asking, so they are never writable here
    names = [topic for topic, _ in wanted if topic not in KAFKA_INTERNAL_TOPICS]
    writable = allowed_names(ctx, AclOperation.WRITE, ResourceType.TOPIC, names)
    failed = {
        tp: ErrorCode.topic_authorization_failed
        if tp[0] not in writable
        else ErrorCode.unknown_topic_or_partition
        for tp in wanted
        if tp[0] not in writable or (p := broker.topics.partition(*tp)) is None or p.deleted
    }
    results = partition_errors(wanted, failed)
    if results is None:
        code = await broker.txns.add_partitions(
            req.v3_and_below_transactional_id,
            req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch,
            wanted,
        )
        results = dict.fromkeys(wanted, code)
    return _response(results)
