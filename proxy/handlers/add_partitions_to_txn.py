"""AddPartitionsToTxn (key 24), v0-5 (spec eos.md §4.5; Kafka's
``handleAddPartitionsToTxnRequest``).

v0: one transaction (id, producer id, epoch, topics with partitions); one error code per
partition. v1: same (throttling). v2: may answer PRODUCER_FENCED (older versions get
INVALID_PRODUCER_EPOCH, ``wire/errors.py``). v3: flexible. v4 (KIP-890 part 1): the batched
broker-to-coordinator form, several transactions, each with VerifyOnly; a top-level error code;
an add (not a verify) is a TV2 one from v4 on (KIP-890 part 2: a leader adding a partition on
a Produce v12 producer's behalf; Kafka's
``TransactionVersion.transactionVersionForAddPartitionsToTxn`` takes every version above 3).
v5: may answer TRANSACTION_ABORTABLE (the schema's note; Kafka 4.2 answers it to v4 too, only a
VerifyOnly check gives it, and the calling broker maps it for an old client).
kafkad's own partitions call
the coordinator in process (``proxy/txn_implicit_add.py``); v4-5 are served for what Kafka
serves them to (another broker, a tool).

The handler takes v5's classes; a v0-3 request is read as one transaction (``_one``) and
answered with that transaction's topic results (``_v3_results``).

Per transaction a topic or partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION, and
then nothing is added: every other partition gets OPERATION_NOT_ATTEMPTED
(``decisions.partition_errors``). Otherwise the coordinator's single answer is repeated for
every requested partition (VerifyOnly: per partition NONE or TRANSACTION_ABORTABLE).

Authorization: below v4 (clients), WRITE on the transactional id, else every partition is
answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED; WRITE on each topic (never granted for an
internal topic), else TOPIC_AUTHORIZATION_FAILED, the unknown ones UNKNOWN_TOPIC_OR_PARTITION
and the rest OPERATION_NOT_ATTEMPTED. v4+ (brokers): CLUSTER_ACTION on the cluster, else the
whole request is CLUSTER_AUTHORIZATION_FAILED (top level), and no topic check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from kio.schema.add_partitions_to_txn.v5.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from kio.schema.add_partitions_to_txn.v5.response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName, TransactionalId
from kio.static.primitive import i32

from coordinator.txn.decisions import partition_errors
from coordinator.txn.feature import client_transaction_version
from coordinator.txn.metadata import TP
from proxy.acl.checks import allowed_names, cluster_allows
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.outcomes import ErrorReply
from proxy.registry import handler
from storage.api import KAFKA_INTERNAL_TOPICS
from wire.txn_responses import encode_add_partitions_to_txn_response
from wire.values import NO_THROTTLE

E = ErrorCode


def _one(old: Any, version: int) -> Mapping[str, Any]:
    """v0-3: the one transaction of the request."""
    if version >= 4:
        return {}
    txn = AddPartitionsToTxnTransaction(
        transactional_id=old.v3_and_below_transactional_id,
        producer_id=old.v3_and_below_producer_id,
        producer_epoch=old.v3_and_below_producer_epoch,
        verify_only=False,
        topics=tuple(
            AddPartitionsToTxnTopic(name=t.name, partitions=t.partitions)
            for t in old.v3_and_below_topics
        ),
    )
    return {"transactions": (txn,)}


def _v3_results(resp: AddPartitionsToTxnResponse, old: Any, version: int) -> Mapping[str, Any]:
    if version >= 4:
        return {}
    topics = resp.results_by_transaction[0].topic_results if resp.results_by_transaction else ()
    return {"results_by_topic_v3_and_below": topics}


def _result(tid: TransactionalId, results: dict[TP, ErrorCode]) -> AddPartitionsToTxnResult:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, index), code in results.items():
        by_topic.setdefault(topic, []).append(
            AddPartitionsToTxnPartitionResult(
                partition_index=cast(i32, index), partition_error_code=code
            )
        )
    return AddPartitionsToTxnResult(
        transactional_id=tid,
        topic_results=tuple(
            AddPartitionsToTxnTopicResult(
                name=cast(TopicName, name), results_by_partition=tuple(parts)
            )
            for name, parts in by_topic.items()
        ),
    )


def _wanted(txn: AddPartitionsToTxnTransaction) -> list[TP]:
    return [(t.name, int(p)) for t in txn.topics for p in t.partitions]


def _error_reply(req: AddPartitionsToTxnRequest, code: ErrorCode) -> AddPartitionsToTxnResponse:
    """Below v4 (what ``_v3_results`` keeps) every topic asked for, even one naming no
    partitions (Kafka's ``errorResponseForTopics``), each partition with ``code``. Deviation:
    a v4+ request failing outside the handler gets the same results besides the top-level
    code (Kafka: the top-level code alone, as the handler's own refusals answer)."""
    return AddPartitionsToTxnResponse(
        throttle_time=NO_THROTTLE,
        error_code=code,
        results_by_transaction=tuple(
            AddPartitionsToTxnResult(
                transactional_id=txn.transactional_id,
                topic_results=tuple(
                    AddPartitionsToTxnTopicResult(
                        name=t.name,
                        results_by_partition=tuple(
                            AddPartitionsToTxnPartitionResult(
                                partition_index=p, partition_error_code=code
                            )
                            for p in t.partitions
                        ),
                    )
                    for t in txn.topics
                ),
            )
            for txn in req.transactions
        ),
    )


@handler(
    api_key=24,
    versions=(0, 5),
    request=AddPartitionsToTxnRequest,
    response=AddPartitionsToTxnResponse,
    error_reply=_error_reply,
    upgrade=_one,
    downgrade=_v3_results,
    encode=lambda resp, correlation_id, version: encode_add_partitions_to_txn_response(
        correlation_id, version, resp
    ),
)
async def add_partitions_to_txn(
    ctx: RequestContext, req: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    clients = ctx.version < 4
    if clients:
        (txn,) = req.transactions
        if not ctx.authorized(
            AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn.transactional_id
        ):
            raise ErrorReply(E.transactional_id_authorization_failed)
    else:  # refused as a whole: the top-level code alone (Kafka's getErrorResponse, v4+)
        refusal = None
        if not cluster_allows(ctx, AclOperation.CLUSTER_ACTION):
            refusal = E.cluster_authorization_failed
        elif any(txn.transactional_id is None for txn in req.transactions):
            refusal = E.invalid_request  # Kafka: InvalidRequestException
        if refusal is not None:
            return AddPartitionsToTxnResponse(
                throttle_time=NO_THROTTLE, error_code=refusal, results_by_transaction=()
            )
    results = [await _one_transaction(ctx, txn, clients) for txn in req.transactions]
    return AddPartitionsToTxnResponse(
        throttle_time=NO_THROTTLE, error_code=E.none, results_by_transaction=tuple(results)
    )


async def _one_transaction(
    ctx: RequestContext, txn: AddPartitionsToTxnTransaction, clients: bool
) -> AddPartitionsToTxnResult:
    broker = ctx.broker
    wanted = _wanted(txn)
    if clients:  # Kafka filters internal topics out before asking: never writable here
        names = [topic for topic, _ in wanted if topic not in KAFKA_INTERNAL_TOPICS]
        writable = allowed_names(ctx, AclOperation.WRITE, ResourceType.TOPIC, names)
    else:
        writable = {topic for topic, _ in wanted}
    failed = {
        tp: E.topic_authorization_failed if tp[0] not in writable else E.unknown_topic_or_partition
        for tp in wanted
        if tp[0] not in writable or (p := broker.topics.partition(*tp)) is None or p.deleted
    }
    results = partition_errors(wanted, failed)
    if results is None and txn.verify_only:
        verified = broker.txns.verify_partitions(
            txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted
        )
        results = dict.fromkeys(wanted, verified) if isinstance(verified, ErrorCode) else verified
    elif results is None:
        code = await broker.txns.add_partitions(
            txn.transactional_id,
            txn.producer_id,
            txn.producer_epoch,
            wanted,
            client_transaction_version(24, ctx.version),
        )
        results = dict.fromkeys(wanted, code)
    return _result(txn.transactional_id, results)
