"""AlterPartitionReassignments (key 45) v0-1 and ListPartitionReassignments (key 46) v0.

Kafka forwards both to the controller (``ReplicationControlManager``). A one-node cluster can
only "reassign" a partition to the replica list it has, ``[node.id]``: that is accepted and
changes nothing (no reassignment is ever in progress). Per partition, in Kafka's order: an
unknown topic or partition -> UNKNOWN_TOPIC_OR_PARTITION ("Unable to find a topic named X." /
"Unable to find partition X:N."); a null replica list (cancel) -> NO_REASSIGNMENT_IN_PROGRESS;
an empty list, a broker that is not this node, or a broker named twice ->
INVALID_REPLICA_ASSIGNMENT with Kafka's ``validateManualPartitionAssignment`` messages.
AlterPartitionReassignments v1 (KIP-860) carries ``allow_replication_factor_change``, echoed in
the response so a client knows it was understood (an error reply leaves it at its default,
true, as Kafka's getErrorResponse does); Kafka checks it after the assignment is
validated, and the only assignment valid here, ``[node.id]``, keeps the replication factor
(1), so it never refuses anything on one node.
ListPartitionReassignments answers no ongoing reassignments, for every topic or those named.

AlterPartitionReassignments needs ALTER on the cluster, ListPartitionReassignments DESCRIBE,
else the request is answered CLUSTER_AUTHORIZATION_FAILED (its error reply).
"""

from __future__ import annotations

from collections.abc import Sequence

from kio.schema.alter_partition_reassignments.v1.request import AlterPartitionReassignmentsRequest
from kio.schema.alter_partition_reassignments.v1.response import (
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from kio.schema.errors import ErrorCode
from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest
from kio.schema.list_partition_reassignments.v0.response import (
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)

from proxy.acl.checks import require_cluster
from proxy.acl.model import AclOperation
from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import NO_THROTTLE


def _check(node: int, replicas: Sequence[int]) -> str | None:
    """Kafka's ``validateManualPartitionAssignment`` on a one-broker cluster."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    previous = None
    for broker in sorted(replicas):
        if broker != node:
            return (
                f"The manual partition assignment includes broker {broker}, but no such broker "
                "is registered."
            )
        if broker == previous:
            return f"The manual partition assignment includes the broker {broker} more than once."
        previous = broker
    return None


def _alter_error_reply(
    req: AlterPartitionReassignmentsRequest, code: ErrorCode
) -> AlterPartitionReassignmentsResponse:
    # Kafka's getErrorResponse leaves AllowReplicationFactorChange at its default (true)
    return AlterPartitionReassignmentsResponse(
        throttle_time=NO_THROTTLE,
        allow_replication_factor_change=True,
        error_code=code,
        error_message=None,
        responses=tuple(
            ReassignableTopicResponse(
                name=t.name,
                partitions=tuple(
                    ReassignablePartitionResponse(
                        partition_index=p.partition_index, error_code=code, error_message=None
                    )
                    for p in t.partitions
                ),
            )
            for t in req.topics
        ),
    )


@handler(
    api_key=45,
    versions=(0, 1),
    request=AlterPartitionReassignmentsRequest,
    response=AlterPartitionReassignmentsResponse,
    error_reply=_alter_error_reply,
)
async def alter_partition_reassignments(
    ctx: RequestContext, req: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    require_cluster(ctx, AclOperation.ALTER)
    topics, node = ctx.broker.topics, ctx.broker.node_id
    responses = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code, message = ErrorCode.none, None
            if topics.get(t.name) is None:
                code, message = (
                    ErrorCode.unknown_topic_or_partition,
                    f"Unable to find a topic named {t.name}.",
                )
            elif topics.partition(t.name, p.partition_index) is None:
                code, message = (
                    ErrorCode.unknown_topic_or_partition,
                    f"Unable to find partition {t.name}:{p.partition_index}.",
                )
            elif p.replicas is None:
                code = ErrorCode.no_reassignment_in_progress
                message = "No partition reassignment is in progress."
            elif (refused := _check(node, p.replicas)) is not None:
                code, message = ErrorCode.invalid_replica_assignment, refused
            parts.append(
                ReassignablePartitionResponse(
                    partition_index=p.partition_index, error_code=code, error_message=message
                )
            )
        responses.append(ReassignableTopicResponse(name=t.name, partitions=tuple(parts)))
    return AlterPartitionReassignmentsResponse(
        throttle_time=NO_THROTTLE,
        allow_replication_factor_change=req.allow_replication_factor_change,
        error_code=ErrorCode.none,
        error_message=None,
        responses=tuple(responses),
    )


def _list_error_reply(
    req: ListPartitionReassignmentsRequest, code: ErrorCode
) -> ListPartitionReassignmentsResponse:
    """``code`` at the top level, and every partition named echoed with empty replica lists
    (Kafka's ``ListPartitionReassignmentsRequest.getErrorResponse``)."""
    return ListPartitionReassignmentsResponse(
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=None,
        topics=tuple(
            OngoingTopicReassignment(
                name=t.name,
                partitions=tuple(
                    OngoingPartitionReassignment(
                        partition_index=i, replicas=(), adding_replicas=(), removing_replicas=()
                    )
                    for i in t.partition_indexes
                ),
            )
            for t in req.topics or ()
        ),
    )


@handler(
    api_key=46,
    versions=(0, 0),
    request=ListPartitionReassignmentsRequest,
    response=ListPartitionReassignmentsResponse,
    error_reply=_list_error_reply,
)
async def list_partition_reassignments(
    ctx: RequestContext, req: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    require_cluster(ctx, AclOperation.DESCRIBE)
    return ListPartitionReassignmentsResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None, topics=()
    )
