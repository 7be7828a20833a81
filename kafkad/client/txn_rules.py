"""What a transactional producer does with each answer, as Java's ``TransactionManager`` (4.x)
and ``Sender`` decide it: pure tables, no I/O (``txn_producer.py`` acts on them).

Each transactional request's error code maps to one ``Step``:

* ``DONE``: go on (for Produce, DUPLICATE_SEQUENCE_NUMBER too: the batch is already in);
* ``RETRY``: send the same request again to the same broker after a short back-off;
* ``RECOORDINATE``: ask FindCoordinator again (the coordinator moved), then retry;
* ``ABORTABLE``: the transaction cannot commit; the application must abort it and may go on;
* ``FENCED``: a newer producer of the transactional id (or a bumped epoch) fenced this one;
  fatal: only a new InitProducerId (a new producer instance) goes on;
* ``FATAL``: any other error the producer cannot recover from.

The tables follow the handlers of ``TransactionManager`` (InitProducerIdHandler,
AddPartitionsToTxnHandler, AddOffsetsToTxnHandler, TxnOffsetCommitHandler, EndTxnHandler) and
``Sender.completeBatch``/``canRetry`` with ``TransactionManager.handleFailedBatch`` for
Produce. Where Java tests "``error.exception() instanceof RetriableException``" the table uses
kio's ``retriable`` flag (Kafka's own classification).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from kio.schema.errors import ErrorCode

__all__ = ["Step", "step_for"]

E = ErrorCode


class Step(enum.Enum):
    DONE = "done"
    RETRY = "retry"
    RECOORDINATE = "recoordinate"
    ABORTABLE = "abortable"
    FENCED = "fenced"
    FATAL = "fatal"


_FENCING = {E.invalid_producer_epoch: Step.FENCED, E.producer_fenced: Step.FENCED}
_MOVED = {E.not_coordinator: Step.RECOORDINATE, E.coordinator_not_available: Step.RECOORDINATE}

# api key -> code -> step; a code absent from its table: RETRY when retriable, else the
# table's default (_DEFAULT).
_TABLES: dict[int, Mapping[ErrorCode, Step]] = {
    # InitProducerIdHandler (4.x): authorization and TRANSACTION_ABORTABLE are abortable
    22: {
        **_MOVED,
        **_FENCING,
        E.transactional_id_authorization_failed: Step.ABORTABLE,
        E.cluster_authorization_failed: Step.ABORTABLE,
        E.transaction_abortable: Step.ABORTABLE,
    },
    # AddPartitionsToTxnHandler (classic only)
    24: {
        **_MOVED,
        **_FENCING,
        E.topic_authorization_failed: Step.ABORTABLE,
        E.unknown_producer_id: Step.ABORTABLE,
        E.invalid_producer_id_mapping: Step.FATAL,
        E.transaction_abortable: Step.ABORTABLE,
        E.operation_not_attempted: Step.RETRY,
        E.invalid_txn_state: Step.FATAL,
        E.transactional_id_authorization_failed: Step.FATAL,
    },
    # AddOffsetsToTxnHandler (classic only)
    25: {
        **_MOVED,
        **_FENCING,
        E.group_authorization_failed: Step.ABORTABLE,
        E.unknown_producer_id: Step.ABORTABLE,
        E.invalid_producer_id_mapping: Step.FATAL,
        E.invalid_txn_state: Step.FATAL,
        E.transaction_abortable: Step.ABORTABLE,
    },
    # TxnOffsetCommitHandler (REQUEST_TIMED_OUT also looks the group coordinator up again)
    28: {
        **_MOVED,
        **_FENCING,
        E.request_timed_out: Step.RECOORDINATE,
        E.group_authorization_failed: Step.ABORTABLE,
        E.fenced_instance_id: Step.ABORTABLE,
        E.transaction_abortable: Step.ABORTABLE,
        E.unknown_member_id: Step.ABORTABLE,
        E.illegal_generation: Step.ABORTABLE,
    },
    # EndTxnHandler
    26: {
        **_MOVED,
        **_FENCING,
        E.invalid_txn_state: Step.FATAL,
        E.unknown_producer_id: Step.ABORTABLE,
        E.invalid_producer_id_mapping: Step.FATAL,
        E.transaction_abortable: Step.ABORTABLE,  # FATAL when aborting (txn_producer._end)
    },
    # Produce, transactional (Sender.canRetry, TransactionManager.maybeTransitionToErrorState):
    # fatal only for PRODUCER_FENCED, cluster/transactional-id authorization, an unsupported
    # version and INVALID_PRODUCER_ID_MAPPING; any other batch error (INVALID_PRODUCER_EPOCH
    # too: since 2.7 the broker's stale-epoch answer, KIP-588; INVALID_TXN_STATE; a retriable
    # error past the delivery timeout) makes the transaction abortable
    0: {
        E.producer_fenced: Step.FENCED,
        E.duplicate_sequence_number: Step.DONE,
        E.invalid_producer_epoch: Step.ABORTABLE,
        E.invalid_txn_state: Step.ABORTABLE,
        E.transaction_abortable: Step.ABORTABLE,
        E.out_of_order_sequence_number: Step.ABORTABLE,
        E.unknown_producer_id: Step.ABORTABLE,
        E.invalid_producer_id_mapping: Step.FATAL,
        E.unsupported_version: Step.FATAL,
        E.transactional_id_authorization_failed: Step.FATAL,
        E.cluster_authorization_failed: Step.FATAL,
    },
}
_DEFAULT = {22: Step.FATAL, 24: Step.FATAL, 25: Step.FATAL, 28: Step.FATAL, 26: Step.FATAL}


def step_for(api_key: int, code: int) -> Step:
    """What the producer does after ``code`` in an answer to API ``api_key``."""
    try:
        ec = ErrorCode(code)
    except ValueError:
        return _DEFAULT.get(api_key, Step.ABORTABLE)
    if ec is E.none:
        return Step.DONE
    step = _TABLES[api_key].get(ec)
    if step is not None:
        return step
    if ec.retriable:
        return Step.RETRY
    return _DEFAULT.get(api_key, Step.ABORTABLE)
