"""AddOffsetsToTxn (key 25), v0-4 (spec eos.md §4.6).

v0: transactional id, producer id, epoch, group id. v1: same (throttling). v2: may answer
PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH). v3: flexible. v4: may answer
TRANSACTION_ABORTABLE (older versions get INVALID_TXN_STATE, ``wire/errors.py``).

Adds the group's ``__consumer_offsets`` partition to the transaction, so its commit or abort
marker materialises or drops the offsets TxnOffsetCommit leaves pending there. The partition
is the group coordinator's: ``partition_for(group, n)`` over the partition count of
``__consumer_offsets`` as it exists, or ``offsets.topic.num.partitions`` before it does (the
group coordinator creates it on its first write).

Authorization first (Kafka's ``handleAddOffsetsToTxnRequest``): WRITE on the transactional id
(else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group (else
GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kio.schema.add_offsets_to_txn.v4.request import AddOffsetsToTxnRequest
from kio.schema.add_offsets_to_txn.v4.response import AddOffsetsToTxnResponse
from kio.schema.errors import ErrorCode

from coordinator.group.offsets_log import OFFSETS_TOPIC
from coordinator.placement import partition_for
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import NO_THROTTLE


@handler(
    api_key=25, versions=(0, 4), request=AddOffsetsToTxnRequest, response=AddOffsetsToTxnResponse
)
async def add_offsets_to_txn(
    ctx: RequestContext, req: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    broker = ctx.broker
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        code = ErrorCode.transactional_id_authorization_failed
        return AddOffsetsToTxnResponse(throttle_time=NO_THROTTLE, error_code=code)
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, req.group_id):
        code = ErrorCode.group_authorization_failed
        return AddOffsetsToTxnResponse(throttle_time=NO_THROTTLE, error_code=code)
    topic = broker.topics.get(OFFSETS_TOPIC)
    n = (
        len(topic.partitions)
        if topic is not None
        else broker.config.get("offsets.topic.num.partitions")
    )
    code = await broker.txns.add_offsets(
        req.transactional_id, req.producer_id, req.producer_epoch, partition_for(req.group_id, n)
    )
    return AddOffsetsToTxnResponse(throttle_time=NO_THROTTLE, error_code=code)
