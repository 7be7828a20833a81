"""FindCoordinator (key 10), v0-4. v1: key_type (0 GROUP, 1 TRANSACTION), throttle time, error
message. v3: flexible. v4: batched ``coordinator_keys`` answered in ``coordinators`` (KIP-699).
v5 (TRANSACTION_ABORTABLE) and v6 (share groups) are not advertised.

kafkad is a single broker, so this broker coordinates every group (key type GROUP) and every
transactional id (key type TRANSACTION; the id's ``__transaction_state`` partition is internal
to the coordinator, which creates the topic on its first write). Other key types (SHARE, v6):
INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from proxy.context import RequestContext
from proxy.registry import handler

GROUP, TRANSACTION = 0, 1


def _answer(ctx: RequestContext, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
    broker = ctx.broker
    if key_type in (GROUP, TRANSACTION):
        host, port = ctx.advertised
        return ErrorCode.none, None, broker.node_id, host, port
    return ErrorCode.invalid_request, f"Unsupported key type {key_type}", -1, "", -1


@handler(api_key=10, versions=(0, 4))
async def find_coordinator(ctx: RequestContext, req: Any) -> Any:
    b = ctx.b
    key_type = getattr(req, "key_type", GROUP)
    if ctx.version >= 4:
        coordinators = []
        for key in req.coordinator_keys:
            code, msg, node, host, port = _answer(ctx, key_type)
            coordinators.append(
                b.Coordinator(
                    key=key,
                    node_id=node,
                    host=host,
                    port=port,
                    error_code=code,
                    error_message=msg,
                )
            )
        return b.FindCoordinatorResponse(throttle_time=0, coordinators=tuple(coordinators))
    code, msg, node, host, port = _answer(ctx, key_type)
    return b.FindCoordinatorResponse(
        throttle_time=0, error_code=code, error_message=msg, node_id=node, host=host, port=port
    )
