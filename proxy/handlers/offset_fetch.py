"""OffsetFetch (key 9), v1-9. v2: null topics = every committed partition; top-level error
code. v3: throttle time. v5: committed leader epoch. v6: flexible. v7: require_stable (answers
UNSTABLE_OFFSET_COMMIT for partitions with pending transactional offsets, KIP-447). v8: many
groups in one request, one error code per group (KIP-709). v9 (KIP-848): each group may name
the fetching member and its epoch; for a consumer group they are checked (UNKNOWN_MEMBER_ID,
STALE_MEMBER_EPOCH, Kafka's ConsumerGroup.validateOffsetFetch). v10 (Kafka 4.1, KIP-848):
topics named by id only; a requested id this broker does not know (or the zero id) answers its
partitions offset -1 and UNKNOWN_TOPIC_ID, after the group checks; the answer names each
topic by its id (the zero id for a topic no longer there, Kafka's metadataCache.getTopicId).

A partition with no committed offset answers offset -1, leader epoch -1, metadata "" and no
error; a group that does not exist answers the same (and nothing for "all partitions").

Authorization (Kafka's ``handleOffsetFetchRequestFromCoordinator``): a group the principal may
not DESCRIBE is answered GROUP_AUTHORIZATION_FAILED; asked for all partitions, the topics it
may not DESCRIBE are left out; asked for some, their partitions come last with offset -1 and
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import uuid
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
from kio.schema.offset_fetch.v10 import request as v10
from kio.schema.offset_fetch.v10 import response as v10r
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64

from coordinator.group.offsets import FetchedOffset
from proxy.acl.checks import allowed_names, enforced
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from storage.api import TopicPartition
from wire.codec import response_class
from wire.values import NO_THROTTLE
from wire.versions import convert

TOPIC_ID_VERSION = 10
ZERO_ID = uuid.UUID(int=0)


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


def _error_reply(req: Any, code: ErrorCode) -> Any:
    """Every group answered ``code``, in the class of the version sent."""
    version = int(req.__version__)
    if version >= TOPIC_ID_VERSION:
        return v10r.OffsetFetchResponse(
            throttle_time=NO_THROTTLE,
            groups=tuple(
                v10r.OffsetFetchResponseGroup(group_id=g.group_id, topics=(), error_code=code)
                for g in req.groups
            ),
        )
    groups = tuple(_group(g.group_id, code, []) for g in upgrade_request(req, version).groups)
    return downgrade_answer(
        OffsetFetchResponse(throttle_time=NO_THROTTLE, groups=groups), req, version
    )


def upgrade_request(req: Any, version: int) -> OffsetFetchRequest:
    """A v1-9 request as v9's (v1-7's one group made a list of one)."""
    return convert(req, OffsetFetchRequest, **_one_group(req, version))


def downgrade_answer(resp: OffsetFetchResponse, req: Any, version: int) -> Any:
    """v9's answer in the class of ``version`` (1-9), v1-7's group at the top level."""
    return convert(resp, response_class(9, version), **_top_level(resp, req, version))


@handler(
    api_key=9,
    versions=(1, 10),
    request=v10.OffsetFetchRequest,
    response=v10r.OffsetFetchResponse,
    error_reply=_error_reply,
    as_sent=True,
)
async def offset_fetch(ctx: RequestContext, req: Any) -> Any:
    """``req`` in the class of the version sent (``as_sent``): v10 names topics by id, the
    older versions are answered through v9's shape."""
    version = ctx.version
    if version >= TOPIC_ID_VERSION:
        return await _fetch_by_id(ctx, req)
    return downgrade_answer(await _fetch(ctx, upgrade_request(req, version)), req, version)


async def _fetch_by_id(
    ctx: RequestContext, req: v10.OffsetFetchRequest
) -> v10r.OffsetFetchResponse:
    """v10: the ids resolved to names, v9's answer given again by id; the ids not known are
    answered UNKNOWN_TOPIC_ID after the others (when the group itself had no error)."""
    unknown: dict[str, list[tuple[uuid.UUID, tuple[i32, ...]]]] = defaultdict(list)
    asked = []
    for g in req.groups:
        named = None
        if g.topics is not None:
            named = []
            for t in g.topics:
                found = None if t.topic_id is None else ctx.broker.topics.by_id(t.topic_id)
                if found is None:
                    unknown[g.group_id].append((t.topic_id or ZERO_ID, t.partition_indexes))
                    continue
                named.append(
                    RequestTopics(name=TopicName(found.name), partition_indexes=t.partition_indexes)
                )
        asked.append(
            OffsetFetchRequestGroup(
                group_id=g.group_id,
                member_id=g.member_id,
                member_epoch=g.member_epoch,
                topics=None if named is None else tuple(named),
            )
        )
    answer = await _fetch(
        ctx, OffsetFetchRequest(groups=tuple(asked), require_stable=req.require_stable)
    )
    out = []
    for group in answer.groups:
        topics = [
            v10r.OffsetFetchResponseTopics(
                topic_id=_topic_id(ctx, t.name),
                partitions=tuple(
                    convert(p, v10r.OffsetFetchResponsePartitions) for p in t.partitions
                ),
            )
            for t in group.topics
        ]
        if group.error_code is ErrorCode.none:
            topics += [
                v10r.OffsetFetchResponseTopics(
                    topic_id=topic_id,
                    partitions=tuple(
                        v10r.OffsetFetchResponsePartitions(
                            partition_index=i,
                            committed_offset=i64(-1),
                            committed_leader_epoch=i32(-1),
                            metadata="",
                            error_code=ErrorCode.unknown_topic_id,
                        )
                        for i in parts
                    ),
                )
                for topic_id, parts in unknown[group.group_id]
            ]
        out.append(
            v10r.OffsetFetchResponseGroup(
                group_id=group.group_id, topics=tuple(topics), error_code=group.error_code
            )
        )
    return v10r.OffsetFetchResponse(throttle_time=NO_THROTTLE, groups=tuple(out))


def _topic_id(ctx: RequestContext, name: str) -> uuid.UUID:
    found = ctx.broker.topics.get(name)
    return ZERO_ID if found is None else found.topic_id


async def _fetch(ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
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
