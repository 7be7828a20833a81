"""DescribeTransactions (key 65), v0 (flexible; KIP-664, spec eos.md §4.11).

Per transactional id: its state name ("Ongoing", "PrepareCommit", ...), timeout, start time
(-1 if no transaction is open), producer id and epoch, and its partitions; while a commit or
abort is being completed, only the partitions still lacking a marker. "" is INVALID_REQUEST,
an unknown id TRANSACTIONAL_ID_NOT_FOUND, and COORDINATOR_LOAD_IN_PROGRESS while the
coordinator loads. An entry with an error carries zeros and "" otherwise (Kafka leaves the
generated defaults). There are no ACLs, so no TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

A transactional id the principal may not DESCRIBE is answered
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; the partitions of topics it may not DESCRIBE are left
out (Kafka's ``handleDescribeTransactionsRequest``).
"""

from __future__ import annotations

import datetime
import typing

from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.describe_transactions.v0.response import (
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import TZAware, i16, i32

from proxy.acl.checks import allowed_names
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import NO_THROTTLE, ms32, timestamp

# kio types TransactionStartTimeMs as a (non-nullable) datetime; Kafka sends -1 for "none"
# (kio's TZAware check refuses times before the epoch; its encoder writes them).
_MINUS_ONE_MS = typing.cast(TZAware, datetime.datetime.fromtimestamp(-0.001, tz=datetime.UTC))


def _start_time(ms: int) -> TZAware:
    return timestamp(ms) or _MINUS_ONE_MS


def _failed(tid: TransactionalId, code: ErrorCode) -> TransactionState:
    return TransactionState(
        error_code=code,
        transactional_id=tid,
        transaction_state="",
        transaction_timeout=ms32(0),
        transaction_start_time=_start_time(0),
        producer_id=ProducerId(0),
        producer_epoch=i16(0),
        topics=(),
    )


def _error_reply(req: DescribeTransactionsRequest, code: ErrorCode) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(
        throttle_time=NO_THROTTLE,
        transaction_states=tuple(_failed(tid, code) for tid in req.transactional_ids),
    )


@handler(
    api_key=65,
    versions=(0, 0),
    request=DescribeTransactionsRequest,
    response=DescribeTransactionsResponse,
    error_reply=_error_reply,
)
async def describe_transactions(
    ctx: RequestContext, req: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    txns = ctx.broker.txns
    out = []
    for tid in req.transactional_ids:
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
            out.append(_failed(tid, ErrorCode.transactional_id_authorization_failed))
            continue
        found = txns.describe(tid)
        if isinstance(found, ErrorCode):
            out.append(_failed(tid, found))
            continue
        by_topic: dict[str, list[i32]] = {}
        # only the partitions of topics the principal may DESCRIBE are shown
        shown = allowed_names(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, [t for t, _ in found.partitions]
        )
        for topic, index in sorted(found.partitions):
            if topic not in shown:
                continue
            by_topic.setdefault(topic, []).append(i32(index))
        out.append(
            TransactionState(
                error_code=ErrorCode.none,
                transactional_id=tid,
                transaction_state=found.state.kafka_name,
                transaction_timeout=ms32(found.txn_timeout_ms),
                transaction_start_time=_start_time(found.txn_start_timestamp),
                producer_id=ProducerId(found.producer_id),
                producer_epoch=i16(found.producer_epoch),
                topics=tuple(
                    TopicData(topic=TopicName(t), partitions=tuple(ps))
                    for t, ps in by_topic.items()
                ),
            )
        )
    return DescribeTransactionsResponse(throttle_time=NO_THROTTLE, transaction_states=tuple(out))
