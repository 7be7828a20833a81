"""DescribeGroups (key 15), v0-6. v1: throttle time. v3: authorized operations (when asked for:
the group operations the principal may do, for groups answered without error). v4: group
instance id per member. v5: flexible. v6 (KIP-1043): an error message per group, and a missing
group is an error.

A missing group is described as Dead with no members and no error below v6; from v6 it is
GROUP_ID_NOT_FOUND with "Group G not found.", still in state Dead (Kafka's
``GroupMetadataManager.describeGroups``, which describes classic groups only). A group the
coordinator cannot describe (loading, shutting down) carries the error with an empty state and
protocol type (Kafka's ``DescribeGroupsResponse.groupError``, UNKNOWN_STATE).
A group the principal may not DESCRIBE is answered GROUP_AUTHORIZATION_FAILED (with the
empty state of ``groupError``), before the others (Kafka's ``handleDescribeGroupsRequest``).
Only a Stable group shows its protocol and each member's metadata and assignment; in other
states members are listed without them (Kafka's ClassicGroup.describe).
"""

from __future__ import annotations

from dataclasses import replace

from kio.schema.describe_groups.v6.request import DescribeGroupsRequest
from kio.schema.describe_groups.v6.response import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId

from coordinator.group.state import GroupState
from proxy.acl.checks import authorized_operations
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import AUTHORIZED_OPERATIONS_OMITTED, NO_THROTTLE


def _dead(
    group_id: GroupId, code: ErrorCode, message: str | None = None, state: str = ""
) -> DescribedGroup:
    """A group described by its error alone: a missing one is in state Dead (no error below
    v6), one the coordinator cannot describe in the unknown state ""."""
    return DescribedGroup(
        error_code=code,
        group_id=group_id,
        group_state=state,
        protocol_type="",
        protocol_data="",
        members=(),
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        error_message=message,
    )


def _missing(group_id: GroupId, version: int, consumer: bool = False) -> DescribedGroup:
    """Also a consumer-protocol group (KIP-848): Kafka describes classic groups only."""
    dead = GroupState.DEAD.value
    if version < 6:
        return _dead(group_id, ErrorCode.none, state=dead)
    if consumer:
        message = f"Group {group_id} is not a classic group."
        return _dead(group_id, ErrorCode.group_id_not_found, message, dead)
    return _dead(group_id, ErrorCode.group_id_not_found, f"Group {group_id} not found.", dead)


def _error_reply(req: DescribeGroupsRequest, code: ErrorCode) -> DescribeGroupsResponse:
    """Every group with ``code`` and an empty state (Kafka's ``groupError``: UNKNOWN_STATE is
    "", not Dead)."""
    return DescribeGroupsResponse(
        throttle_time=NO_THROTTLE,
        groups=tuple(_dead(g, code) for g in req.groups),
    )


@handler(
    api_key=15,
    versions=(0, 6),
    request=DescribeGroupsRequest,
    response=DescribeGroupsResponse,
    error_reply=_error_reply,
)
async def describe_groups(
    ctx: RequestContext, req: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    wants_operations = ctx.version >= 3 and req.include_authorized_operations
    allowed: list[GroupId] = []
    out = []  # the groups the principal may not DESCRIBE come first, as in Kafka
    for group_id in req.groups:
        if ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            allowed.append(group_id)
        else:
            out.append(_dead(group_id, ErrorCode.group_authorization_failed))
    for group_id in allowed:
        g = ctx.broker.groups.describe(group_id)
        if isinstance(g, ErrorCode):  # the coordinator's error: Kafka's groupError
            out.append(_dead(group_id, g))
            continue
        if g is None or g.state is GroupState.DEAD:
            consumer = ctx.broker.groups.is_consumer_group(group_id)
            missing = _missing(group_id, ctx.version, consumer)
            if missing.error_code is ErrorCode.none and wants_operations:
                missing = replace(
                    missing,
                    authorized_operations=authorized_operations(ctx, ResourceType.GROUP, group_id),
                )
            out.append(missing)
            continue
        stable = g.state is GroupState.STABLE
        out.append(
            DescribedGroup(
                error_code=ErrorCode.none,
                group_id=group_id,
                group_state=g.state.value,
                protocol_type=g.protocol_type or "",
                protocol_data=(g.protocol_name or "") if stable else "",
                members=tuple(
                    DescribedGroupMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata(g.protocol_name) if stable else b"",
                        member_assignment=m.assignment if stable else b"",
                    )
                    for m in g.members.values()
                ),
                authorized_operations=(
                    authorized_operations(ctx, ResourceType.GROUP, group_id)
                    if wants_operations
                    else AUTHORIZED_OPERATIONS_OMITTED
                ),
            )
        )
    return DescribeGroupsResponse(throttle_time=NO_THROTTLE, groups=tuple(out))
