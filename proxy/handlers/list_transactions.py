"""ListTransactions (key 66), v0-1 (flexible; KIP-664, spec eos.md §4.11).

v0: filters by state names (unknown names are echoed in UnknownStateFilters and match nothing)
and producer ids; empty filters match everything. v1: DurationFilter (only transactions
running longer than that many ms; -1 = off). v2 (regex filter on the transactional id) is not
advertised. COORDINATOR_LOAD_IN_PROGRESS while the coordinator loads.
"""

from __future__ import annotations

from typing import Any

from proxy.context import RequestContext
from proxy.registry import handler


@handler(api_key=66, versions=(0, 1))
async def list_transactions(ctx: RequestContext, req: Any) -> Any:
    b = ctx.b
    code, unknown, found = ctx.broker.txns.list_transactions(
        req.state_filters, req.producer_id_filters, int(getattr(req, "duration_filter", -1))
    )
    return b.ListTransactionsResponse(
        throttle_time=0,
        error_code=code,
        unknown_state_filters=tuple(unknown),
        transaction_states=tuple(
            b.TransactionState(
                transactional_id=m.transactional_id,
                producer_id=m.producer_id,
                transaction_state=m.state.kafka_name,
            )
            for m in found
        ),
    )
