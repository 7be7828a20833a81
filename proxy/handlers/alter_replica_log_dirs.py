"""AlterReplicaLogDirs (key 34), v1-2 (Kafka 4 removed v0, KIP-896; v2: flexible).

Moves partitions between a broker's log dirs. kafkad has one log dir, its data dir (the path
DescribeLogDirs reports), so every move is to where the partition already is. Each
(partition, dir) is answered as Kafka's ``ReplicaManager.alterReplicaLogDirs`` answers it, in
its order: a topic name too long for the future-replica dir name Kafka would create (over 255
characters as ``<topic>-<partition>.<32 hex>-future``) -> INVALID_TOPIC_EXCEPTION; a dir that
is not the log dir -> LOG_DIR_NOT_FOUND; an unknown partition -> UNKNOWN_TOPIC_OR_PARTITION;
else NONE (Kafka's "same as the current log dir": nothing to move). A partition named under
several dirs is answered once, for the last (Kafka collects the request into a map). Results
are grouped by topic.

It needs ALTER on the cluster, else every partition is answered CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from kio.schema.alter_replica_log_dirs.v2.request import AlterReplicaLogDirsRequest
from kio.schema.alter_replica_log_dirs.v2.response import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopicResult,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32

from proxy.acl.checks import require_cluster
from proxy.acl.model import AclOperation
from proxy.broker import log_dir_name
from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import NO_THROTTLE

# Kafka's UnifiedLog.logFutureDirName: "<topic>-<partition>.<uuid without dashes>-future"
_FUTURE_SUFFIX = len(".") + 32 + len("-future")
MAX_DIR_NAME = 255


def _results(
    wanted: dict[tuple[str, int], ErrorCode],
) -> tuple[AlterReplicaLogDirTopicResult, ...]:
    by_topic: dict[str, list[AlterReplicaLogDirPartitionResult]] = {}
    for (topic, partition), code in wanted.items():
        by_topic.setdefault(topic, []).append(
            AlterReplicaLogDirPartitionResult(partition_index=i32(partition), error_code=code)
        )
    return tuple(
        AlterReplicaLogDirTopicResult(topic_name=TopicName(t), partitions=tuple(parts))
        for t, parts in by_topic.items()
    )


def _error_reply(req: AlterReplicaLogDirsRequest, code: ErrorCode) -> AlterReplicaLogDirsResponse:
    """Kafka's getErrorResponse: one topic result per (dir, topic) entry, partitions as listed."""
    return AlterReplicaLogDirsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(
            AlterReplicaLogDirTopicResult(
                topic_name=t.name,
                partitions=tuple(
                    AlterReplicaLogDirPartitionResult(partition_index=p, error_code=code)
                    for p in t.partitions
                ),
            )
            for d in req.dirs
            for t in d.topics
        ),
    )


@handler(
    api_key=34,
    versions=(1, 2),
    request=AlterReplicaLogDirsRequest,
    response=AlterReplicaLogDirsResponse,
    error_reply=_error_reply,
)
async def alter_replica_log_dirs(
    ctx: RequestContext, req: AlterReplicaLogDirsRequest
) -> AlterReplicaLogDirsResponse:
    require_cluster(ctx, AclOperation.ALTER)
    broker = ctx.broker
    ours = log_dir_name(broker.config.data_dir)
    targets: dict[tuple[str, int], str] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                key = (str(t.name), int(p))
                targets.pop(key, None)  # the last one named wins, in its place
                targets[key] = d.path
    answers: dict[tuple[str, int], ErrorCode] = {}
    for (topic, partition), path in targets.items():
        if len(f"{topic}-{partition}") + _FUTURE_SUFFIX > MAX_DIR_NAME:
            answers[(topic, partition)] = ErrorCode.invalid_topic_exception
        elif path != ours:
            answers[(topic, partition)] = ErrorCode.log_dir_not_found
        elif broker.topics.partition(topic, partition) is None:
            answers[(topic, partition)] = ErrorCode.unknown_topic_or_partition
        else:
            answers[(topic, partition)] = ErrorCode.none
    return AlterReplicaLogDirsResponse(throttle_time=NO_THROTTLE, results=_results(answers))
