"""DescribeLogDirs (key 35), v1-4 (Kafka 4 removed v0, KIP-896). v1: throttle time. v2:
flexible. v3: a top-level error code. v4: the log dir's total and usable bytes.

kafkad has one log dir, its data dir: answered as Kafka's ``ReplicaManager.describeLogDirs``
answers each of its dirs — the absolute path, and per requested partition (all partitions for
a null topic list; unknown ones are left out) its size in bytes (whole retained segments, as
Kafka's ``log.size``), an offset lag of 0 (a leader's: high watermark minus log end offset,
never below 0) and not a future replica; topics without a listed partition are left out. Total
and usable bytes come from the file system the dir is on. A ``memory://`` store has no dir:
its log dir is reported as ``memory://`` with total and usable bytes -1 (unknown).

It needs DESCRIBE on the cluster, else it is answered CLUSTER_AUTHORIZATION_FAILED with no
log dirs.
"""

from __future__ import annotations

import os
from collections import defaultdict

from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
from kio.schema.describe_log_dirs.v4.response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32, i64

from proxy.acl.checks import cluster_allows
from proxy.acl.model import AclOperation
from proxy.broker import data_path, log_dir_name
from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import NO_THROTTLE


def _space(path: str) -> tuple[int, int]:
    """(total, usable) bytes of the file system holding ``path``."""
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


@handler(
    api_key=35,
    versions=(1, 4),
    request=DescribeLogDirsRequest,
    response=DescribeLogDirsResponse,
)
async def describe_log_dirs(
    ctx: RequestContext, req: DescribeLogDirsRequest
) -> DescribeLogDirsResponse:
    if not cluster_allows(ctx, AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(
            throttle_time=NO_THROTTLE, error_code=ErrorCode.cluster_authorization_failed, results=()
        )
    broker = ctx.broker
    wanted = (
        None
        if req.topics is None
        else {(t.topic, int(i)) for t in req.topics for i in t.partitions}
    )
    by_topic: dict[str, list[DescribeLogDirsPartition]] = defaultdict(list)
    for topic in broker.topics:
        for p in topic.partitions:
            if p.deleted or (wanted is not None and (topic.name, p.tp.partition) not in wanted):
                continue
            by_topic[topic.name].append(
                DescribeLogDirsPartition(
                    partition_index=i32(p.tp.partition),
                    partition_size=i64(p.log.size_bytes),
                    offset_lag=i64(max(p.high_watermark - p.log.log_end_offset, 0)),
                    is_future_key=False,
                )
            )
    log_dir = log_dir_name(broker.config.data_dir)
    on_disk = data_path(broker.config.data_dir) is not None
    total, usable = _space(log_dir) if on_disk else (-1, -1)
    result = DescribeLogDirsResult(
        error_code=ErrorCode.none,
        log_dir=log_dir,
        topics=tuple(
            DescribeLogDirsTopic(name=TopicName(name), partitions=tuple(parts))
            for name, parts in by_topic.items()
        ),
        total_bytes=i64(total),
        usable_bytes=i64(usable),
    )
    return DescribeLogDirsResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results=(result,)
    )
