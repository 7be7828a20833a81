"""OffsetCommit (key 8), v2-10. v2: retention time (ignored, as Kafka 4.x does). v3: throttle
time. v5: retention time removed. v6: committed leader epoch. v7: group instance id
(FENCED_INSTANCE_ID). v8: flexible. v9: a missing group with generation >= 0 is
GROUP_ID_NOT_FOUND (older versions get ILLEGAL_GENERATION, via wire/errors.py). v10 (Kafka
4.1, KIP-848): topics named by id only, in the request and the response; an id this broker
does not know (or the zero id) answers every partition of that topic UNKNOWN_TOPIC_ID, before
the topic authorization (Kafka's ``handleOffsetCommitRequest`` resolves the ids through the
metadata cache first and leaves an unresolved topic's name empty). Offsets are stored by topic
name, as Kafka stores them, whichever version committed them.

Group checks (Kafka's ``validateOffsetCommit``, coordinator/group/offsets_api.py): generation
-1 commits to an Empty or missing group are accepted (simple consumers with assign(); a missing
group becomes an Empty "simple" group); otherwise the member must be known (UNKNOWN_MEMBER_ID /
FENCED_INSTANCE_ID), then of the current generation (ILLEGAL_GENERATION), and only then does a
group in CompletingRebalance answer REBALANCE_IN_PROGRESS. Unknown topics and partitions get
UNKNOWN_TOPIC_OR_PARTITION; metadata over 4096 bytes OFFSET_METADATA_TOO_LARGE. For a
consumer group (KIP-848) the generation is the member epoch: Kafka's
ConsumerGroup.validateOffsetCommit (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH; a member below v9
UNSUPPORTED_VERSION).

Authorization first (Kafka's ``handleOffsetCommitRequest``): the group needs READ, else every
partition is answered GROUP_AUTHORIZATION_FAILED; each topic needs READ, else its partitions
get TOPIC_AUTHORIZATION_FAILED (before the unknown-topic check).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v9.request import OffsetCommitRequest, OffsetCommitRequestTopic
from kio.schema.offset_commit.v9.response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kio.schema.offset_commit.v10 import request as v10
from kio.schema.offset_commit.v10 import response as v10r
from kio.schema.types import TopicName
from kio.static.primitive import i32

from coordinator.group.offsets import CommitRequest
from proxy.acl.checks import allowed_names
from proxy.acl.model import AclOperation, ResourceType
from proxy.broker import Broker
from proxy.context import RequestContext
from proxy.outcomes import ErrorReply
from proxy.registry import handler
from storage.api import TopicPartition
from wire.codec import response_class
from wire.values import NO_THROTTLE
from wire.versions import convert

TOPIC_ID_VERSION = 10


class CommitPartition(Protocol):
    """A partition of an OffsetCommit or a TxnOffsetCommit request."""

    @property
    def partition_index(self) -> i32: ...
    @property
    def committed_offset(self) -> int: ...
    @property
    def committed_leader_epoch(self) -> int: ...
    @property
    def committed_metadata(self) -> str | None: ...


class CommitTopic(Protocol):
    @property
    def name(self) -> TopicName: ...
    @property
    def partitions(self) -> Sequence[CommitPartition]: ...


Codes = list[tuple[TopicName, list[tuple[i32, ErrorCode]]]]


def authorize_commit(ctx: RequestContext, group_id: str, topics: Sequence[CommitTopic]) -> set[str]:
    """Both APIs' group and topic checks: the group needs READ (else the whole request is
    answered GROUP_AUTHORIZATION_FAILED); the topics that may be committed to (READ)."""
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, group_id):
        raise ErrorReply(ErrorCode.group_authorization_failed)
    return allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC, [t.name for t in topics])


def parse_commits(
    broker: Broker, topics: Sequence[CommitTopic], readable: set[str]
) -> tuple[dict[TopicPartition, ErrorCode], list[CommitRequest]]:
    """The offsets of an OffsetCommit or TxnOffsetCommit request: topics not in ``readable``
    answered TOPIC_AUTHORIZATION_FAILED, unknown topics and partitions
    UNKNOWN_TOPIC_OR_PARTITION at once (Kafka's metadata cache check), the rest to commit."""
    codes: dict[TopicPartition, ErrorCode] = {}
    commits = []
    for t in topics:
        topic = broker.topics.get(t.name)
        count = 0 if topic is None else len(topic.partitions)
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if t.name not in readable:
                codes[tp] = ErrorCode.topic_authorization_failed
                continue
            if not 0 <= p.partition_index < count:
                codes[tp] = ErrorCode.unknown_topic_or_partition
                continue
            commits.append(
                CommitRequest(
                    tp, p.committed_offset, p.committed_leader_epoch, p.committed_metadata
                )
            )
    return codes, commits


def commit_codes(
    topics: Sequence[CommitTopic],
    codes: dict[TopicPartition, ErrorCode],
    commits: list[CommitRequest],
    result: ErrorCode | dict[TopicPartition, ErrorCode] | None,
) -> Codes:
    """One code per requested partition, in request order, for the OffsetCommit or
    TxnOffsetCommit response: the coordinator's group-level error or its per-partition code
    for the commits it was given, the parse error for the others."""
    for c in commits:
        assert result is not None
        codes[c.tp] = result if isinstance(result, ErrorCode) else result[c.tp]
    return [
        (
            t.name,
            [
                (p.partition_index, codes[TopicPartition(t.name, p.partition_index)])
                for p in t.partitions
            ],
        )
        for t in topics
    ]


def every_partition(topics: Sequence[CommitTopic], code: ErrorCode) -> Codes:
    """``code`` for every requested partition (both APIs' error reply)."""
    return [(t.name, [(p.partition_index, code) for p in t.partitions]) for t in topics]


def _response(codes: Codes) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            OffsetCommitResponseTopic(
                name=name,
                partitions=tuple(
                    OffsetCommitResponsePartition(partition_index=i, error_code=c) for i, c in parts
                ),
            )
            for name, parts in codes
        ),
    )


def _v10_response(
    req: v10.OffsetCommitRequest, named: dict[uuid.UUID, str], codes: Codes
) -> v10r.OffsetCommitResponse:
    """The v10 answer, topics by id in request order: those ``named`` (known ids) with the
    codes their names got, the others UNKNOWN_TOPIC_ID."""
    by_name = dict(codes)
    topics = []
    for t in req.topics:
        topic_id = t.topic_id or uuid.UUID(int=0)
        name = named.get(topic_id)
        parts = (
            by_name[TopicName(name)]
            if name is not None
            else [(p.partition_index, ErrorCode.unknown_topic_id) for p in t.partitions]
        )
        topics.append(
            v10r.OffsetCommitResponseTopic(
                topic_id=topic_id,
                partitions=tuple(
                    v10r.OffsetCommitResponsePartition(partition_index=i, error_code=c)
                    for i, c in parts
                ),
            )
        )
    return v10r.OffsetCommitResponse(throttle_time=NO_THROTTLE, topics=tuple(topics))


def _as_sent(response: OffsetCommitResponse, version: int) -> Any:
    return convert(response, response_class(8, version))


def _error_reply(req: Any, code: ErrorCode) -> Any:
    """Every requested partition answered ``code``, in the class of the version sent."""
    version = int(req.__version__)
    if version >= TOPIC_ID_VERSION:
        return v10r.OffsetCommitResponse(
            throttle_time=NO_THROTTLE,
            topics=tuple(
                v10r.OffsetCommitResponseTopic(
                    topic_id=t.topic_id,
                    partitions=tuple(
                        v10r.OffsetCommitResponsePartition(
                            partition_index=p.partition_index, error_code=code
                        )
                        for p in t.partitions
                    ),
                )
                for t in req.topics
            ),
        )
    return _as_sent(_response(every_partition(req.topics, code)), version)


def _by_name(
    ctx: RequestContext, req: v10.OffsetCommitRequest
) -> tuple[OffsetCommitRequest, dict[uuid.UUID, str]]:
    """A v10 request as v9's (topics by name), the topics whose id is unknown left out; and
    the ids that were known, with their names."""
    named: dict[uuid.UUID, str] = {}
    topics = []
    for t in req.topics:
        found = None if t.topic_id is None else ctx.broker.topics.by_id(t.topic_id)
        if found is None:
            continue
        named[found.topic_id] = found.name
        topics.append(convert(t, OffsetCommitRequestTopic, name=TopicName(found.name)))
    v9 = convert(req, OffsetCommitRequest, topics=tuple(topics))
    return v9, named


@handler(
    api_key=8,
    versions=(2, 10),
    request=v10.OffsetCommitRequest,
    response=v10r.OffsetCommitResponse,
    error_reply=_error_reply,
    as_sent=True,
)
async def offset_commit(ctx: RequestContext, req: Any) -> Any:
    """``req`` in the class of the version sent (``as_sent``): v10 names topics by id."""
    if ctx.version >= TOPIC_ID_VERSION:
        named_req, named = _by_name(ctx, req)
        return _v10_response(req, named, await _commit(ctx, named_req))
    v9 = convert(req, OffsetCommitRequest)
    return _as_sent(_response(await _commit(ctx, v9)), ctx.version)


async def _commit(ctx: RequestContext, req: OffsetCommitRequest) -> Codes:
    broker = ctx.broker
    readable = authorize_commit(ctx, req.group_id, req.topics)
    codes, commits = parse_commits(broker, req.topics, readable)
    result = None
    if commits:
        result = await broker.groups.commit_offsets(
            req.group_id,
            req.member_id,
            req.group_instance_id,
            req.generation_id_or_member_epoch,
            commits,
            ctx.version,
        )
    return commit_codes(req.topics, codes, commits, result)
