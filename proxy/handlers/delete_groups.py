"""DeleteGroups (key 42), v0-2. v1: nothing new. v2: flexible.

Per group: missing -> GROUP_ID_NOT_FOUND; members present -> NON_EMPTY_GROUP; otherwise
tombstones for every committed offset and for the group are appended to __consumer_offsets,
then the group is forgotten.
"""

from __future__ import annotations

from typing import Any

from proxy.context import RequestContext
from proxy.registry import handler


@handler(api_key=42, versions=(0, 2))
async def delete_groups(ctx: RequestContext, req: Any) -> Any:
    b = ctx.b
    results = []
    for group_id in req.groups_names:
        code = await ctx.broker.groups.delete_group(group_id)
        results.append(b.DeletableGroupResult(group_id=group_id, error_code=code))
    return b.DeleteGroupsResponse(throttle_time=0, results=tuple(results))
