"""CreatePartitions (key 37), v0-3. v1: nothing new. v2: flexible. v3: nothing new for the
broker. Partitions can only be added; assignments, when given, must name this node only.

A topic named once needs ALTER, else TOPIC_AUTHORIZATION_FAILED (Kafka's
``ControllerApis.createPartitions``).
"""

from __future__ import annotations

from collections import Counter

from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic
from kio.schema.create_partitions.v3.response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from kio.schema.errors import ErrorCode

from proxy.acl.checks import allowed_names
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.quotas.enforce import MutationQuota
from proxy.registry import handler
from wire.values import NO_THROTTLE


def _error_reply(req: CreatePartitionsRequest, code: ErrorCode) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(
            CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=None)
            for t in req.topics
        ),
    )


@handler(
    api_key=37,
    versions=(0, 3),
    request=CreatePartitionsRequest,
    response=CreatePartitionsResponse,
    error_reply=_error_reply,
)
async def create_partitions(
    ctx: RequestContext, req: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    counts = Counter(t.name for t in req.topics)
    single = [name for name, n in counts.items() if n == 1]
    alterable = allowed_names(ctx, AclOperation.ALTER, ResourceType.TOPIC, single)
    mutation = MutationQuota(ctx, strict_since=3)  # controller_mutation_rate (proxy/quotas/)
    results = []
    for t in req.topics:
        code: ErrorCode
        message: str | None
        if counts[t.name] > 1:
            code, message = ErrorCode.invalid_request, "Duplicate topic in request."
        elif t.name not in alterable:
            code, message = ErrorCode.topic_authorization_failed, None
        else:
            code, message = await _grow(ctx, t, req.validate_only, mutation)
        results.append(
            CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message)
        )
    return CreatePartitionsResponse(throttle_time=mutation.throttle_time(), results=tuple(results))


async def _grow(
    ctx: RequestContext, t: CreatePartitionsTopic, validate_only: bool, mutation: MutationQuota
) -> tuple[ErrorCode, str | None]:
    broker = ctx.broker
    topic = broker.topics.get(t.name)
    if topic is None:
        return ErrorCode.unknown_topic_or_partition, f"The topic '{t.name}' does not exist."
    now = len(topic.partitions)
    if t.count < now:
        return (
            ErrorCode.invalid_partitions,
            f"Topic currently has {now} partitions, which is higher than the requested {t.count}.",
        )
    if t.count == now:
        return ErrorCode.invalid_partitions, f"Topic already has {t.count} partitions."
    if t.assignments is not None and (
        len(t.assignments) != t.count - now
        or any(list(a.broker_ids) != [broker.node_id] for a in t.assignments)
    ):
        return (
            ErrorCode.invalid_replica_assignment,
            f"Each new partition must be assigned to broker {broker.node_id}.",
        )
    if (refused := mutation.charge(t.count - now)) is not None:  # KIP-599
        return refused
    if not validate_only and (err := await broker.topics.add_partitions(t.name, t.count)):
        return err.code, err.message  # deleted or grown meanwhile
    return ErrorCode.none, None
