"""AddRaftVoter (key 80), v0-1, and RemoveRaftVoter (key 81), v0 (KIP-853: dynamic KRaft
quorums). v1 of AddRaftVoter: ``ack_when_committed``.

Kafka's broker forwards both to the controller (``ControllerApis.handleAddRaftVoter`` /
``handleRemoveRaftVoter``): ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED with
Kafka's message; then its raft client, in this order (``KafkaRaftClient.handleAddVoterRequest``
/ ``handleRemoveVoterRequest``): a cluster id that is given and is not this cluster's ->
INCONSISTENT_CLUSTER_ID; a negative voter id or a zero directory id -> INVALID_REQUEST "Add
(Remove) voter request didn't include a valid voter"; (add) no endpoint for the default
listener -> INVALID_REQUEST; then the voter-change handler, which refuses any change while the
quorum's ``kraft.version`` is 0 (a static quorum): UNSUPPORTED_VERSION "Cluster doesn't support
adding (removing) voter because the kraft.version feature is 0".

kafkad's quorum is static, this one node (DescribeQuorum), and its finalized features do not
include ``kraft.version``: so every well-formed change is that UNSUPPORTED_VERSION, as a Kafka
node formatted with a static quorum answers. Deviation: kafkad has no controller listener;
the default listener is its first client listener (names compared in upper case, as Kafka's
``ListenerName.normalised``).
"""

from __future__ import annotations

import uuid

from kio.schema.add_raft_voter.v1.request import AddRaftVoterRequest
from kio.schema.add_raft_voter.v1.response import AddRaftVoterResponse
from kio.schema.errors import ErrorCode
from kio.schema.remove_raft_voter.v0.request import RemoveRaftVoterRequest
from kio.schema.remove_raft_voter.v0.response import RemoveRaftVoterResponse

from proxy.acl.checks import MESSAGES, require_cluster
from proxy.acl.model import AclOperation
from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import NO_THROTTLE

KRAFT_VERSION = 0  # a static quorum: no voter changes


def _add(code: ErrorCode, message: str | None) -> AddRaftVoterResponse:
    return AddRaftVoterResponse(throttle_time=NO_THROTTLE, error_code=code, error_message=message)


def _remove(code: ErrorCode, message: str | None) -> RemoveRaftVoterResponse:
    return RemoveRaftVoterResponse(
        throttle_time=NO_THROTTLE, error_code=code, error_message=message
    )


def _add_error(req: AddRaftVoterRequest, code: ErrorCode) -> AddRaftVoterResponse:
    return _add(code, MESSAGES.get(code))


def _remove_error(req: RemoveRaftVoterRequest, code: ErrorCode) -> RemoveRaftVoterResponse:
    return _remove(code, MESSAGES.get(code))


def _cluster_mismatch(ctx: RequestContext, given: str | None) -> str | None:
    """Kafka's message for a given cluster id that is not this cluster's, else None."""
    ours = ctx.broker.cluster_id
    if given is None or given == ours:
        return None
    return f'The given id "{given}" doesn\'t match the cluster id "{ours}"'


def _valid_voter(voter_id: int, directory_id: uuid.UUID | None) -> bool:
    """Kafka's ``RaftUtil.addVoterRequestVoterKey`` and a directory id (kio reads the zero
    UUID as None)."""
    return voter_id >= 0 and directory_id not in (None, uuid.UUID(int=0))


def _unsupported(change: str) -> str:
    return (
        f"Cluster doesn't support {change} voter because the kraft.version feature is "
        f"{KRAFT_VERSION}"
    )


@handler(
    api_key=80,
    versions=(0, 1),
    request=AddRaftVoterRequest,
    response=AddRaftVoterResponse,
    error_reply=_add_error,
)
async def add_raft_voter(ctx: RequestContext, req: AddRaftVoterRequest) -> AddRaftVoterResponse:
    require_cluster(ctx, AclOperation.ALTER)
    if (mismatch := _cluster_mismatch(ctx, req.cluster_id)) is not None:
        return _add(ErrorCode.inconsistent_cluster_id, mismatch)
    if not _valid_voter(req.voter_id, req.voter_directory_id):
        return _add(ErrorCode.invalid_request, "Add voter request didn't include a valid voter")
    default = ctx.broker.first_listener.upper()
    # Kafka's Endpoints.fromAddVoterRequest: names normalised to upper case, the last of a name
    # kept (a HashMap: Kafka's message lists several in hash order, kafkad in the request's)
    endpoints = {lst.name.upper(): (lst.host, int(lst.port)) for lst in req.listeners}
    if default not in endpoints:
        shown = ", ".join(
            f"ListenerName({name})={host}/<unresolved>:{port}"
            for name, (host, port) in endpoints.items()
        )
        message = (
            f"Add voter request didn't include the endpoint (Endpoints(endpoints={{{shown}}})) "
            f"for the default listener ListenerName({default})"
        )
        return _add(ErrorCode.invalid_request, message)
    return _add(ErrorCode.unsupported_version, _unsupported("adding"))


@handler(
    api_key=81,
    versions=(0, 0),
    request=RemoveRaftVoterRequest,
    response=RemoveRaftVoterResponse,
    error_reply=_remove_error,
)
async def remove_raft_voter(
    ctx: RequestContext, req: RemoveRaftVoterRequest
) -> RemoveRaftVoterResponse:
    require_cluster(ctx, AclOperation.ALTER)
    if (mismatch := _cluster_mismatch(ctx, req.cluster_id)) is not None:
        return _remove(ErrorCode.inconsistent_cluster_id, mismatch)
    if not _valid_voter(req.voter_id, req.voter_directory_id):
        message = "Remove voter request didn't include a valid voter"
        return _remove(ErrorCode.invalid_request, message)
    return _remove(ErrorCode.unsupported_version, _unsupported("removing"))
