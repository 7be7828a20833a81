"""ElectLeaders (key 43), v0-2. v1: election type (0 PREFERRED, 1 UNCLEAN) and a top-level
error code. v2: flexible.

Kafka forwards it to the controller (``ReplicationControlManager.electLeaders``). On one node
every partition already has its preferred leader, so each named partition answers
ELECTION_NOT_NEEDED, and an unknown one UNKNOWN_TOPIC_OR_PARTITION with Kafka's message; a
null partition list means every partition, and then, as Kafka, partitions that need no
election are left out (each topic is listed, with no partitions). An unknown election type
fails the request as INVALID_REQUEST (Kafka's getErrorResponse: every named partition and the
top level carry it).

It needs ALTER on the cluster, else every partition is answered CLUSTER_AUTHORIZATION_FAILED
(Kafka's ``ControllerApis.handleElectLeaders``, before anything else).
"""

from __future__ import annotations

from kio.schema.elect_leaders.v2.request import ElectLeadersRequest
from kio.schema.elect_leaders.v2.response import (
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32

from proxy.acl.checks import require_cluster
from proxy.acl.model import AclOperation
from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import NO_THROTTLE

PREFERRED, UNCLEAN = 0, 1


def _every_partition(
    req: ElectLeadersRequest, code: ErrorCode, message: str | None
) -> ElectLeadersResponse:
    return ElectLeadersResponse(
        throttle_time=NO_THROTTLE,
        error_code=code,
        replica_election_results=tuple(
            ReplicaElectionResult(
                topic=t.topic,
                partition_result=tuple(
                    PartitionResult(partition_id=p, error_code=code, error_message=message)
                    for p in t.partitions
                ),
            )
            for t in req.topic_partitions or ()
        ),
    )


def _error_reply(req: ElectLeadersRequest, code: ErrorCode) -> ElectLeadersResponse:
    return _every_partition(req, code, None)


@handler(
    api_key=43,
    versions=(0, 2),
    request=ElectLeadersRequest,
    response=ElectLeadersResponse,
    error_reply=_error_reply,
)
async def elect_leaders(ctx: RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse:
    require_cluster(ctx, AclOperation.ALTER)
    if req.election_type not in (PREFERRED, UNCLEAN):
        unknown = f"Unknown election type {req.election_type}"
        return _every_partition(req, ErrorCode.invalid_request, unknown)
    topics = ctx.broker.topics
    results = []
    if req.topic_partitions is None:
        for topic in topics:  # every partition has its leader: none is listed
            results.append(ReplicaElectionResult(topic=TopicName(topic.name), partition_result=()))
    else:
        for t in req.topic_partitions:
            parts = []
            for p in t.partitions:
                code: ErrorCode = ErrorCode.election_not_needed
                message: str | None = None
                if topics.get(t.topic) is None:
                    code, message = (
                        ErrorCode.unknown_topic_or_partition,
                        f"No such topic as {t.topic}",
                    )
                elif topics.partition(t.topic, p) is None:
                    code = ErrorCode.unknown_topic_or_partition
                    message = f"No such partition as {t.topic}-{p}"
                parts.append(
                    PartitionResult(partition_id=i32(p), error_code=code, error_message=message)
                )
            results.append(ReplicaElectionResult(topic=t.topic, partition_result=tuple(parts)))
    return ElectLeadersResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        replica_election_results=tuple(results),
    )
