"""DeleteGroups (key 42), v0-2. v1: nothing new. v2: flexible.

Per group: missing -> GROUP_ID_NOT_FOUND; members present -> NON_EMPTY_GROUP; otherwise
tombstones for every committed offset and for the group are appended to __consumer_offsets,
then the group is forgotten.

A group the principal may not DELETE is answered GROUP_AUTHORIZATION_FAILED, once, after the
others (Kafka's ``handleDeleteGroupsRequest``).
"""

from __future__ import annotations

from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.delete_groups.v2.response import DeletableGroupResult, DeleteGroupsResponse
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId

from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import NO_THROTTLE


def _error_reply(req: DeleteGroupsRequest, code: ErrorCode) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(DeletableGroupResult(group_id=g, error_code=code) for g in req.groups_names),
    )


@handler(
    api_key=42,
    versions=(0, 2),
    request=DeleteGroupsRequest,
    response=DeleteGroupsResponse,
    error_reply=_error_reply,
)
async def delete_groups(ctx: RequestContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
    results = []
    refused: dict[GroupId, None] = {}  # answered last, once each (Kafka's handleDeleteGroups)
    for group_id in req.groups_names:
        if not ctx.authorized(AclOperation.DELETE, ResourceType.GROUP, group_id):
            refused[group_id] = None
            continue
        code = await ctx.broker.groups.delete_group(group_id)
        results.append(DeletableGroupResult(group_id=group_id, error_code=code))
    results += [
        DeletableGroupResult(group_id=g, error_code=ErrorCode.group_authorization_failed)
        for g in refused
    ]
    return DeleteGroupsResponse(throttle_time=NO_THROTTLE, results=tuple(results))
