"""ListTransactions (key 66), v0-1 (flexible; KIP-664, spec eos.md §4.11).

v0: filters by state names (unknown names are echoed in UnknownStateFilters and match nothing)
and producer ids; empty filters match everything. v1: DurationFilter (only transactions
running longer than that many ms; -1 = off). v2 (regex filter on the transactional id) is not
advertised. COORDINATOR_LOAD_IN_PROGRESS while the coordinator loads.

Only the transactional ids the principal may DESCRIBE are listed (Kafka's
``handleListTransactionsRequest``).
"""

from __future__ import annotations

from kio.schema.list_transactions.v1.request import ListTransactionsRequest
from kio.schema.list_transactions.v1.response import ListTransactionsResponse, TransactionState
from kio.schema.types import ProducerId, TransactionalId

from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import NO_THROTTLE


@handler(
    api_key=66,
    versions=(0, 1),
    request=ListTransactionsRequest,
    response=ListTransactionsResponse,
)
async def list_transactions(
    ctx: RequestContext, req: ListTransactionsRequest
) -> ListTransactionsResponse:
    code, unknown, found = ctx.broker.txns.list_transactions(
        req.state_filters, req.producer_id_filters, int(req.duration_filter)
    )
    return ListTransactionsResponse(
        throttle_time=NO_THROTTLE,
        error_code=code,
        unknown_state_filters=tuple(unknown),
        transaction_states=tuple(
            TransactionState(
                transactional_id=TransactionalId(m.transactional_id),
                producer_id=ProducerId(m.producer_id),
                transaction_state=m.state.kafka_name,
            )
            for m in found
            if ctx.authorized(
                AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, m.transactional_id
            )
        ),
    )
