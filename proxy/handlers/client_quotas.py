"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), v0-1 (KIP-546; v1 is the
flexible form, same fields): the decisions in ``proxy/quotas/model.py``, the quotas in the
broker's durable store (``proxy/quotas/store.py``).

DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster (Kafka's KafkaApis), else the
whole request fails with CLUSTER_AUTHORIZATION_FAILED; a bad filter is answered as Kafka's
``getErrorResponse`` (the error at the top, entries null). AlterClientQuotas needs
ALTER_CONFIGS on the cluster (Kafka's ControllerApis), else every entry carries
CLUSTER_AUTHORIZATION_FAILED. ``validate_only`` answers the same results and stores nothing.

An ``ip`` entity's name must be an IP address or a host name that resolves (Kafka's
``InetAddress.getByName``); names that are not addresses are resolved here, in a thread (the
event loop never waits on DNS), each at most ``RESOLVE_TIMEOUT_S``.
"""

from __future__ import annotations

import ipaddress
import socket

import trio
from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest
from kio.schema.alter_client_quotas.v1.response import (
    AlterClientQuotasResponse,
)
from kio.schema.alter_client_quotas.v1.response import (
    EntityData as AlterEntity,
)
from kio.schema.alter_client_quotas.v1.response import (
    EntryData as AlterEntry,
)
from kio.schema.describe_client_quotas.v1.request import DescribeClientQuotasRequest
from kio.schema.describe_client_quotas.v1.response import (
    DescribeClientQuotasResponse,
    EntityData,
    EntryData,
    ValueData,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import f64

from proxy.acl.checks import MESSAGES, cluster_allows
from proxy.acl.model import AclOperation
from proxy.context import RequestContext
from proxy.quotas import model
from proxy.registry import handler
from wire.values import NO_THROTTLE

RESOLVE_TIMEOUT_S = 5.0
# The lookups' own threads: one that outlives its timeout keeps its thread until the resolver
# gives up, and must not hold a token of trio's default limiter (the storage's fsyncs use it).
_RESOLVERS = trio.CapacityLimiter(4)


def _describe_error(
    req: DescribeClientQuotasRequest, code: ErrorCode, message: str | None = None
) -> DescribeClientQuotasResponse:
    return DescribeClientQuotasResponse(
        throttle_time=NO_THROTTLE, error_code=code, error_message=message, entries=None
    )


@handler(
    api_key=48,
    versions=(0, 1),
    request=DescribeClientQuotasRequest,
    response=DescribeClientQuotasResponse,
    error_reply=_describe_error,
)
async def describe_client_quotas(
    ctx: RequestContext, req: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    if not cluster_allows(ctx, AclOperation.DESCRIBE_CONFIGS):
        code = ErrorCode.cluster_authorization_failed
        return _describe_error(req, code, MESSAGES[code])
    components = [
        model.Component(c.entity_type, int(c.match_type), c.match) for c in req.components
    ]
    try:
        found = model.describe(ctx.broker.quotas.quotas, components, req.strict)
    except model.QuotaError as exc:
        return _describe_error(req, exc.code, exc.message)
    return DescribeClientQuotasResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        entries=tuple(
            EntryData(
                entity=tuple(EntityData(entity_type=t, entity_name=n) for t, n in entity),
                values=tuple(ValueData(key=k, value=f64(v)) for k, v in values),
            )
            for entity, values in found
        ),
    )


def _alter_error(
    req: AlterClientQuotasRequest, code: ErrorCode, message: str | None = None
) -> AlterClientQuotasResponse:
    """Kafka's ``getErrorResponse``: every entry, as the request lists it, with the error."""
    return AlterClientQuotasResponse(
        throttle_time=NO_THROTTLE,
        entries=tuple(
            AlterEntry(
                error_code=code,
                error_message=message,
                entity=tuple(
                    AlterEntity(entity_type=e.entity_type, entity_name=e.entity_name)
                    for e in entry.entity
                ),
            )
            for entry in req.entries
        ),
    )


async def _resolves(name: str) -> bool:
    try:
        ipaddress.ip_address(name.removeprefix("[").removesuffix("]"))
        return True
    except ValueError:
        pass
    with trio.move_on_after(RESOLVE_TIMEOUT_S):
        try:
            await trio.to_thread.run_sync(
                socket.getaddrinfo, name, None, abandon_on_cancel=True, limiter=_RESOLVERS
            )
            return True
        except (OSError, UnicodeError):
            return False
    return False


async def _unresolvable(alterations: list[model.Alteration]) -> set[str]:
    names = {n for a in alterations for t, n in a.entity if t == model.IP and n}
    return {n for n in names if not await _resolves(n)}


@handler(
    api_key=49,
    versions=(0, 1),
    request=AlterClientQuotasRequest,
    response=AlterClientQuotasResponse,
    error_reply=_alter_error,
)
async def alter_client_quotas(
    ctx: RequestContext, req: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    if not cluster_allows(ctx, AclOperation.ALTER_CONFIGS):
        code = ErrorCode.cluster_authorization_failed
        return _alter_error(req, code, MESSAGES[code])
    alterations = [
        model.Alteration(
            entity=[(e.entity_type, e.entity_name) for e in entry.entity],
            ops=[model.Op(o.key, None if o.remove else float(o.value)) for o in entry.ops],
        )
        for entry in req.entries
    ]
    unresolvable = await _unresolvable(alterations)
    store = ctx.broker.quotas
    async with store.lock:
        after, results = model.alter(store.quotas, alterations, unresolvable)
        if not req.validate_only and after != store.quotas:
            await store.replace(after)  # durable before the answer
    return AlterClientQuotasResponse(
        throttle_time=NO_THROTTLE,
        entries=tuple(
            AlterEntry(
                error_code=r.code,
                error_message=r.message,
                entity=tuple(AlterEntity(entity_type=t, entity_name=n) for t, n in r.entity),
            )
            for r in results
        ),
    )
