"""ListTransactions (key 66), v0-2 (flexible; KIP-664, spec eos.md §4.11).

v0: filters by state names (unknown names are echoed in UnknownStateFilters and match nothing)
and producer ids; empty filters match everything. v1: DurationFilter (only transactions
running longer than that many ms; -1 = off). v2 (KIP-1152): TransactionalIdPattern, a regular
expression the whole transactional id must match (Java's ``Matcher.matches``, not ``find``:
``txn`` lists ``txn`` alone, ``txn.*`` every id starting with it); null or empty: no filter.
A pattern that does not compile is INVALID_REGULAR_EXPRESSION with nothing listed.
COORDINATOR_LOAD_IN_PROGRESS while the coordinator loads, alone (no unknown state filters), and
before the pattern is compiled (Kafka's ``TransactionStateManager.listTransactionStates``).

The pattern is Kafka's dialect, RE2/J, as for KIP-848 topic regexes (``coordinator/regex.py``):
compiled and matched with RE2, in time linear in each id, so no pattern stalls the event loop.

Only the transactional ids the principal may DESCRIBE are listed (Kafka's
``handleListTransactionsRequest``).
"""

from __future__ import annotations

import re2
from kio.schema.errors import ErrorCode
from kio.schema.list_transactions.v2.request import ListTransactionsRequest
from kio.schema.list_transactions.v2.response import ListTransactionsResponse, TransactionState
from kio.schema.types import ProducerId, TransactionalId

from coordinator.regex import RegexError, compile_re2
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import NO_THROTTLE


def _pattern(text: str | None) -> re2._Regexp | None:
    """The compiled filter, None for no filter; raises RegexError."""
    return compile_re2(text) if text else None


@handler(
    api_key=66,
    versions=(0, 2),
    request=ListTransactionsRequest,
    response=ListTransactionsResponse,
)
async def list_transactions(
    ctx: RequestContext, req: ListTransactionsRequest
) -> ListTransactionsResponse:
    code, unknown, found = ctx.broker.txns.list_transactions(
        req.state_filters, req.producer_id_filters, int(req.duration_filter)
    )
    try:
        # compiled once the coordinator is loaded, as Kafka's listTransactionStates
        pattern = _pattern(req.transactional_id_pattern) if code is ErrorCode.none else None
    except RegexError:
        return ListTransactionsResponse(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.invalid_regular_expression,
            unknown_state_filters=(),
            transaction_states=(),
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
            if (pattern is None or pattern.fullmatch(m.transactional_id) is not None)
            and ctx.authorized(
                AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, m.transactional_id
            )
        ),
    )
