"""Request decisions of the transaction coordinator (pure: ``now_ms`` in, values out).

Theory of operation
-------------------
Each client request becomes one call here, made under the coordinator's per-id exclusion (in
trio: with no await between the call and ``prepare``'s effect, which the call itself does). The
answer is either

* an ``ErrorCode``: reply with it now, nothing is written (this includes ``NONE`` for a request
  that is already satisfied, e.g. a retried EndTxn of a finished commit), or
* a ``Write``: the metadata now has ``write.transit`` pending. The runtime appends
  ``log_format.encode(write.transit)`` to ``__transaction_state`` and then

  - on success: ``cache.apply(write.transit)`` and reply ``write.reply`` (for InitProducerId
    with the transit's producer id and epoch); if ``write.writes_markers`` (a PrepareCommit or
    PrepareAbort is now durable), call ``lifecycle.begin_completion`` at once to get the
    markers to write and the Complete transit that follows them;
  - on failure: ``meta.abandon(write.transit)`` and reply ``append_error(storage_error)``.

``write.created`` is an InitProducerId for an unknown id: the runtime puts it in the cache
(``TxnCache.put_if_absent``) before appending, so concurrent requests see the pending state.

Codes are always the newest ones (PRODUCER_FENCED, never INVALID_PRODUCER_EPOCH):
``wire/errors.py`` rewrites them per request version at encode time (InitProducerId < 4,
AddPartitionsToTxn/AddOffsetsToTxn/EndTxn < 2 get INVALID_PRODUCER_EPOCH).

Order of checks, as Kafka's TransactionCoordinator (transaction version 1):

* InitProducerId: exactly one of (producer id, epoch) is -1 -> INVALID_REQUEST; "" ->
  INVALID_REQUEST; timeout not in (0, transaction.max.timeout.ms] -> INVALID_TRANSACTION_TIMEOUT;
  unknown id -> create (new producer id, epoch -1, Empty); pending -> CONCURRENT_TRANSACTIONS;
  KIP-360 (id, epoch) not plausible -> PRODUCER_FENCED; then by state (``_init_from_state``).
* AddPartitionsToTxn / AddOffsetsToTxn: "" -> INVALID_REQUEST; pending ->
  CONCURRENT_TRANSACTIONS (Kafka 4.x checks it first, KAFKA-18660); unknown id or other
  producer id -> INVALID_PRODUCER_ID_MAPPING; other epoch -> PRODUCER_FENCED; Prepare* ->
  CONCURRENT_TRANSACTIONS; Ongoing with all partitions present -> NONE; else -> Ongoing.
* EndTxn: "" -> INVALID_REQUEST; unknown/other producer id -> INVALID_PRODUCER_ID_MAPPING; other
  epoch -> PRODUCER_FENCED; pending -> CONCURRENT_TRANSACTIONS; then ``END_TXN``.

Transaction version 2 (KIP-890 part 2; Kafka 4.1's TransactionCoordinator): the client
transaction version of a request is 2 for EndTxn v5+ and AddPartitionsToTxn v5+ (the broker's
own add for a Produce v12 / TxnOffsetCommit v5), else 0; it is recorded in the transaction.

* EndTxn TV2 (``END_TXN_V2``): every commit and abort bumps the epoch, so "same epoch" no
  longer means "retry". A retry is the epoch one below the current one (``retry_on_bump``), or
  (previous producer id, 32766) after an overflow moved the id to (next id, 0)
  (``retry_on_overflow``). Order: unknown id -> INVALID_PRODUCER_ID_MAPPING; pending ->
  CONCURRENT_TRANSACTIONS (checked before the producer id, as Kafka 4.x does, so a producer
  moved to a new id by an overflow is told to retry while the old id's markers are written, and
  before the epoch, KAFKA-18464, so an empty abort racing a completion is not self-fenced);
  other producer id (unless an overflow retry) -> INVALID_PRODUCER_ID_MAPPING; the epoch not valid
  for the state -> PRODUCER_FENCED; then the table. The answer carries the producer id and
  epoch the client continues with (``end_txn_reply_ids``).
* InitProducerId / the timeout abort on an Ongoing transaction fence it with the coordinator's
  ``transaction.version`` (``TxnMetadata.prepare_epoch_fence``): at 2, one bump, not two.

Not here (the handlers do them, before calling): authorization (TRANSACTIONAL_ID_/TOPIC_/
GROUP_AUTHORIZATION_FAILED) and topic existence; ``partition_errors`` turns their per-partition
failures into Kafka's all-or-nothing answer. InitProducerId with a null transactional id
(idempotent producer: new producer id, epoch 0, no coordinator state) is the handler's too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from kio.schema.errors import ErrorCode

from coordinator.append_errors import APPEND_ERRORS, append_error
from coordinator.txn.metadata import TP, TxnMetadata, TxnTransit
from coordinator.txn.state import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PREPARE,
    RESTING,
    TxnState,
    is_epoch_exhausted,
    supports_epoch_bump,
)
from storage.api import CONSUMER_OFFSETS

__all__ = [
    "APPEND_ERRORS",
    "END_TXN",
    "END_TXN_V2",
    "OFFSETS_TOPIC",
    "Write",
    "add_offsets_to_txn",
    "add_partitions_to_txn",
    "append_error",
    "end_txn",
    "end_txn_reply_ids",
    "fence_needs_new_producer_id",
    "init_producer_id",
    "needs_new_producer_id",
    "partition_errors",
    "valid_timeout",
    "verify_partitions",
]

E = ErrorCode
S = TxnState
OFFSETS_TOPIC: Final = CONSUMER_OFFSETS


@dataclass(frozen=True, slots=True)
class Write:
    """Append ``transit``; once durable apply it and answer ``reply``."""

    transit: TxnTransit
    reply: ErrorCode = E.none
    created: TxnMetadata | None = None  # InitProducerId for a new id: insert before appending

    @property
    def writes_markers(self) -> bool:
        """PrepareCommit/PrepareAbort: markers follow once the record is durable."""
        return self.transit.state in PREPARE


# -- InitProducerId (key 22) -----------------------------------------------------------------


def valid_timeout(txn_timeout_ms: int, max_timeout_ms: int) -> bool:
    """``transaction.max.timeout.ms`` bounds the producer's ``transaction.timeout.ms``."""
    return 0 < txn_timeout_ms <= max_timeout_ms


def init_producer_id(
    meta: TxnMetadata | None,
    transactional_id: str,
    txn_timeout_ms: int,
    *,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    max_timeout_ms: int,
    new_producer_id: Callable[[], int],
    now_ms: int,
    transaction_version: int = 0,
) -> ErrorCode | Write:
    """InitProducerId for ``transactional_id`` (``meta`` = its metadata or None if unknown).

    ``producer_id``/``producer_epoch`` are the v3+ KIP-360 fields (-1/-1 = a fresh start).
    ``new_producer_id`` is called only when a producer id is needed (unknown id, or rotation
    after epoch exhaustion, or a TV2 fence at an exhausted epoch); ``needs_new_producer_id``
    tells the runtime in advance. ``transaction_version`` is the coordinator's finalized
    level, which decides how an ongoing transaction is fenced.

    The reply of a successful Write is (NONE, transit.producer_id, transit.producer_epoch),
    except after fencing an ongoing transaction: CONCURRENT_TRANSACTIONS once the abort is
    durable (the client retries and then gets the twice-bumped epoch).
    """
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
        return E.invalid_request
    if not transactional_id:
        return E.invalid_request
    if not valid_timeout(txn_timeout_ms, max_timeout_ms):
        return E.invalid_transaction_timeout
    expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
    created = None
    if meta is None:
        meta = created = TxnMetadata.new(
            transactional_id, new_producer_id(), txn_timeout_ms, now_ms
        )
    if meta.pending:
        return E.concurrent_transactions
    if expected is not None and not _plausible_producer(meta, *expected):
        return E.producer_fenced
    result = _init_from_state(
        meta, txn_timeout_ms, expected, new_producer_id, now_ms, transaction_version
    )
    if isinstance(result, ErrorCode):
        return result
    reply = E.concurrent_transactions if result.epoch_fence else E.none
    return Write(result, reply, created)


def needs_new_producer_id(
    meta: TxnMetadata | None, producer_epoch: int = NO_PRODUCER_EPOCH, transaction_version: int = 0
) -> bool:
    """Whether ``init_producer_id`` would call ``new_producer_id`` (so an async allocator can
    be awaited first, and only when needed)."""
    if meta is None:
        return True
    if meta.pending:
        return False
    if meta.state is S.ONGOING:
        return fence_needs_new_producer_id(meta, transaction_version)
    return (
        meta.state in RESTING
        and meta.epoch_exhausted
        and producer_epoch in (NO_PRODUCER_EPOCH, meta.producer_epoch)
    )


def fence_needs_new_producer_id(meta: TxnMetadata, transaction_version: int) -> bool:
    """A TV2 fence (InitProducerId or the timeout abort) at an exhausted epoch moves the
    producer to a new id once its abort is complete (KAFKA-20090)."""
    return supports_epoch_bump(transaction_version) and meta.epoch_exhausted


def _plausible_producer(meta: TxnMetadata, producer_id: int, producer_epoch: int) -> bool:
    """KIP-360: a supplied (id, epoch) must belong to this transactional id: the metadata is
    brand new (epoch -1, e.g. the id had expired), or the id is the current one (the epoch is
    checked later), or it is the previous one at an exhausted epoch (a retry of a rotation
    whose answer was lost)."""
    return (
        meta.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == meta.producer_id
        or (producer_id == meta.prev_producer_id and is_epoch_exhausted(producer_epoch))
    )


def _init_from_state(
    meta: TxnMetadata,
    txn_timeout_ms: int,
    expected: tuple[int, int] | None,
    new_producer_id: Callable[[], int],
    now_ms: int,
    transaction_version: int,
) -> ErrorCode | TxnTransit:
    if meta.state in PREPARE:
        return E.concurrent_transactions  # markers are being written; the client retries
    if meta.state is S.ONGOING:
        # Fence: abort the running transaction under epoch + 1 and answer CONCURRENT_TRANSACTIONS.
        next_id = (
            new_producer_id()
            if fence_needs_new_producer_id(meta, transaction_version)
            else NO_PRODUCER_ID
        )
        return meta.prepare_epoch_fence(now_ms, transaction_version, next_id)
    if meta.state not in RESTING:  # Dead / PrepareEpochFence are never current states
        raise AssertionError(f"{meta.transactional_id} is {meta.state.name}")
    expected_epoch = None if expected is None else expected[1]
    if meta.epoch_exhausted and expected_epoch in (None, meta.producer_epoch):
        return meta.prepare_producer_id_rotation(
            new_producer_id(), txn_timeout_ms, now_ms, record_last_epoch=expected is not None
        )
    if expected_epoch is None:
        # A new instance: bump, and forget the last epoch so older instances cannot "retry".
        return meta.prepare_increment_epoch(
            meta.producer_epoch + 1, NO_PRODUCER_EPOCH, txn_timeout_ms, now_ms
        )
    if meta.producer_epoch in (NO_PRODUCER_EPOCH, expected_epoch):
        # The producer continues after an error (or the metadata is brand new): bump, and
        # remember the epoch it had so a retry of this very request is recognised.
        return meta.prepare_increment_epoch(
            meta.producer_epoch + 1, meta.producer_epoch, txn_timeout_ms, now_ms
        )
    if expected_epoch == meta.last_producer_epoch:
        # Retry of a bump whose answer was lost: the current epoch again, no bump (still
        # written, as Kafka does: the timeout may have changed). Kafka throws
        # IllegalStateException here when the current epoch is exhausted; we answer the retry.
        return meta.prepare_increment_epoch(
            meta.producer_epoch, meta.last_producer_epoch, txn_timeout_ms, now_ms
        )
    return E.producer_fenced


# -- AddPartitionsToTxn (key 24) / AddOffsetsToTxn (key 25) -----------------------------------


def add_partitions_to_txn(
    meta: TxnMetadata | None,
    transactional_id: str | None,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TP],
    now_ms: int,
    client_transaction_version: int = 0,
) -> ErrorCode | Write:
    """AddPartitionsToTxn v0-3 (one transaction; the single code is repeated for every
    requested partition). v4+ is the broker-to-coordinator batched form: one call per
    transaction in it, plus ``verify_partitions`` for ``VerifyOnly`` entries. v5+ adds with
    client transaction version 2 (a Produce v12 / TxnOffsetCommit v5 adding implicitly)."""
    wanted = frozenset(partitions)
    if not transactional_id:
        return E.invalid_request
    if meta is not None and meta.pending:
        # Before the producer id (KAFKA-18660): a TV2 producer whose EndTxn overflowed to a new
        # id adds with that id while the old one's markers are still being written.
        return E.concurrent_transactions
    error = _check_producer(meta, producer_id, producer_epoch)
    if error is not None:
        return error
    assert meta is not None
    if meta.state in PREPARE:
        return E.concurrent_transactions
    if meta.state is S.ONGOING and wanted <= meta.partitions:
        return E.none  # nothing new: answer without a write
    return Write(meta.prepare_add_partitions(wanted, now_ms, client_transaction_version))


def add_offsets_to_txn(
    meta: TxnMetadata | None,
    transactional_id: str | None,
    producer_id: int,
    producer_epoch: int,
    offsets_partition: int,
    now_ms: int,
    client_transaction_version: int = 0,
) -> ErrorCode | Write:
    """AddOffsetsToTxn: AddPartitionsToTxn for ``__consumer_offsets-<offsets_partition>``, the
    group's offsets partition (``log_format.partition_for(group_id,
    offsets.topic.num.partitions)``). The offsets themselves come with TxnOffsetCommit to the
    group coordinator."""
    return add_partitions_to_txn(
        meta,
        transactional_id,
        producer_id,
        producer_epoch,
        [(OFFSETS_TOPIC, offsets_partition)],
        now_ms,
        client_transaction_version,
    )


def partition_errors(
    partitions: Iterable[TP], failed: Mapping[TP, ErrorCode]
) -> dict[TP, ErrorCode] | None:
    """The handler's per-partition pre-checks (TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_OR_PARTITION): if any partition failed nothing is added, the failed ones get
    their code and every other one OPERATION_NOT_ATTEMPTED. None: all passed, go on."""
    failed = {tp: code for tp, code in failed.items() if code is not E.none}
    if not failed:
        return None
    return {tp: failed.get(tp, E.operation_not_attempted) for tp in partitions}


def verify_partitions(
    meta: TxnMetadata | None,
    transactional_id: str | None,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TP],
) -> ErrorCode | dict[TP, ErrorCode]:
    """KIP-890 part 1 verification (AddPartitionsToTxn v4+ ``VerifyOnly``, or the in-process
    check a partition leader makes before the first transactional batch of a producer): per
    partition NONE if it is in the current transaction, else TRANSACTION_ABORTABLE. The pending
    state is deliberately not checked (Kafka: partitions are added when the add is durable and
    removed when the Complete record is). The epoch is checked before partition membership
    (KAFKA-19690: a stalled, fenced producer must see PRODUCER_FENCED, not
    TRANSACTION_ABORTABLE). Nothing is written."""
    if not transactional_id:
        return E.invalid_request
    error = _check_producer(meta, producer_id, producer_epoch)
    if error is not None:
        return error
    assert meta is not None
    if meta.state in PREPARE:
        return E.concurrent_transactions
    return {tp: E.none if tp in meta.partitions else E.transaction_abortable for tp in partitions}


def _check_producer(
    meta: TxnMetadata | None, producer_id: int, producer_epoch: int
) -> ErrorCode | None:
    if meta is None or meta.producer_id != producer_id:
        return E.invalid_producer_id_mapping
    if meta.producer_epoch != producer_epoch:
        return E.producer_fenced
    return None


# -- EndTxn (key 26) -------------------------------------------------------------------------

# After the id, epoch and pending checks: (state, committed) -> the state to prepare, or the
# code to answer without a write. Missing pairs (Empty, or the other direction of a prepared or
# finished transaction): INVALID_TXN_STATE.
END_TXN: Final[Mapping[tuple[TxnState, bool], TxnState | ErrorCode]] = MappingProxyType(
    {
        (S.ONGOING, True): S.PREPARE_COMMIT,
        (S.ONGOING, False): S.PREPARE_ABORT,
        (S.PREPARE_COMMIT, True): E.concurrent_transactions,  # markers still being written
        (S.PREPARE_ABORT, False): E.concurrent_transactions,
        (S.COMPLETE_COMMIT, True): E.none,  # retry of a finished commit
        (S.COMPLETE_ABORT, False): E.none,
    }
)


# TV2, after the producer id, pending and epoch checks: (state, committed, is a retry) -> the
# state to prepare (with an epoch bump), or the code to answer without a write. Missing
# combinations: INVALID_TXN_STATE. An abort from a resting state is an "empty abort".
END_TXN_V2: Final[Mapping[tuple[TxnState, bool, bool], TxnState | ErrorCode]] = MappingProxyType(
    {
        (S.ONGOING, True, False): S.PREPARE_COMMIT,
        (S.ONGOING, False, False): S.PREPARE_ABORT,
        (S.PREPARE_COMMIT, True, True): E.concurrent_transactions,
        (S.PREPARE_ABORT, False, True): E.concurrent_transactions,
        (S.COMPLETE_COMMIT, True, True): E.none,  # retry of a finished commit
        (S.COMPLETE_COMMIT, False, False): S.PREPARE_ABORT,
        (S.COMPLETE_ABORT, False, True): E.none,  # retry of a finished abort
        (S.COMPLETE_ABORT, False, False): S.PREPARE_ABORT,
        (S.EMPTY, False, False): S.PREPARE_ABORT,
    }
)


def end_txn(
    meta: TxnMetadata | None,
    transactional_id: str | None,
    producer_id: int,
    producer_epoch: int,
    committed: bool,
    now_ms: int,
    client_transaction_version: int = 0,
    new_producer_id: Callable[[], int] | None = None,
) -> ErrorCode | Write:
    """EndTxn. v0-4 (client transaction version 0): the epoch must equal the current one, no
    bump. v5+ (version 2): ``_end_txn_v2``; ``new_producer_id`` is called when the epoch to
    bump is exhausted. The reply NONE goes out as soon as the Prepare record is durable;
    markers follow. ``end_txn_reply_ids`` gives the producer id and epoch to answer with."""
    if not transactional_id:
        return E.invalid_request
    if supports_epoch_bump(client_transaction_version):
        return _end_txn_v2(
            meta,
            producer_id,
            producer_epoch,
            committed,
            now_ms,
            client_transaction_version,
            new_producer_id,
        )
    error = _check_producer(meta, producer_id, producer_epoch)
    if error is not None:
        return error
    assert meta is not None
    if meta.pending:
        return E.concurrent_transactions
    outcome = END_TXN.get((meta.state, committed), E.invalid_txn_state)
    if isinstance(outcome, ErrorCode):
        return outcome
    return Write(meta.prepare_end(outcome is S.PREPARE_COMMIT, now_ms))


def _end_txn_v2(
    meta: TxnMetadata | None,
    producer_id: int,
    producer_epoch: int,
    committed: bool,
    now_ms: int,
    client_transaction_version: int,
    new_producer_id: Callable[[], int] | None,
) -> ErrorCode | Write:
    if meta is None:
        return E.invalid_producer_id_mapping
    retry_on_overflow = (
        meta.prev_producer_id == producer_id
        and producer_epoch == MAX_EPOCH - 1
        and meta.producer_epoch == 0
    )
    retry_on_bump = meta.producer_epoch == producer_epoch + 1
    if meta.state in PREPARE:
        valid_epoch = retry_on_bump
    elif meta.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        valid_epoch = retry_on_bump or retry_on_overflow or producer_epoch == meta.producer_epoch
    else:
        valid_epoch = producer_epoch == meta.producer_epoch
    if meta.pending:
        # Before the producer id (Kafka 4.x): a producer continuing as (next id, 0) after an
        # overflow may end its next transaction while the old id's markers are being written.
        return E.concurrent_transactions
    if meta.producer_id != producer_id and not retry_on_overflow:
        return E.invalid_producer_id_mapping
    if not valid_epoch:
        return E.producer_fenced
    is_retry = retry_on_bump or retry_on_overflow
    outcome = END_TXN_V2.get((meta.state, committed, is_retry), E.invalid_txn_state)
    if isinstance(outcome, ErrorCode):
        return outcome
    next_id = NO_PRODUCER_ID
    if meta.epoch_exhausted:
        if new_producer_id is None:
            raise ValueError("a TV2 EndTxn at an exhausted epoch needs new_producer_id")
        next_id = new_producer_id()
    return Write(
        meta.prepare_end(outcome is S.PREPARE_COMMIT, now_ms, client_transaction_version, next_id)
    )


def end_txn_reply_ids(meta: TxnMetadata | None, outcome: ErrorCode | Write) -> tuple[int, int]:
    """The (producer id, epoch) of an EndTxn v5 answer, as Kafka 4.x: an error gets (-1, -1);
    NONE with no write (a retry of a finished transaction) the current ones; a durable
    Prepare the bumped ones, or (next producer id, 0) when the bump overflowed (KAFKA-18660).
    Call it before the write is applied (``meta`` as the decision saw it) or after; for a
    Write only the transit is used."""
    if isinstance(outcome, Write):
        t = outcome.transit
        if t.next_producer_id != NO_PRODUCER_ID:
            return t.next_producer_id, 0
        return t.producer_id, t.producer_epoch
    if outcome is E.none and meta is not None:
        return meta.producer_id, meta.producer_epoch
    return NO_PRODUCER_ID, NO_PRODUCER_EPOCH
