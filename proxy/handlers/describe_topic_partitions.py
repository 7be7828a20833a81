"""DescribeTopicPartitions (key 75), v0 (KIP-966): what Java's admin client (3.8+) uses to
describe topics, with a cursor so that a topic of many partitions spans several responses.

As Kafka's ``DescribeTopicPartitionsRequestHandler`` and
``KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse``: an empty topic list means
every topic; topics are answered in name order from the cursor's topic on (the cursor's
topic must be one of those asked for, and its partition index not negative, else the request
fails INVALID_REQUEST, answered as Kafka's getErrorResponse: each topic asked for with the
error); at most ``min(max.request.partition.size.limit (2000),
response_partition_limit)`` partitions (at least 1) go into one response, and where they run
out ``next_cursor`` names the topic and partition to ask for next. A topic asked for by name
that does not exist gets UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal
name); when every topic is asked for, only existing ones are listed. One node: every
partition's leader, replica and in-sync replica is this node, epoch 0, no eligible leader
replicas.

Authorization (Kafka's ``DescribeTopicPartitionsRequestHandler``): topics are checked for
DESCRIBE as they are reached; one the principal may not DESCRIBE is skipped when every topic is
asked for, and answered TOPIC_AUTHORIZATION_FAILED (zero id, after the others) when named.
Each topic looked up (an unknown one too, as Kafka sets them on every topic but the refused)
carries the topic operations the principal may do.
"""

from __future__ import annotations

from kio.schema.describe_topic_partitions.v0.request import DescribeTopicPartitionsRequest
from kio.schema.describe_topic_partitions.v0.response import (
    Cursor,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32

from proxy.acl.checks import authorized_operations
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from storage.partition import LEADER_EPOCH
from storage.topics import Topic, topic_name_error
from wire.values import NO_THROTTLE, ZERO_UUID

MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000  # Kafka's max.request.partition.size.limit default


def _error_reply(
    req: DescribeTopicPartitionsRequest, code: ErrorCode
) -> DescribeTopicPartitionsResponse:
    """Every topic asked for, carrying ``code`` (Kafka's getErrorResponse)."""
    return DescribeTopicPartitionsResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            DescribeTopicPartitionsResponseTopic(
                error_code=code, name=t.name, topic_id=ZERO_UUID, is_internal=False, partitions=()
            )
            for t in req.topics
        ),
    )


def _partitions(
    topic: Topic, node: BrokerId, start: int, count: int
) -> tuple[list[DescribeTopicPartitionsResponsePartition], int]:
    """Partitions ``start`` up to ``start + count`` of ``topic``, and the next index (-1: none)."""
    total = len(topic.partitions)
    upper = min(total, start + count)
    return [
        DescribeTopicPartitionsResponsePartition(
            error_code=ErrorCode.none,
            partition_index=i32(index),
            leader_id=node,
            leader_epoch=i32(LEADER_EPOCH),
            replica_nodes=(node,),
            isr_nodes=(node,),
            eligible_leader_replicas=(),
            last_known_elr=(),
            offline_replicas=(),
        )
        for index in range(start, upper)
    ], (upper if upper < total else -1)


@handler(
    api_key=75,
    versions=(0, 0),
    request=DescribeTopicPartitionsRequest,
    response=DescribeTopicPartitionsResponse,
    error_reply=_error_reply,
)
async def describe_topic_partitions(
    ctx: RequestContext, req: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    topics = ctx.broker.topics
    everything = not req.topics
    cursor = req.cursor
    first = cursor.topic_name if cursor is not None else ""
    if everything:
        names = {t.name for t in topics if t.name >= first}
    else:
        names = {t.name for t in req.topics if t.name >= first}
        if cursor is not None and cursor.topic_name not in names:
            return _error_reply(req, ErrorCode.invalid_request)
    if cursor is not None and cursor.partition_index < 0:
        return _error_reply(req, ErrorCode.invalid_request)
    node = BrokerId(ctx.broker.node_id)
    remaining = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, req.response_partition_limit), 1)
    out: list[DescribeTopicPartitionsResponseTopic] = []
    next_cursor = None
    refused: list[DescribeTopicPartitionsResponseTopic] = []  # answered last
    for name in sorted(names):
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            if not everything:  # named: refused, without revealing whether it exists
                refused.append(
                    DescribeTopicPartitionsResponseTopic(
                        error_code=ErrorCode.topic_authorization_failed,
                        name=TopicName(name),
                        topic_id=ZERO_UUID,
                        is_internal=False,
                        partitions=(),
                    )
                )
            continue
        if remaining <= 0:
            next_cursor = Cursor(topic_name=TopicName(name), partition_index=i32(0))
            break
        topic = topics.get(name)
        if topic is None:
            if not everything:
                illegal = topic_name_error(name) is not None
                code = (
                    ErrorCode.invalid_topic_exception
                    if illegal
                    else ErrorCode.unknown_topic_or_partition
                )
                out.append(  # Kafka sets the operations on every topic it looked up
                    DescribeTopicPartitionsResponseTopic(
                        error_code=code,
                        name=TopicName(name),
                        topic_id=ZERO_UUID,
                        partitions=(),
                        topic_authorized_operations=authorized_operations(
                            ctx, ResourceType.TOPIC, name
                        ),
                    )
                )
            continue
        start = cursor.partition_index if cursor is not None and name == first else 0
        parts, following = _partitions(topic, node, start, remaining)
        out.append(
            DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.none,
                name=TopicName(name),
                topic_id=topic.topic_id,
                is_internal=topic.internal,
                partitions=tuple(parts),
                topic_authorized_operations=authorized_operations(ctx, ResourceType.TOPIC, name),
            )
        )
        if following != -1:
            next_cursor = Cursor(topic_name=TopicName(name), partition_index=i32(following))
            break
        remaining -= len(parts)
    return DescribeTopicPartitionsResponse(
        throttle_time=NO_THROTTLE, topics=tuple(out + refused), next_cursor=next_cursor
    )
