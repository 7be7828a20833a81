"""JoinGroup (key 11), v0-9. v1: rebalance timeout (v0 uses the session timeout). v2: throttle
time. v3: nothing new. v4: an empty member id gets MEMBER_ID_REQUIRED and a generated id, and
must rejoin with it (KIP-394). v5: group instance id (static membership, KIP-345;
FENCED_INSTANCE_ID). v6: flexible. v7: protocol type in the response, protocol name nullable.
v8: reason (logged only). v9: skip_assignment for a static leader that rejoined (KIP-814).

The group needs READ, else the request is answered GROUP_AUTHORIZATION_FAILED (its error reply,
as Kafka's ``handleJoinGroupRequest``). The request is parked until the join phase completes
(see coordinator/group/classic.py).
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode
from kio.schema.join_group.v9.request import JoinGroupRequest
from kio.schema.join_group.v9.response import JoinGroupResponse, JoinGroupResponseMember
from kio.static.primitive import i32

from coordinator.group.classic import JoinRequest
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.outcomes import ErrorReply
from proxy.registry import handler
from wire.values import NO_THROTTLE, millis

log = logging.getLogger("kafkad.group")


@handler(api_key=11, versions=(0, 9), request=JoinGroupRequest, response=JoinGroupResponse)
async def join_group(ctx: RequestContext, req: JoinGroupRequest) -> JoinGroupResponse:
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, req.group_id):
        raise ErrorReply(ErrorCode.group_authorization_failed)
    v = ctx.version
    session = millis(req.session_timeout)
    rebalance = millis(req.rebalance_timeout) if v >= 1 else session
    if req.reason:
        log.info("group %s: member %r joins: %s", req.group_id, req.member_id, req.reason)
    result = await ctx.broker.groups.join(
        req.group_id,
        JoinRequest(
            member_id=req.member_id,
            group_instance_id=req.group_instance_id,
            client_id=ctx.header.client_id or "",
            client_host=ctx.client_host,
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            protocol_type=req.protocol_type,
            protocols=tuple((p.name, p.metadata) for p in req.protocols),
            require_known_member_id=v >= 4,
            supports_skip_assignment=v >= 9,
        ),
    )
    # (v0-6 cannot carry a null protocol name: wire.versions sends "" there)
    return JoinGroupResponse(
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        generation_id=i32(result.generation),
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=tuple(
            JoinGroupResponseMember(member_id=mid, group_instance_id=iid, metadata=meta)
            for mid, iid, meta in result.members
        ),
    )
