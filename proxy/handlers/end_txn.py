"""EndTxn (key 26), v0-4 (spec eos.md §4.7, transaction version 1).

v0: transactional id, producer id, epoch, committed. v1: same (throttling). v2: may answer
PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH). v3: flexible. v4: may answer
TRANSACTION_ABORTABLE (older versions get INVALID_TXN_STATE, ``wire/errors.py``). v5
(transactions v2: the epoch is bumped every transaction, new id/epoch in the response) is not
advertised, and ``transaction.version`` is not offered in ApiVersions.

The answer waits for the markers and the Complete record when they finish promptly, so the
next AddPartitionsToTxn does not meet CONCURRENT_TRANSACTIONS (``coordinator/txn/runtime.py``).

The transactional id needs WRITE, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Kafka's
``handleEndTxnRequest``).
"""

from __future__ import annotations

from kio.schema.end_txn.v4.request import EndTxnRequest
from kio.schema.end_txn.v4.response import EndTxnResponse
from kio.schema.errors import ErrorCode

from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import NO_THROTTLE


@handler(api_key=26, versions=(0, 4), request=EndTxnRequest, response=EndTxnResponse)
async def end_txn(ctx: RequestContext, req: EndTxnRequest) -> EndTxnResponse:
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        code = ErrorCode.transactional_id_authorization_failed
        return EndTxnResponse(throttle_time=NO_THROTTLE, error_code=code)
    code = await ctx.broker.txns.end_txn(
        req.transactional_id, req.producer_id, req.producer_epoch, req.committed
    )
    return EndTxnResponse(throttle_time=NO_THROTTLE, error_code=code)
