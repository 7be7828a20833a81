"""OffsetFetch (key 9), v1-9. v2: null topics = every committed partition; top-level error
code. v3: throttle time. v5: committed leader epoch. v6: flexible. v7: require_stable (answers
UNSTABLE_OFFSET_COMMIT for partitions with pending transactional offsets, KIP-447). v8: many
groups in one request, one error code per group (KIP-709). v9 (KIP-848): each group may name
the fetching member and its epoch; for a consumer group they are checked (UNKNOWN_MEMBER_ID,
STALE_MEMBER_EPOCH, Kafka's ConsumerGroup.validateOffsetFetch). v10 (topic ids) is not
advertised.

A partition with no committed offset answers offset -1, leader epoch -1, metadata "" and no
error; a group that does not exist answers the same (and nothing for "all partitions").

Authorization (Kafka's ``handleOffsetFetchRequestFromCoordinator``): a group the principal may
not DESCRIBE is answered GROUP_AUTHORIZATION_FAILED; asked for all partitions, the topics it
may not DESCRIBE are left out; asked for some, their partitions come last with offset -1 and
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.offset_fetch.v9.request import OffsetFetchRequest, OffsetFetchRequestGroup
from kio.schema.offset_fetch.v9.request import OffsetFetchRequestTopics as RequestTopics
from kio.schema.offset_fetch.v9.response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopics,
)
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64

from coordinator.group.offsets import FetchedOffset
from proxy.acl.checks import allowed_names, enforced
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from storage.api import TopicPartition
from wire.values import NO_THROTTLE


def _one_group(old: Any, version: int) -> Mapping[str, Any]:
    """v1-7 ask for one group (``group_id``, ``topics``), v8 for a list (``groups``)."""
    if version >= 8:
        return {}
    topics = (
        None
        if old.topics is None
        else tuple(
            RequestTopics(name=t.name, partition_indexes=t.partition_indexes) for t in old.topics
        )
    )
    return {"groups": (OffsetFetchRequestGroup(group_id=old.group_id, topics=topics),)}


def _top_level(resp: OffsetFetchResponse, old: Any, version: int) -> Mapping[str, Any]:
    """v1-7 answer their one group at the top level; v1 has no group-level error code, so a
    group error is answered on every partition asked for (Kafka's OffsetFetchResponse)."""
    if version >= 8:
        return {}
    (group,) = resp.groups
    if version >= 2:
        return {"topics": group.topics, "error_code": group.error_code}
    if group.error_code is ErrorCode.none:
        return {"topics": group.topics}
    failed = [FetchedOffset(tp, -1, -1, "", group.error_code) for tp in _wanted(old.topics) or []]
    return {"topics": _topics(failed)}


def _wanted(topics: Sequence[RequestTopics] | None) -> list[TopicPartition] | None:
    if topics is None:
        return None
    return [TopicPartition(t.name, i) for t in topics for i in t.partition_indexes]


def _topics(fetched: list[FetchedOffset]) -> tuple[OffsetFetchResponseTopics, ...]:
    by_topic: dict[str, list[FetchedOffset]] = defaultdict(list)
    for f in fetched:
        by_topic[f.tp.topic].append(f)
    return tuple(
        OffsetFetchResponseTopics(
            name=TopicName(name),
            partitions=tuple(
                OffsetFetchResponsePartitions(
                    partition_index=i32(f.tp.partition),
                    committed_offset=i64(f.offset),
                    committed_leader_epoch=i32(f.leader_epoch),
                    metadata=f.metadata,
                    error_code=f.error,
                )
                for f in parts
            ),
        )
        for name, parts in by_topic.items()
    )


def _group(
    group_id: GroupId, code: ErrorCode, fetched: list[FetchedOffset]
) -> OffsetFetchResponseGroup:
    return OffsetFetchResponseGroup(group_id=group_id, topics=_topics(fetched), error_code=code)


def _error_reply(req: OffsetFetchRequest, code: ErrorCode) -> OffsetFetchResponse:
    return OffsetFetchResponse(
        throttle_time=NO_THROTTLE, groups=tuple(_group(g.group_id, code, []) for g in req.groups)
    )


@handler(
    api_key=9,
    versions=(1, 9),
    request=OffsetFetchRequest,
    response=OffsetFetchResponse,
    error_reply=_error_reply,
    upgrade=_one_group,
    downgrade=_top_level,
)
async def offset_fetch(ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    groups = ctx.broker.groups
    out = []
    for g in req.groups:
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id):
            out.append(_group(g.group_id, ErrorCode.group_authorization_failed, []))
            continue
        member = (g.member_id, g.member_epoch)  # v9 (KIP-848): checked for a consumer group
        wanted = _wanted(g.topics)
        if wanted is None:
            code, fetched = groups.fetch_offsets(g.group_id, None, req.require_stable, *member)
            if code is ErrorCode.none and enforced(ctx):
                names = {f.tp.topic for f in fetched}
                shown = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
                fetched = [f for f in fetched if f.tp.topic in shown]
        else:
            names = {tp.topic for tp in wanted}
            shown = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
            asked = [tp for tp in wanted if tp.topic in shown]
            code, fetched = groups.fetch_offsets(g.group_id, asked, req.require_stable, *member)
            if code is ErrorCode.none:
                fetched = fetched + [
                    FetchedOffset(tp, -1, -1, "", ErrorCode.topic_authorization_failed)
                    for tp in wanted
                    if tp.topic not in shown
                ]
        out.append(_group(g.group_id, code, fetched))
    return OffsetFetchResponse(throttle_time=NO_THROTTLE, groups=tuple(out))
