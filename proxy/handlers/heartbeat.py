"""Heartbeat (key 12), v0-4. v1: throttle time. v2: nothing new. v3: group instance id
(FENCED_INSTANCE_ID). v4: flexible.

REBALANCE_IN_PROGRESS tells a member to rejoin; UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION that it
was removed or is a generation behind.
"""

from __future__ import annotations

from typing import Any

from proxy.context import RequestContext
from proxy.registry import handler


@handler(api_key=12, versions=(0, 4))
async def heartbeat(ctx: RequestContext, req: Any) -> Any:
    code = await ctx.broker.groups.heartbeat(
        req.group_id, req.member_id, getattr(req, "group_instance_id", None), req.generation_id
    )
    return ctx.b.HeartbeatResponse(throttle_time=0, error_code=code)
