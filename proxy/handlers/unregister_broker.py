"""UnregisterBroker (key 64), v0 (flexible; KIP-500): an operator removes a broker's
registration from the controller (``Admin.unregisterBroker``, ``kafka-cluster.sh
unregister``).

Kafka's broker forwards it to the controller (``ControllerApis.handleUnregisterBroker``): ALTER
on the cluster, else CLUSTER_AUTHORIZATION_FAILED; then ``ReplicationControlManager
.unregisterBroker``: a broker id that is not registered is BROKER_ID_NOT_REGISTERED with the
exception's message (Kafka 4.1+ answers with ``getErrorResponse``, KAFKA-18859). The only
registered broker of a single kafkad is this node: unregistering it is answered NONE and
changes nothing (a live Kafka broker unregistered this way registers again at its next
heartbeat; kafkad's node never stops being registered).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.unregister_broker.v0.request import UnregisterBrokerRequest
from kio.schema.unregister_broker.v0.response import UnregisterBrokerResponse

from proxy.acl.checks import require_cluster
from proxy.acl.model import AclOperation
from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import NO_THROTTLE


def _answer(code: ErrorCode, message: str | None = None) -> UnregisterBrokerResponse:
    return UnregisterBrokerResponse(
        throttle_time=NO_THROTTLE, error_code=code, error_message=message
    )


def _error_reply(req: UnregisterBrokerRequest, code: ErrorCode) -> UnregisterBrokerResponse:
    return _answer(code)


@handler(
    api_key=64,
    versions=(0, 0),
    request=UnregisterBrokerRequest,
    response=UnregisterBrokerResponse,
    error_reply=_error_reply,
)
async def unregister_broker(
    ctx: RequestContext, req: UnregisterBrokerRequest
) -> UnregisterBrokerResponse:
    require_cluster(ctx, AclOperation.ALTER)
    if req.broker_id != ctx.broker.node_id:
        message = f"Broker ID {req.broker_id} is not currently registered"
        return _answer(ErrorCode.broker_id_not_registered, message)
    return _answer(ErrorCode.none)
