"""CreateAcls (key 30), v1-3: v1 adds resource pattern types (PREFIXED); v2 is flexible; v3 adds
nothing for the broker (USER resources). v0 is gone since Kafka 4.0 (KIP-896).

Needs CLUSTER ALTER (CLUSTER_AUTHORIZATION_FAILED for every creation otherwise); with no
authorizer configured every creation gets SECURITY_DISABLED, as in Kafka. The decisions are in
``proxy/acl/admin.py``; the new bindings are durable before the answer.
"""

from __future__ import annotations

from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.create_acls.v3.response import AclCreationResult, CreateAclsResponse
from kio.schema.errors import ErrorCode

from proxy.acl import admin
from proxy.acl.model import AccessControlEntry, AclBinding, AclOperation, ResourcePattern
from proxy.context import RequestContext
from proxy.handlers.acl_checks import check_parseable, refusal
from proxy.registry import handler
from wire.values import NO_THROTTLE


def binding(c: AclCreation) -> AclBinding:
    rtype, ptype, op, perm = admin.from_codes(
        c.resource_type, c.resource_pattern_type, c.operation, c.permission_type
    )
    return AclBinding(
        ResourcePattern(rtype, c.resource_name, ptype),
        AccessControlEntry(c.principal, c.host, op, perm),
    )


def _reply(n: int, code: ErrorCode, message: str | None) -> CreateAclsResponse:
    result = AclCreationResult(error_code=code, error_message=message)
    return CreateAclsResponse(throttle_time=NO_THROTTLE, results=(result,) * n)


def _error_reply(req: CreateAclsRequest, code: ErrorCode) -> CreateAclsResponse:
    return _reply(len(req.creations), code, None)


@handler(
    api_key=30,
    versions=(1, 3),
    request=CreateAclsRequest,
    response=CreateAclsResponse,
    error_reply=_error_reply,
)
async def create_acls(ctx: RequestContext, req: CreateAclsRequest) -> CreateAclsResponse:
    check_parseable(
        "CreateAcls",
        (
            (c.resource_type, c.resource_pattern_type, c.operation, c.permission_type)
            for c in req.creations
        ),
    )
    refused = refusal(ctx, AclOperation.ALTER, "No Authorizer is configured.")
    if refused is not None:
        return _reply(len(req.creations), *refused)
    creations = [binding(c) for c in req.creations]
    outcomes = await ctx.broker.acls.change(lambda existing: admin.create(existing, creations))
    return CreateAclsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(
            AclCreationResult(error_code=o.code, error_message=o.message) for o in outcomes
        ),
    )
