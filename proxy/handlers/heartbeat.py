"""Heartbeat (key 12), v0-4. v1: throttle time. v2: nothing new. v3: group instance id
(FENCED_INSTANCE_ID). v4: flexible.

The group needs READ, else GROUP_AUTHORIZATION_FAILED. REBALANCE_IN_PROGRESS tells a member to
rejoin; UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION that it was removed or is a generation behind.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.heartbeat.v4.response import HeartbeatResponse

from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.outcomes import ErrorReply
from proxy.registry import handler
from wire.values import NO_THROTTLE


@handler(api_key=12, versions=(0, 4), request=HeartbeatRequest, response=HeartbeatResponse)
async def heartbeat(ctx: RequestContext, req: HeartbeatRequest) -> HeartbeatResponse:
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, req.group_id):
        raise ErrorReply(ErrorCode.group_authorization_failed)
    code = await ctx.broker.groups.heartbeat(
        req.group_id, req.member_id, req.group_instance_id, req.generation_id
    )
    return HeartbeatResponse(throttle_time=NO_THROTTLE, error_code=code)
