"""SyncGroup (key 14), v0-5. v1: throttle time. v2: nothing new. v3: group instance id
(FENCED_INSTANCE_ID). v4: flexible. v5: protocol type and name in request and response
(INCONSISTENT_GROUP_PROTOCOL when they do not match the group's).

Followers' requests are parked until the leader's assignment has been persisted.
"""

from __future__ import annotations

from typing import Any

from proxy.context import RequestContext
from proxy.registry import handler


@handler(api_key=14, versions=(0, 5))
async def sync_group(ctx: RequestContext, req: Any) -> Any:
    result = await ctx.broker.groups.sync(
        req.group_id,
        req.member_id,
        getattr(req, "group_instance_id", None),
        req.generation_id,
        getattr(req, "protocol_type", None),
        getattr(req, "protocol_name", None),
        {a.member_id: a.assignment for a in req.assignments},
    )
    return ctx.b.SyncGroupResponse(
        throttle_time=0,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
