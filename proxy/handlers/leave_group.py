"""LeaveGroup (key 13), v0-5. v1: throttle time. v2: nothing new. v3: a batch of members, each
with member id and group instance id, answered one by one (KIP-345: an admin removes static
members by instance id). v4: flexible. v5: reason per member (logged only).

The group needs READ, else GROUP_AUTHORIZATION_FAILED. A leave triggers a rebalance at once (or
completes a join phase that only waited for the leaving member).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.leave_group.v5.request import LeaveGroupRequest, MemberIdentity
from kio.schema.leave_group.v5.response import LeaveGroupResponse, MemberResponse

from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.outcomes import ErrorReply
from proxy.registry import handler
from wire.values import NO_THROTTLE

log = logging.getLogger("kafkad.group")


def _one_member(old: Any, version: int) -> Mapping[str, Any]:
    """v0-2 name one leaving member (``member_id``), v3+ a list (Kafka's ``members()``)."""
    return {"members": (MemberIdentity(member_id=old.member_id),)} if version < 3 else {}


def _one_code(resp: LeaveGroupResponse, _old: Any, version: int) -> Mapping[str, Any]:
    """v0-2 answer one code: the group's error, else the member's (Kafka's ``getError``)."""
    if version < 3 and resp.error_code is ErrorCode.none and resp.members:
        return {"error_code": resp.members[0].error_code}
    return {}


@handler(
    api_key=13,
    versions=(0, 5),
    request=LeaveGroupRequest,
    response=LeaveGroupResponse,
    upgrade=_one_member,
    downgrade=_one_code,
)
async def leave_group(ctx: RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse:
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, req.group_id):
        raise ErrorReply(ErrorCode.group_authorization_failed)
    identities = [(m.member_id, m.group_instance_id) for m in req.members]
    for m in req.members:
        if m.reason:
            log.info("group %s: member %r leaves: %s", req.group_id, m.member_id, m.reason)
    result = await ctx.broker.groups.leave(req.group_id, identities)
    if isinstance(result, ErrorCode):
        return LeaveGroupResponse(throttle_time=NO_THROTTLE, error_code=result, members=())
    return LeaveGroupResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        members=tuple(
            MemberResponse(member_id=mid, group_instance_id=iid, error_code=code)
            for (mid, iid), code in zip(identities, result, strict=True)
        ),
    )
