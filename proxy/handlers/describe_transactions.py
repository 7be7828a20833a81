"""DescribeTransactions (key 65), v0 (flexible; KIP-664, spec eos.md §4.11).

Per transactional id: its state name ("Ongoing", "PrepareCommit", ...), timeout, start time
(-1 if no transaction is open), producer id and epoch, and its partitions; while a commit or
abort is being completed, only the partitions still lacking a marker. "" is INVALID_REQUEST,
an unknown id TRANSACTIONAL_ID_NOT_FOUND, and COORDINATOR_LOAD_IN_PROGRESS while the
coordinator loads. An entry with an error carries zeros and "" otherwise (Kafka leaves the
generated defaults). There are no ACLs, so no TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from proxy.context import RequestContext
from proxy.registry import handler

# kio types TransactionStartTimeMs as a (non-nullable) datetime; Kafka sends -1 for "none".
_MINUS_ONE_MS = datetime.datetime.fromtimestamp(-0.001, tz=datetime.UTC)


def _start_time(ms: int) -> datetime.datetime:
    if ms < 0:
        return _MINUS_ONE_MS
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


@handler(api_key=65, versions=(0, 0))
async def describe_transactions(ctx: RequestContext, req: Any) -> Any:
    b, txns = ctx.b, ctx.broker.txns
    out = []
    for tid in req.transactional_ids:
        found = txns.describe(tid)
        if isinstance(found, ErrorCode):
            out.append(
                b.TransactionState(
                    error_code=found,
                    transactional_id=tid,
                    transaction_state="",
                    transaction_timeout=0,
                    transaction_start_time=_start_time(0),
                    producer_id=0,
                    producer_epoch=0,
                    topics=(),
                )
            )
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(found.partitions):
            by_topic.setdefault(topic, []).append(index)
        out.append(
            b.TransactionState(
                error_code=ErrorCode.none,
                transactional_id=tid,
                transaction_state=found.state.kafka_name,
                transaction_timeout=found.txn_timeout_ms,
                transaction_start_time=_start_time(found.txn_start_timestamp),
                producer_id=found.producer_id,
                producer_epoch=found.producer_epoch,
                topics=tuple(
                    b.TopicData(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
                ),
            )
        )
    return b.DescribeTransactionsResponse(throttle_time=0, transaction_states=tuple(out))
