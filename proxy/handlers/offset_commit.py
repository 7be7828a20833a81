"""OffsetCommit (key 8), v2-9. v2: retention time (ignored, as Kafka 4.x does). v3: throttle
time. v5: retention time removed. v6: committed leader epoch. v7: group instance id
(FENCED_INSTANCE_ID). v8: flexible. v9: a missing group with generation >= 0 is
GROUP_ID_NOT_FOUND (older versions get ILLEGAL_GENERATION, via wire/errors.py).

Group checks (Kafka's ``validateOffsetCommit``, coordinator/group/offsets_api.py): generation
-1 commits to an Empty or missing group are accepted (simple consumers with assign(); a missing
group becomes an Empty "simple" group); otherwise the member must be known (UNKNOWN_MEMBER_ID /
FENCED_INSTANCE_ID), then of the current generation (ILLEGAL_GENERATION), and only then does a
group in CompletingRebalance answer REBALANCE_IN_PROGRESS. Unknown topics and partitions get
UNKNOWN_TOPIC_OR_PARTITION; metadata over 4096 bytes OFFSET_METADATA_TOO_LARGE.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.group.offsets import CommitRequest
from proxy.broker import Broker
from proxy.context import RequestContext
from proxy.registry import handler
from storage.api import TopicPartition


def parse_commits(
    broker: Broker, topics: Any
) -> tuple[dict[TopicPartition, ErrorCode], list[CommitRequest]]:
    """The offsets of an OffsetCommit or TxnOffsetCommit request: unknown topics and
    partitions answered UNKNOWN_TOPIC_OR_PARTITION at once (Kafka's metadata cache check), the
    rest to commit."""
    codes: dict[TopicPartition, ErrorCode] = {}
    commits = []
    for t in topics:
        topic = broker.topics.get(t.name)
        count = 0 if topic is None else len(topic.partitions)
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if not 0 <= p.partition_index < count:
                codes[tp] = ErrorCode.unknown_topic_or_partition
                continue
            commits.append(
                CommitRequest(
                    tp,
                    p.committed_offset,
                    getattr(p, "committed_leader_epoch", -1),
                    p.committed_metadata,
                )
            )
    return codes, commits


def commit_response(
    ctx: RequestContext,
    kind: str,
    topics: Any,
    codes: dict[TopicPartition, ErrorCode],
    commits: list[CommitRequest],
    result: ErrorCode | dict[TopicPartition, ErrorCode] | None,
) -> Any:
    """The OffsetCommit or TxnOffsetCommit (``kind``) response: one code per requested
    partition, the coordinator's group-level error or its per-partition code for the commits
    it was given, the parse error for the others."""
    for c in commits:
        assert result is not None
        codes[c.tp] = result if isinstance(result, ErrorCode) else result[c.tp]
    b = ctx.b
    return getattr(b, f"{kind}Response")(
        throttle_time=0,
        topics=tuple(
            getattr(b, f"{kind}ResponseTopic")(
                name=t.name,
                partitions=tuple(
                    getattr(b, f"{kind}ResponsePartition")(
                        partition_index=p.partition_index,
                        error_code=codes[TopicPartition(t.name, p.partition_index)],
                    )
                    for p in t.partitions
                ),
            )
            for t in topics
        ),
    )


@handler(api_key=8, versions=(2, 9))
async def offset_commit(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    codes, commits = parse_commits(broker, req.topics)
    result = None
    if commits:
        result = await broker.groups.commit_offsets(
            req.group_id,
            req.member_id,
            getattr(req, "group_instance_id", None),
            req.generation_id_or_member_epoch,
            commits,
        )
    return commit_response(ctx, "OffsetCommit", req.topics, codes, commits, result)
