"""SyncGroup (key 14), v0-5. v1: throttle time. v2: nothing new. v3: group instance id
(FENCED_INSTANCE_ID). v4: flexible. v5: protocol type and name in request and response
(INCONSISTENT_GROUP_PROTOCOL when they do not match the group's, or when either is null: v5
makes them mandatory, and that is checked before authorization).

The group needs READ, else GROUP_AUTHORIZATION_FAILED. Followers' requests are parked until the
leader's assignment has been persisted.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.sync_group.v5.request import SyncGroupRequest
from kio.schema.sync_group.v5.response import SyncGroupResponse

from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.outcomes import ErrorReply
from proxy.registry import handler
from wire.values import NO_THROTTLE


@handler(api_key=14, versions=(0, 5), request=SyncGroupRequest, response=SyncGroupResponse)
async def sync_group(ctx: RequestContext, req: SyncGroupRequest) -> SyncGroupResponse:
    if ctx.version >= 5 and (req.protocol_type is None or req.protocol_name is None):
        # v5 makes both mandatory: refused before authorization (Kafka's handleSyncGroupRequest)
        raise ErrorReply(ErrorCode.inconsistent_group_protocol)
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, req.group_id):
        raise ErrorReply(ErrorCode.group_authorization_failed)
    result = await ctx.broker.groups.sync(
        req.group_id,
        req.member_id,
        req.group_instance_id,
        req.generation_id,
        req.protocol_type,
        req.protocol_name,
        {a.member_id: a.assignment for a in req.assignments},
    )
    return SyncGroupResponse(
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
