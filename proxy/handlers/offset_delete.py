"""OffsetDelete (key 47), v0 (KIP-496): delete a group's committed offsets for some partitions.

Group missing (or dead): GROUP_ID_NOT_FOUND. An Empty group may delete any of its offsets. A
group with members may delete offsets only of topics none of its members subscribes to
(GROUP_SUBSCRIBED_TO_TOPIC per partition otherwise); the subscriptions are read from the
members' "consumer" protocol metadata (coordinator/group/subscriptions.py; one that does not
parse makes every topic subscribed), and a non-empty group of another protocol type answers
NON_EMPTY_GROUP, as in Kafka.

Authorization first (Kafka's ``handleOffsetDeleteRequest``): the group needs DELETE, else
the request is answered GROUP_AUTHORIZATION_FAILED; a topic needs READ, else its partitions
get TOPIC_AUTHORIZATION_FAILED (unless the group itself is refused).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.offset_delete.v0.request import OffsetDeleteRequest
from kio.schema.offset_delete.v0.response import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)

from proxy.acl.checks import allowed_names
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.outcomes import ErrorReply
from proxy.registry import handler
from storage.api import TopicPartition
from wire.values import NO_THROTTLE


@handler(api_key=47, versions=(0, 0), request=OffsetDeleteRequest, response=OffsetDeleteResponse)
async def offset_delete(ctx: RequestContext, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    if not ctx.authorized(AclOperation.DELETE, ResourceType.GROUP, req.group_id):
        raise ErrorReply(ErrorCode.group_authorization_failed)
    names = [t.name for t in req.topics]
    readable = allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC, names)
    tps = [
        TopicPartition(t.name, p.partition_index)
        for t in req.topics
        if t.name in readable
        for p in t.partitions
    ]
    result = await ctx.broker.groups.delete_offsets(req.group_id, tps)
    if isinstance(result, ErrorCode):
        return OffsetDeleteResponse(error_code=result, throttle_time=NO_THROTTLE, topics=())
    if len(readable) < len(set(names)):
        result = dict(result)
        for t in req.topics:
            if t.name not in readable:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    result[tp] = ErrorCode.topic_authorization_failed
    return OffsetDeleteResponse(
        error_code=ErrorCode.none,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            OffsetDeleteResponseTopic(
                name=t.name,
                partitions=tuple(
                    OffsetDeleteResponsePartition(
                        partition_index=p.partition_index,
                        error_code=result[TopicPartition(t.name, p.partition_index)],
                    )
                    for p in t.partitions
                ),
            )
            for t in req.topics
        ),
    )
