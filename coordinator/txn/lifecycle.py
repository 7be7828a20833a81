"""What the coordinator does on its own: markers and completion, timeouts, id expiration,
recovery at startup (pure: ``now_ms`` in, values out).

Theory of operation
-------------------
Once a PrepareCommit/PrepareAbort record is durable the outcome is decided; what remains is
to write a COMMIT/ABORT marker to every partition of the transaction and then persist
CompleteCommit/CompleteAbort. ``begin_completion`` returns both halves at once: the ``Markers``
to write (producer id and epoch as in the Prepare record, TV1) and the Complete transit, which is
already pending, so any request for the id gets CONCURRENT_TRANSACTIONS until it is durable::

    write = decisions.end_txn(...)            # or a fence from init_producer_id/timeouts
    ... append write.transit, cache.apply(write.transit), reply write.reply ...
    completion = begin_completion(meta, now_ms)
    ... write completion.markers (marker_action() per partition result) ...
    ... append completion.transit, cache.apply(completion.transit) ...

If the Complete append fails the runtime keeps it pending and appends it again (Kafka retries on
COORDINATOR_NOT_AVAILABLE); markers are idempotent, so writing them twice is harmless.

After a restart ``transactions_to_complete`` re-drives every Prepare* the log left behind.

Two background scans (``transaction.abort.timed.out.transaction.cleanup.interval.ms`` and
``transaction.remove.expired.transaction.cleanup.interval.ms``, defaults 10 s and 1 h) use
``expired_transactions`` + ``abort_timed_out`` (an Ongoing transaction older than its timeout is
aborted with the epoch bumped, Kafka's PrepareEpochFence path, so its producer is fenced) and
``expired_transactional_ids`` + ``expire_transactional_id`` (an id resting longer than
``transactional.id.expiration.ms`` gets a tombstone and leaves the cache; its next
InitProducerId starts over with a new producer id).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from kio.schema.errors import ErrorCode

from coordinator.txn.decisions import Write
from coordinator.txn.metadata import TP, IllegalTransition, TxnMetadata, TxnTransit
from coordinator.txn.state import EXPIRABLE, NO_PRODUCER_ID, PREPARE, TxnState

__all__ = [
    "MARKER_ACTIONS",
    "Completion",
    "MarkerAction",
    "Markers",
    "abort_timed_out",
    "begin_completion",
    "expire_transactional_id",
    "expired_transactional_ids",
    "expired_transactions",
    "marker_action",
    "transactions_to_complete",
]

E = ErrorCode
S = TxnState


@dataclass(frozen=True, slots=True)
class Markers:
    """WriteTxnMarkers for one transaction: a control batch on each partition.

    TV1: the epoch is the transaction's own (or the fence's bumped one); the partition leader
    accepts a marker whose epoch is >= the producer's data epoch (KIP-1228 makes it strictly
    greater only for TV2 markers) and answers INVALID_PRODUCER_EPOCH to an older one.
    TV2: the epoch is the Prepare record's, one above the transaction's data (Short.MaxValue
    with the old producer id when the bump overflowed); the partition takes it as the
    producer's epoch, so a late write of the finished transaction is fenced there.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TP]
    # WriteTxnMarkers v2's TransactionVersion: a TV2 marker must carry an epoch above the
    # producer's at the partition (KAFKA-19446), a classic one at least the producer's
    transaction_version: int = 0


@dataclass(frozen=True, slots=True)
class Completion:
    """Write ``markers``, then append ``transit`` (CompleteCommit/CompleteAbort, pending)."""

    markers: Markers
    transit: TxnTransit


def begin_completion(meta: TxnMetadata, now_ms: int) -> Completion:
    """Right after a Prepare* record is applied (or at startup): the markers to write and the
    Complete transit that follows them; the transit is pending from now on."""
    if meta.state not in PREPARE or meta.pending:
        raise IllegalTransition(f"{meta.transactional_id}: no markers to write in {meta}")
    markers = Markers(
        meta.transactional_id,
        meta.producer_id,
        meta.producer_epoch,
        meta.state is S.PREPARE_COMMIT,
        meta.partitions,
        meta.client_transaction_version,
    )
    return Completion(markers, meta.prepare_complete(now_ms))


def transactions_to_complete(states: Mapping[str, TxnMetadata], now_ms: int) -> list[Completion]:
    """Startup recovery: every transaction the replayed log left in PrepareCommit/PrepareAbort
    (decided, markers maybe not all written) must have its markers written again."""
    return [
        begin_completion(meta, now_ms)
        for meta in states.values()
        if meta.state in PREPARE and not meta.pending
    ]


class MarkerAction(enum.Enum):
    """What a per-partition WriteTxnMarkers result means for the coordinator (§4.10)."""

    DONE = "marker written: remove the partition from the pending set"
    RETRY = "retry with a re-resolved leader, no deadline"
    STOP = "a newer epoch or coordinator owns the transaction: stop sending for it"
    DROP = "give up on this partition"
    BUG = "cannot happen for a well-formed marker"


MARKER_ACTIONS: Final[Mapping[ErrorCode, MarkerAction]] = MappingProxyType(
    {
        E.none: MarkerAction.DONE,
        E.unknown_topic_or_partition: MarkerAction.RETRY,
        E.not_leader_or_follower: MarkerAction.RETRY,
        E.not_enough_replicas: MarkerAction.RETRY,
        E.not_enough_replicas_after_append: MarkerAction.RETRY,
        E.request_timed_out: MarkerAction.RETRY,
        E.kafka_storage_error: MarkerAction.RETRY,
        E.invalid_producer_epoch: MarkerAction.STOP,
        E.transaction_coordinator_fenced: MarkerAction.STOP,
        E.unsupported_for_message_format: MarkerAction.DROP,
        E.unsupported_version: MarkerAction.DROP,
        E.corrupt_message: MarkerAction.BUG,
        E.message_too_large: MarkerAction.BUG,
        E.record_list_too_large: MarkerAction.BUG,
        E.invalid_required_acks: MarkerAction.BUG,
    }
)


def marker_action(code: ErrorCode) -> MarkerAction:
    """Unlisted codes are unexpected (Kafka throws IllegalStateException): BUG."""
    return MARKER_ACTIONS.get(code, MarkerAction.BUG)


# -- timeouts --------------------------------------------------------------------------------


def expired_transactions(states: Mapping[str, TxnMetadata], now_ms: int) -> list[TxnMetadata]:
    """Ongoing transactions open longer than their timeout (start + timeout < now), skipping
    ids with a move pending (Kafka's timedOutTransactions)."""
    return [
        meta
        for meta in states.values()
        if meta.state is S.ONGOING
        and not meta.pending
        and meta.txn_start_timestamp + meta.txn_timeout_ms < now_ms
    ]


def abort_timed_out(
    meta: TxnMetadata,
    now_ms: int,
    transaction_version: int = 0,
    next_producer_id: int = NO_PRODUCER_ID,
) -> Write | None:
    """Abort a timed-out transaction with the epoch bumped (PrepareEpochFence -> PrepareAbort):
    the old producer's next EndTxn/AddPartitions/InitProducerId(id, epoch) gets PRODUCER_FENCED
    and its produce INVALID_PRODUCER_EPOCH. None if the id moved on meanwhile. On append
    failure ``meta.abandon`` keeps the bumped epoch in memory (Kafka's hasFailedEpochFence).
    ``transaction_version`` is the coordinator's level (a TV2 fence bumps once and, at an
    exhausted epoch, needs ``next_producer_id``: ``decisions.fence_needs_new_producer_id``)."""
    if meta.state is not S.ONGOING or meta.pending:
        return None
    return Write(meta.prepare_epoch_fence(now_ms, transaction_version, next_producer_id))


# -- transactional id expiration -------------------------------------------------------------


def expired_transactional_ids(
    states: Mapping[str, TxnMetadata], now_ms: int, expiration_ms: int
) -> list[TxnMetadata]:
    """Ids resting (Empty/CompleteCommit/CompleteAbort) with no update for
    ``transactional.id.expiration.ms`` (Kafka: lastUpdate <= now - expiration)."""
    return [
        meta
        for meta in states.values()
        if meta.state in EXPIRABLE
        and not meta.pending
        and meta.txn_last_update_timestamp <= now_ms - expiration_ms
    ]


def expire_transactional_id(meta: TxnMetadata) -> Write:
    """A tombstone for the id (``log_format.encode`` gives value None); applying it removes the
    id from the cache."""
    return Write(meta.prepare_dead())
