"""OffsetForLeaderEpoch (key 23), v2-4 (Kafka 4 removed v0-1, KIP-896). v2: current leader
epoch (fencing). v3: replica id. v4: flexible.

Consumers ask it (KIP-320) to check, after a leader change or a rebalance, that the offset
they hold was not truncated away: "where did leader epoch E end?". kafkad is one node that is
never re-elected, so its leader-epoch cache holds one entry: epoch 0 from the log start
offset. Kafka's ``LeaderEpochFileCache.endOffsetFor`` then answers: epoch -1 -> (-1, -1); the
current epoch 0 -> (0, the log end offset); a higher epoch -> (-1, -1); a lower one (below
any known epoch) -> (that epoch, the log start offset). Per partition, first (as
``ReplicaManager.lastOffsetForLeaderEpoch`` / ``Partition.getLocalLog``): an unknown partition
-> UNKNOWN_TOPIC_OR_PARTITION; a current leader epoch above 0 -> UNKNOWN_LEADER_EPOCH, below
(other than -1) -> FENCED_LEADER_EPOCH.

Authorization (KIP-320, Kafka's ``handleOffsetForLeaderEpochRequest``): CLUSTER_ACTION on the
cluster allows every topic, otherwise each needs DESCRIBE; the others come last, every
partition TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
)
from kio.schema.offset_for_leader_epoch.v4.response import (
    EpochEndOffset,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from kio.static.primitive import i32, i64

from proxy.acl.checks import allowed_names, cluster_allows
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from storage.partition import LEADER_EPOCH, NO_EPOCH, Partition, leader_epoch_error
from wire.values import NO_THROTTLE


def _failed(partition: i32, code: ErrorCode) -> EpochEndOffset:
    return EpochEndOffset(
        error_code=code, partition=partition, leader_epoch=i32(-1), end_offset=i64(-1)
    )


def end_offset_for(p: Partition, epoch: int) -> tuple[int, int]:
    """(epoch, end offset) of ``epoch`` from a one-entry leader-epoch cache (see above)."""
    if epoch == NO_EPOCH or epoch > LEADER_EPOCH:
        return NO_EPOCH, -1
    if epoch == LEADER_EPOCH:
        return LEADER_EPOCH, p.log.log_end_offset
    return epoch, p.log_start_offset


def _answer(ctx: RequestContext, topic: str, rp: OffsetForLeaderPartition) -> EpochEndOffset:
    p = ctx.broker.topics.partition(topic, rp.partition)
    if p is None or p.deleted:
        return _failed(rp.partition, ErrorCode.unknown_topic_or_partition)
    if (refused := leader_epoch_error(rp.current_leader_epoch)) is not None:
        return _failed(rp.partition, refused)
    epoch, end = end_offset_for(p, rp.leader_epoch)
    return EpochEndOffset(
        error_code=ErrorCode.none,
        partition=rp.partition,
        leader_epoch=i32(epoch),
        end_offset=i64(end),
    )


def _error_reply(req: OffsetForLeaderEpochRequest, code: ErrorCode) -> OffsetForLeaderEpochResponse:
    return OffsetForLeaderEpochResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            OffsetForLeaderTopicResult(
                topic=t.topic, partitions=tuple(_failed(p.partition, code) for p in t.partitions)
            )
            for t in req.topics
        ),
    )


@handler(
    api_key=23,
    versions=(2, 4),
    request=OffsetForLeaderEpochRequest,
    response=OffsetForLeaderEpochResponse,
    error_reply=_error_reply,
)
async def offset_for_leader_epoch(
    ctx: RequestContext, req: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    names: list[str] = [t.topic for t in req.topics]
    describable: set[str]
    if cluster_allows(ctx, AclOperation.CLUSTER_ACTION):
        describable = set(names)
    else:
        describable = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    refused = ErrorCode.topic_authorization_failed
    return OffsetForLeaderEpochResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            OffsetForLeaderTopicResult(
                topic=t.topic, partitions=tuple(_answer(ctx, t.topic, p) for p in t.partitions)
            )
            for t in req.topics
            if t.topic in describable
        )
        + tuple(
            OffsetForLeaderTopicResult(
                topic=t.topic, partitions=tuple(_failed(p.partition, refused) for p in t.partitions)
            )
            for t in req.topics
            if t.topic not in describable
        ),
    )
