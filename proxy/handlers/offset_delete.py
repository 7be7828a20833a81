"""OffsetDelete (key 47), v0 (KIP-496): delete a group's committed offsets for some partitions.

Group missing (or dead): GROUP_ID_NOT_FOUND. An Empty group may delete any of its offsets. A
group with members may delete offsets only of topics none of its members subscribes to
(GROUP_SUBSCRIBED_TO_TOPIC per partition otherwise); the subscriptions are read from the
members' "consumer" protocol metadata (coordinator/group/subscriptions.py; one that does not
parse makes every topic subscribed), and a non-empty group of another protocol type answers
NON_EMPTY_GROUP, as in Kafka.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.offset_delete.v0.request import OffsetDeleteRequest
from kio.schema.offset_delete.v0.response import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)

from proxy.context import RequestContext
from proxy.registry import handler
from storage.api import TopicPartition
from wire.values import NO_THROTTLE


@handler(api_key=47, versions=(0, 0), request=OffsetDeleteRequest, response=OffsetDeleteResponse)
async def offset_delete(ctx: RequestContext, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    tps = [TopicPartition(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    result = await ctx.broker.groups.delete_offsets(req.group_id, tps)
    if isinstance(result, ErrorCode):
        return OffsetDeleteResponse(error_code=result, throttle_time=NO_THROTTLE, topics=())
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
