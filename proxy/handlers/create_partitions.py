"""CreatePartitions (key 37), v0-3. v1: nothing new. v2: flexible. v3: nothing new for the
broker. Partitions can only be added; assignments, when given, must name this node only."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from proxy.context import RequestContext
from proxy.registry import handler


@handler(api_key=37, versions=(0, 3))
async def create_partitions(ctx: RequestContext, req: Any) -> Any:
    b, broker = ctx.b, ctx.broker
    counts = Counter(t.name for t in req.topics)
    results = []
    for t in req.topics:
        code, message = ErrorCode.none, None
        topic = broker.topics.get(t.name)
        if counts[t.name] > 1:
            code, message = ErrorCode.invalid_request, "Duplicate topic in request."
        elif topic is None:
            code, message = (
                ErrorCode.unknown_topic_or_partition,
                f"The topic '{t.name}' does not exist.",
            )
        elif t.count < len(topic.partitions):
            code, message = (
                ErrorCode.invalid_partitions,
                f"Topic currently has {len(topic.partitions)} partitions, which is "
                f"higher than the requested {t.count}.",
            )
        elif t.count == len(topic.partitions):
            code, message = (
                ErrorCode.invalid_partitions,
                f"Topic already has {t.count} partitions.",
            )
        elif t.assignments is not None and (
            len(t.assignments) != t.count - len(topic.partitions)
            or any(list(a.broker_ids) != [broker.node_id] for a in t.assignments)
        ):
            code, message = (
                ErrorCode.invalid_replica_assignment,
                f"Each new partition must be assigned to broker {broker.node_id}.",
            )
        elif (
            not req.validate_only
            and (err := await broker.topics.add_partitions(t.name, t.count)) is not None
        ):
            code, message = err.code, err.message  # deleted or grown meanwhile
        results.append(
            b.CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message)
        )
    return b.CreatePartitionsResponse(throttle_time=0, results=tuple(results))
