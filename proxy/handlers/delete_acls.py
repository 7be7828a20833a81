"""DeleteAcls (key 31), v1-3: v1 adds resource pattern types (ANY/MATCH filters); v2 is
flexible; v3 adds nothing for the broker. v0 is gone since Kafka 4.0 (KIP-896).

Needs CLUSTER ALTER (CLUSTER_AUTHORIZATION_FAILED for every filter otherwise); with no
authorizer configured every filter gets SECURITY_DISABLED, as in Kafka. Each filter's result
lists the bindings it deleted; the removal is durable before the answer.
"""

from __future__ import annotations

from kio.schema.delete_acls.v3.request import DeleteAclsRequest
from kio.schema.delete_acls.v3.response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsResponse,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from proxy.acl import admin
from proxy.acl.model import AclBinding, AclOperation
from proxy.context import RequestContext
from proxy.handlers.acl_checks import check_parseable, refusal
from proxy.handlers.describe_acls import acl_filter
from proxy.registry import handler
from wire.values import NO_THROTTLE


def _matching(b: AclBinding) -> DeleteAclsMatchingAcl:
    return DeleteAclsMatchingAcl(
        error_code=ErrorCode.none,
        error_message=None,
        resource_type=i8(b.pattern.resource_type),
        resource_name=b.pattern.name,
        pattern_type=i8(b.pattern.pattern_type),
        principal=b.entry.principal,
        host=b.entry.host,
        operation=i8(b.entry.operation),
        permission_type=i8(b.entry.permission),
    )


def _reply(n: int, code: ErrorCode, message: str | None) -> DeleteAclsResponse:
    result = DeleteAclsFilterResult(error_code=code, error_message=message, matching_acls=())
    return DeleteAclsResponse(throttle_time=NO_THROTTLE, filter_results=(result,) * n)


def _error_reply(req: DeleteAclsRequest, code: ErrorCode) -> DeleteAclsResponse:
    return _reply(len(req.filters), code, None)


@handler(
    api_key=31,
    versions=(1, 3),
    request=DeleteAclsRequest,
    response=DeleteAclsResponse,
    error_reply=_error_reply,
)
async def delete_acls(ctx: RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse:
    check_parseable(
        "DeleteAcls",
        (
            (f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type)
            for f in req.filters
        ),
    )
    refused = refusal(ctx, AclOperation.ALTER, "No Authorizer is configured.")
    if refused is not None:
        return _reply(len(req.filters), *refused)
    filters = [acl_filter(f) for f in req.filters]
    outcomes = await ctx.broker.acls.change(lambda existing: admin.delete(existing, filters))
    return DeleteAclsResponse(
        throttle_time=NO_THROTTLE,
        filter_results=tuple(
            DeleteAclsFilterResult(
                error_code=o.code,
                error_message=o.message,
                matching_acls=tuple(_matching(b) for b in o.matched),
            )
            for o in outcomes
        ),
    )
