"""LeaveGroup (key 13), v0-5. v1: throttle time. v2: nothing new. v3: a batch of members, each
with member id and group instance id, answered one by one (KIP-345: an admin removes static
members by instance id). v4: flexible. v5: reason per member (logged only).

A leave triggers a rebalance at once (or completes a join phase that only waited for the
leaving member).
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from proxy.context import RequestContext
from proxy.registry import handler

log = logging.getLogger("kafkad.group")


@handler(api_key=13, versions=(0, 5))
async def leave_group(ctx: RequestContext, req: Any) -> Any:
    b = ctx.b
    if ctx.version < 3:
        identities: list[tuple[str, str | None]] = [(req.member_id, None)]
    else:
        identities = [(m.member_id, m.group_instance_id) for m in req.members]
        for m in req.members:
            if getattr(m, "reason", None):
                log.info("group %s: member %r leaves: %s", req.group_id, m.member_id, m.reason)
    result = await ctx.broker.groups.leave(req.group_id, identities)
    if isinstance(result, ErrorCode):
        return b.LeaveGroupResponse(throttle_time=0, error_code=result, members=())
    if ctx.version < 3:
        return b.LeaveGroupResponse(throttle_time=0, error_code=result[0])
    return b.LeaveGroupResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        members=tuple(
            b.MemberResponse(member_id=mid, group_instance_id=iid, error_code=code)
            for (mid, iid), code in zip(identities, result, strict=True)
        ),
    )
