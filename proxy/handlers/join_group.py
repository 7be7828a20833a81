"""JoinGroup (key 11), v0-9. v1: rebalance timeout (v0 uses the session timeout). v2: throttle
time. v3: nothing new. v4: an empty member id gets MEMBER_ID_REQUIRED and a generated id, and
must rejoin with it (KIP-394). v5: group instance id (static membership, KIP-345;
FENCED_INSTANCE_ID). v6: flexible. v7: protocol type in the response, protocol name nullable.
v8: reason (logged only). v9: skip_assignment for a static leader that rejoined (KIP-814).

The request is parked until the join phase completes (see coordinator/group/classic.py).
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from coordinator.group.classic import JoinRequest
from proxy.context import RequestContext
from proxy.registry import handler

log = logging.getLogger("kafkad.group")


def ms(value: datetime.timedelta) -> int:
    return value // datetime.timedelta(milliseconds=1)


@handler(api_key=11, versions=(0, 9))
async def join_group(ctx: RequestContext, req: Any) -> Any:
    b, v = ctx.b, ctx.version
    session = ms(req.session_timeout)
    rebalance = ms(req.rebalance_timeout) if v >= 1 else session
    if getattr(req, "reason", None):
        log.info("group %s: member %r joins: %s", req.group_id, req.member_id, req.reason)
    result = await ctx.broker.groups.join(
        req.group_id,
        JoinRequest(
            member_id=req.member_id,
            group_instance_id=getattr(req, "group_instance_id", None),
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
    protocol_name = result.protocol_name
    if v < 7 and protocol_name is None:
        protocol_name = ""
    return b.JoinGroupResponse(
        throttle_time=0,
        error_code=result.error,
        generation_id=result.generation,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=tuple(
            b.JoinGroupResponseMember(member_id=mid, group_instance_id=iid, metadata=meta)
            for mid, iid, meta in result.members
        ),
    )
