"""DescribeAcls (key 29), v1-3: v1 adds resource pattern types (ANY/MATCH filters); v2 is
flexible; v3 adds nothing for the broker. v0 is gone since Kafka 4.0 (KIP-896).

Needs CLUSTER DESCRIBE (CLUSTER_AUTHORIZATION_FAILED otherwise); with no authorizer configured
the answer is SECURITY_DISABLED, as in Kafka. Filters match as ``proxy/acl/filters.py`` says.
"""

from __future__ import annotations

from kio.schema.delete_acls.v3.request import DeleteAclsFilter
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_acls.v3.response import (
    AclDescription,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from proxy.acl import admin
from proxy.acl.filters import AccessControlEntryFilter, AclBindingFilter, ResourcePatternFilter
from proxy.acl.model import AclOperation
from proxy.context import RequestContext
from proxy.handlers.acl_checks import check_parseable, refusal
from proxy.registry import handler
from wire.values import NO_THROTTLE


def acl_filter(f: DescribeAclsRequest | DeleteAclsFilter) -> AclBindingFilter:
    """A DescribeAcls request or a DeleteAcls filter (the same fields) as a binding filter."""
    rtype, ptype, op, perm = admin.from_codes(
        f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type
    )
    return AclBindingFilter(
        ResourcePatternFilter(rtype, f.resource_name_filter, ptype),
        AccessControlEntryFilter(f.principal_filter, f.host_filter, op, perm),
    )


def _reply(code: ErrorCode, message: str | None) -> DescribeAclsResponse:
    return DescribeAclsResponse(
        throttle_time=NO_THROTTLE, error_code=code, error_message=message, resources=()
    )


def _error_reply(_req: DescribeAclsRequest, code: ErrorCode) -> DescribeAclsResponse:
    return _reply(code, None)


@handler(
    api_key=29,
    versions=(1, 3),
    request=DescribeAclsRequest,
    response=DescribeAclsResponse,
    error_reply=_error_reply,
)
async def describe_acls(ctx: RequestContext, req: DescribeAclsRequest) -> DescribeAclsResponse:
    check_parseable(
        "DescribeAcls",
        [(req.resource_type_filter, req.pattern_type_filter, req.operation, req.permission_type)],
    )
    refused = refusal(ctx, AclOperation.DESCRIBE, "No Authorizer is configured on the broker")
    if refused is not None:
        return _reply(*refused)
    groups = admin.describe(ctx.broker.acls.bindings, acl_filter(req))
    return DescribeAclsResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        resources=tuple(
            DescribeAclsResource(
                resource_type=i8(pattern.resource_type),
                resource_name=pattern.name,
                pattern_type=i8(pattern.pattern_type),
                acls=tuple(
                    AclDescription(
                        principal=e.principal,
                        host=e.host,
                        operation=i8(e.operation),
                        permission_type=i8(e.permission),
                    )
                    for e in entries
                ),
            )
            for pattern, entries in groups
        ),
    )
