"""InitProducerId (key 22), v0-5.

v0: transactional id + transaction timeout (aiokafka speaks only v0). v1: same (throttling).
v2: flexible. v3: ProducerId/ProducerEpoch in the request (KIP-360: -1/-1 is a fresh start; a
known pair is the client asking to bump its epoch after an abortable error). v4: may answer
PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH, ``wire/errors.py``). v5: may
answer TRANSACTION_ABORTABLE. v6 (KIP-939 two-phase commit) is not advertised. Fields a version
lacks count as -1.

Null transactional id (spec eos.md §4.4 step 1, Kafka's TransactionCoordinator): answer a
never-used producer id with epoch 0 and keep no coordinator state; the transaction timeout is
not checked. This holds for the KIP-360 bump path too: an idempotent producer that sends its
current (id, epoch) gets a fresh id at epoch 0, exactly as Kafka does; the only check is that
ProducerId and ProducerEpoch are both -1 or both set (else INVALID_REQUEST). The partitions
accept the new id with any first sequence (it is unknown to them).

A transactional id goes to the transaction coordinator (``Broker.txns``, spec §4.4 steps 2-8):
"" is INVALID_REQUEST, a bad timeout INVALID_TRANSACTION_TIMEOUT, an ongoing transaction of an
older instance is fenced and aborted (CONCURRENT_TRANSACTIONS, the retry gets the new epoch).

Authorization first: a transactional id needs WRITE (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
an idempotent producer IDEMPOTENT_WRITE on the cluster or WRITE on at least one topic (else
CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.init_producer_id.v5.response import InitProducerIdResponse
from kio.schema.types import ProducerId
from kio.static.primitive import i16

from proxy.acl.checks import allowed_on_any, cluster_allows
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.outcomes import ErrorReply
from proxy.registry import handler
from storage.api import StorageError
from wire.values import NO_THROTTLE, millis

log = logging.getLogger("kafkad.init_producer_id")


def _reply(code: ErrorCode, pid: int = -1, epoch: int = -1) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        throttle_time=NO_THROTTLE,
        error_code=code,
        producer_id=ProducerId(pid),
        producer_epoch=i16(epoch),
    )


def _error_reply(_req: InitProducerIdRequest, code: ErrorCode) -> InitProducerIdResponse:
    """No producer id and no epoch (-1, -1): Kafka's ``InitProducerIdRequest.getErrorResponse``."""
    return _reply(code)


def _authorize(ctx: RequestContext, transactional_id: str | None) -> None:
    """Kafka's ``handleInitProducerIdRequest``, before anything else: a transactional producer
    needs WRITE on its id; an idempotent one IDEMPOTENT_WRITE on the cluster or WRITE on some
    topic (KIP-679)."""
    if transactional_id is not None:
        if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            raise ErrorReply(ErrorCode.transactional_id_authorization_failed)
    elif not cluster_allows(ctx, AclOperation.IDEMPOTENT_WRITE) and not allowed_on_any(
        ctx, AclOperation.WRITE, ResourceType.TOPIC
    ):
        raise ErrorReply(ErrorCode.cluster_authorization_failed)


@handler(
    api_key=22,
    versions=(0, 5),
    request=InitProducerIdRequest,
    response=InitProducerIdResponse,
    error_reply=_error_reply,
)
async def init_producer_id(
    ctx: RequestContext, req: InitProducerIdRequest
) -> InitProducerIdResponse:
    _authorize(ctx, req.transactional_id)
    producer_id, producer_epoch = int(req.producer_id), int(req.producer_epoch)
    if (producer_id == -1) != (producer_epoch == -1):
        return _reply(ErrorCode.invalid_request)
    if req.transactional_id is not None:
        result = await ctx.broker.txns.init_producer_id(
            req.transactional_id, millis(req.transaction_timeout), producer_id, producer_epoch
        )
        return _reply(result.error, result.producer_id, result.producer_epoch)
    try:
        pid = await ctx.broker.producer_ids.generate_producer_id()
    except StorageError as exc:
        log.error("cannot reserve producer ids: %s", exc)
        return _reply(ErrorCode.coordinator_not_available)
    return _reply(ErrorCode.none, pid, 0)
