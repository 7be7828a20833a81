"""FindCoordinator (key 10), v0-6. v1: key_type (0 GROUP, 1 TRANSACTION), throttle time, error
message. v3: flexible. v4: batched ``coordinator_keys`` answered in ``coordinators`` (KIP-699).
v5: may answer TRANSACTION_ABORTABLE (never here). v6: key type SHARE (2); kafkad has no
share groups, so SHARE is INVALID_REQUEST at every version, as Kafka answers without a share
coordinator.

kafkad is a single broker, so this broker coordinates every group (key type GROUP) and every
transactional id (key type TRANSACTION; the id's ``__transaction_state`` partition is internal
to the coordinator, which creates the topic on its first write). Other key types (SHARE, v6):
INVALID_REQUEST.

A group key needs DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED), a transaction key
DESCRIBE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); below v4 the
refusal carries Kafka's message for the error. A SHARE key (v6, only brokers ask) needs
CLUSTER_ACTION first, else the whole request is answered CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v6.response import Coordinator, FindCoordinatorResponse
from kio.schema.types import BrokerId
from kio.static.primitive import i32

from proxy.acl.checks import MESSAGES, require_cluster
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import NO_THROTTLE

GROUP, TRANSACTION, SHARE = 0, 1, 2
SHARE_VERSION = 6  # the first version that may ask for a share coordinator


def _one_key(old: Any, version: int) -> Mapping[str, Any]:
    """v0-3 ask for one key (``key``), v4 for a list (``coordinator_keys``)."""
    return {"coordinator_keys": (old.key,)} if version < 4 else {}


def _top_level(resp: FindCoordinatorResponse, _old: Any, version: int) -> Mapping[str, Any]:
    """v0-3 answer their one key at the top level (Kafka's ``FindCoordinatorResponse``)."""
    if version >= 4:
        return {}
    (c,) = resp.coordinators
    return {
        "error_code": c.error_code,
        "error_message": c.error_message,
        "node_id": c.node_id,
        "host": c.host,
        "port": c.port,
    }


def _failed(key: str, code: ErrorCode, message: str | None = None) -> Coordinator:
    return Coordinator(
        key=key, node_id=BrokerId(-1), host="", port=i32(-1), error_code=code, error_message=message
    )


def _refusal(ctx: RequestContext, key: str, key_type: int) -> ErrorCode | None:
    """Kafka's ``getCoordinator``: a group key needs DESCRIBE on the group, a transaction key
    DESCRIBE on the transactional id."""
    if key_type == GROUP and not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.group_authorization_failed
    if key_type == TRANSACTION and not ctx.authorized(
        AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
    ):
        return ErrorCode.transactional_id_authorization_failed
    return None


def _coordinator(ctx: RequestContext, key: str, key_type: int) -> Coordinator:
    refused = _refusal(ctx, key, key_type)
    if refused is not None:
        # below v4 Kafka answers with getErrorResponse, which carries the error's message
        return _failed(key, refused, MESSAGES[refused] if ctx.version < 4 else None)
    if key_type not in (GROUP, TRANSACTION):
        return _failed(key, ErrorCode.invalid_request, f"Unsupported key type {key_type}")
    host, port = ctx.advertised
    return Coordinator(
        key=key,
        node_id=BrokerId(ctx.broker.node_id),
        host=host,
        port=i32(port),
        error_code=ErrorCode.none,
        error_message=None,
    )


def _error_reply(req: FindCoordinatorRequest, code: ErrorCode) -> FindCoordinatorResponse:
    return FindCoordinatorResponse(
        throttle_time=NO_THROTTLE,
        coordinators=tuple(_failed(k, code) for k in req.coordinator_keys),
    )


@handler(
    api_key=10,
    versions=(0, 6),
    request=FindCoordinatorRequest,
    response=FindCoordinatorResponse,
    error_reply=_error_reply,
    upgrade=_one_key,
    downgrade=_top_level,
)
async def find_coordinator(
    ctx: RequestContext, req: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    if req.key_type == SHARE and ctx.version >= SHARE_VERSION and req.coordinator_keys:
        # only brokers ask for share coordinators: Kafka's getCoordinator calls
        # authorizeClusterOperation(CLUSTER_ACTION), which fails the whole request
        require_cluster(ctx, AclOperation.CLUSTER_ACTION)
    return FindCoordinatorResponse(
        throttle_time=NO_THROTTLE,
        coordinators=tuple(_coordinator(ctx, key, req.key_type) for key in req.coordinator_keys),
    )
