"""EndTxn (key 26), v0-5 (spec eos.md §4.7).

v0: transactional id, producer id, epoch, committed. v1: same (throttling). v2: may answer
PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH). v3: flexible. v4: may answer
TRANSACTION_ABORTABLE (older versions get INVALID_TXN_STATE, ``wire/errors.py``). v5: the
transaction is a TV2 one (KIP-890 part 2, Kafka's
``TransactionVersion.transactionVersionForEndTxn``): the coordinator bumps the epoch
(moving to the next producer id at the top of the epoch range) and the response carries the
producer id and epoch to continue with; a retry carrying the pre-bump epoch is recognised
(``coordinator/txn/decisions.py``). Below v5 the response has no producer id or epoch.

The answer waits for the markers and the Complete record when they finish promptly, so the
next AddPartitionsToTxn does not meet CONCURRENT_TRANSACTIONS (``coordinator/txn/runtime.py``).

The transactional id needs WRITE, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Kafka's
``handleEndTxnRequest``).
"""

from __future__ import annotations

from typing import cast

from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.end_txn.v5.response import EndTxnResponse
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId
from kio.static.primitive import i16

from coordinator.txn.feature import client_transaction_version
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from wire.txn_responses import encode_end_txn_response
from wire.values import NO_THROTTLE


@handler(
    api_key=26,
    versions=(0, 5),
    request=EndTxnRequest,
    response=EndTxnResponse,
    encode=lambda resp, correlation_id, version: encode_end_txn_response(
        correlation_id, version, resp
    ),
    as_sent=True,  # every version's request has v5's four fields
)
async def end_txn(ctx: RequestContext, req: EndTxnRequest) -> EndTxnResponse:
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        code = ErrorCode.transactional_id_authorization_failed
        return EndTxnResponse(throttle_time=NO_THROTTLE, error_code=code)
    result = await ctx.broker.txns.end_transaction(
        req.transactional_id,
        req.producer_id,
        req.producer_epoch,
        req.committed,
        client_transaction_version(26, ctx.version),
    )
    return EndTxnResponse(  # the coordinator's id and epoch: cast, not parsed by kio again
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        producer_id=cast(ProducerId, result.producer_id),
        producer_epoch=cast(i16, result.producer_epoch),
    )
