"""ListGroups (key 16), v0-5. v1: throttle time. v3: flexible. v4: states filter and each
group's state (KIP-518). v5: types filter and each group's type (KIP-848): "classic", or
"consumer" for a consumer-protocol group (protocol type "consumer", its states Empty,
Assigning, Reconciling, Stable).

Filters compare case-insensitively, as Kafka does; an empty filter matches everything.

Authorization (Kafka's ``handleListGroupsRequest``): with DESCRIBE on the cluster every group
is listed, otherwise only the groups the principal may DESCRIBE.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.list_groups.v5.response import ListedGroup, ListGroupsResponse
from kio.schema.types import GroupId

from proxy.acl.checks import cluster_allows
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import NO_THROTTLE


@handler(api_key=16, versions=(0, 5), request=ListGroupsRequest, response=ListGroupsResponse)
async def list_groups(ctx: RequestContext, req: ListGroupsRequest) -> ListGroupsResponse:
    everything = cluster_allows(ctx, AclOperation.DESCRIBE)  # else the groups it may DESCRIBE
    listed = ctx.broker.groups.list_groups()
    if isinstance(listed, ErrorCode):
        return ListGroupsResponse(throttle_time=NO_THROTTLE, error_code=listed, groups=())
    if not everything:
        listed = [
            g
            for g in listed
            if ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)
        ]
    states = {s.lower() for s in req.states_filter}
    types = {t.lower() for t in req.types_filter}
    return ListGroupsResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        groups=tuple(
            ListedGroup(
                group_id=GroupId(g.group_id),
                protocol_type=g.protocol_type,
                group_state=g.state.value,
                group_type=g.group_type,
            )
            for g in sorted(listed, key=lambda g: g.group_id)
            if (not states or g.state.value.lower() in states)
            and (not types or g.group_type in types)
        ),
    )
