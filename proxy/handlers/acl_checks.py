"""The checks CreateAcls, DeleteAcls and DescribeAcls share, in Kafka's order: a request with an
UNKNOWN code closes the connection (Kafka cannot parse it), then the CLUSTER permission, then
whether an authorizer is configured. Not an API of its own (no row in ``MODULES``).
"""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from proxy.acl import admin
from proxy.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.outcomes import CloseConnection


def check_parseable(api: str, items: Iterable[tuple[int, ...]]) -> None:
    """Close the connection if any item carries an UNKNOWN code (``admin.unparseable``)."""
    if any(admin.unparseable(*codes) for codes in items):
        raise CloseConnection(f"{api} with an UNKNOWN code (Kafka cannot parse it)")


def refusal(
    ctx: RequestContext, operation: AclOperation, no_authorizer: str
) -> tuple[ErrorCode, str | None] | None:
    """The error (code, message) refusing the whole request, or None to go on."""
    if not ctx.authorized(operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return ErrorCode.cluster_authorization_failed, None
    if ctx.broker.authorizer is None:
        return ErrorCode.security_disabled, no_authorizer
    return None
