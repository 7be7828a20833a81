"""Per-transactional-id metadata and its transit records (pure: no trio, no clock, no storage).

Theory of operation
-------------------
``TxnMetadata`` is what the coordinator knows about one transactional id (Kafka's
``TransactionMetadata``). It changes only through *transits*: a ``TxnTransit`` is the complete
target metadata, i.e. exactly one ``__transaction_state`` record (``log_format.py`` encodes it).
Every change follows prepare -> append -> complete::

    transit = meta.prepare_...(..., now_ms)   # checks EDGES, nothing pending; sets pending_state
    try:
        await txn_log.append(transit)         # TxnLog encodes it (log_format.encode)
    except ...:
        meta.abandon(transit)                 # clear pending_state; the client retries
    else:
        meta.complete(transit)                # overwrite every field from the record

While a transit is pending, ``pending_state`` holds its target state and every request for the
id gets CONCURRENT_TRANSACTIONS (decisions check this before preparing anything). At startup
``TxnCache.replay`` feeds the decoded log records through the same overwrite, so the cache after
a restart is the cache before it, minus what Kafka does not persist either:

* ``last_producer_epoch`` (KIP-360 retry detection) restarts at -1: an InitProducerId retry that
  spans a restart is fenced, as in Kafka ("we expect this to be a rare case").
* ``has_failed_epoch_fence`` and ``pending_state`` are memory-only.
* after a failed fence append (``abandon`` of an epoch-fence transit) memory keeps the bumped
  epoch, one above the log, so the fenced producer stays fenced even if the append did land.
  The next fence reuses that epoch instead of bumping again (Kafka's hasFailedEpochFence).
* a freshly created id whose first append failed lives in memory only (epoch -1).

Deliberate differences from Kafka:
* ``complete`` overwrites every field from the transit, like Kafka 4.1's
  ``completeTransitionTo``; the 2024 Scala version kept ``prevProducerId`` across non-Empty
  transits, which made a replayed cache differ from the live one.
* the epoch fence is one prepared transit (Ongoing -> PrepareEpochFence -> PrepareAbort, both
  hops checked against ``EDGES``) instead of Kafka's pending PrepareEpochFence that EndTxn then
  rewrites; memory is touched only by ``complete``/``abandon``.
* ``complete`` checks Kafka's transition invariants and raises ``IllegalTransition`` (a bug,
  never an expected outcome) where Kafka logs FATAL and throws IllegalStateException.

Transaction version 2 (``client_transaction_version`` 2, KIP-890 part 2), as Kafka 4.1+:

* ``prepare_add_partitions`` and ``prepare_end`` record the client transaction version of the
  request (AddPartitionsToTxn v5+ / EndTxn v5+ mean 2, older versions 0); every other transit
  keeps the current one.
* ``prepare_end`` with version 2 bumps the epoch (``last_producer_epoch`` = the epoch the client
  used). At an exhausted epoch (32766) the Prepare record goes to Short.MaxValue and carries
  ``next_producer_id``; ``prepare_complete`` then moves to that id at epoch 0 (the old id stays in
  ``prev_producer_id``, so a retry of the EndTxn is recognised).
* ``prepare_epoch_fence`` with the coordinator's ``transaction.version`` at 2 bumps the epoch
  once, not twice (KAFKA-19367), and rotates the producer id at an exhausted epoch
  (KAFKA-20090); a failed TV2 fence append leaves memory untouched (Kafka no longer sets
  hasFailedEpochFence there).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from coordinator.txn.state import (
    EDGES,
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PREPARE,
    RESTING,
    TxnState,
    is_epoch_exhausted,
    is_legal,
    supports_epoch_bump,
)

__all__ = ["TP", "IllegalTransition", "TxnCache", "TxnMetadata", "TxnTransit"]

TP: TypeAlias = tuple[str, int]
"""(topic, partition); the runtime converts to and from ``storage.api.TopicPartition``."""

S = TxnState


class IllegalTransition(Exception):
    """A prepare or complete that the decision code should never have asked for (a bug)."""


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """One record of ``__transaction_state``: the whole target metadata (``TxnTransitMetadata``).

    ``state is DEAD`` means a tombstone. ``last_producer_epoch`` and ``epoch_fence`` are not
    persisted (a decoded record has -1 and False).
    """

    transactional_id: str
    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset[TP]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int = 0
    epoch_fence: bool = False  # a PrepareAbort that also bumps the epoch (fence / timeout)

    @property
    def is_tombstone(self) -> bool:
        return self.state is S.DEAD


@dataclass(slots=True, eq=False)
class TxnMetadata:
    """Kafka's ``TransactionMetadata`` (field names in snake case)."""

    transactional_id: str
    producer_id: int
    txn_timeout_ms: int
    txn_last_update_timestamp: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID  # TV2 overflow only; kept for the log round trip
    state: TxnState = S.EMPTY
    partitions: frozenset[TP] = frozenset()
    txn_start_timestamp: int = -1
    client_transaction_version: int = 0
    pending_state: TxnState | None = None
    has_failed_epoch_fence: bool = False

    @classmethod
    def new(
        cls, transactional_id: str, producer_id: int, txn_timeout_ms: int, now_ms: int
    ) -> TxnMetadata:
        """An id seen for the first time: Empty with epoch -1 (the first bump makes it 0)."""
        return cls(transactional_id, producer_id, txn_timeout_ms, now_ms)

    @classmethod
    def from_transit(cls, transit: TxnTransit) -> TxnMetadata:
        """The metadata a record describes (replay of a record for an id not in the cache)."""
        meta = cls(transit.transactional_id, transit.producer_id, 0, 0)
        meta._overwrite(transit)
        return meta

    # -- reading ---------------------------------------------------------------------------

    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def durable_view(self) -> tuple[object, ...]:
        """The fields a log record carries (for replay-equals-live comparisons)."""
        return (
            self.transactional_id,
            self.producer_id,
            self.prev_producer_id,
            self.next_producer_id,
            self.producer_epoch,
            self.txn_timeout_ms,
            self.state,
            self.partitions,
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
            self.client_transaction_version,
        )

    # -- prepare: one method per kind of move (Kafka's prepareXxx) -------------------------

    def prepare_increment_epoch(
        self, epoch: int, last_epoch: int, txn_timeout_ms: int, now_ms: int
    ) -> TxnTransit:
        """InitProducerId from a resting state: to Empty with ``epoch`` (current + 1, or the
        current one for a KIP-360 retry), the new timeout and no partitions."""
        if epoch not in (self.producer_epoch, self.producer_epoch + 1) or epoch > MAX_EPOCH - 1:
            raise IllegalTransition(f"{self.transactional_id}: epoch {epoch} from {self}")
        return self._prepare(
            S.EMPTY,
            now_ms,
            producer_epoch=epoch,
            last_producer_epoch=last_epoch,
            txn_timeout_ms=txn_timeout_ms,
            partitions=frozenset(),
            txn_start_timestamp=-1,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, txn_timeout_ms: int, now_ms: int, *, record_last_epoch: bool
    ) -> TxnTransit:
        """InitProducerId with the epoch exhausted: a new producer id at epoch 0. The old id
        stays in ``prev_producer_id`` so a retry with (old id, exhausted epoch) is recognised."""
        if new_producer_id == self.producer_id:
            raise IllegalTransition(f"{self.transactional_id}: rotation to the same producer id")
        return self._prepare(
            S.EMPTY,
            now_ms,
            producer_id=new_producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            txn_timeout_ms=txn_timeout_ms,
            partitions=frozenset(),
            txn_start_timestamp=-1,
        )

    def prepare_add_partitions(
        self, added: Iterable[TP], now_ms: int, client_transaction_version: int = 0
    ) -> TxnTransit:
        """To Ongoing with the union; a new transaction starts now if none was open. The
        request's client transaction version is recorded (Kafka 4.x)."""
        start = now_ms if self.state in RESTING else self.txn_start_timestamp
        return self._prepare(
            S.ONGOING,
            now_ms,
            partitions=self.partitions | frozenset(added),
            txn_start_timestamp=start,
            client_transaction_version=client_transaction_version,
        )

    def prepare_end(
        self,
        commit: bool,
        now_ms: int,
        client_transaction_version: int = 0,
        next_producer_id: int = NO_PRODUCER_ID,
    ) -> TxnTransit:
        """EndTxn: PrepareCommit or PrepareAbort (Kafka's prepareAbortOrCommit). TV1: from
        Ongoing, same epoch. TV2: the epoch is bumped (``next_producer_id`` set when it is
        exhausted), and an abort may come from a resting state (nothing added: the transaction
        "starts" now)."""
        changes: dict[str, Any] = {
            "client_transaction_version": client_transaction_version,
            "next_producer_id": next_producer_id,
        }
        if supports_epoch_bump(client_transaction_version):
            at_max = self.producer_epoch >= MAX_EPOCH
            if at_max and next_producer_id == NO_PRODUCER_ID:
                raise IllegalTransition(f"{self.transactional_id}: no epoch left to bump")
            # At Short.MaxValue (a TV1 fence took 32766 there, then the client went on with
            # TV2) the epoch stays and the next id takes over (Kafka's KAFKA-20090 recovery).
            changes["producer_epoch"] = self.producer_epoch if at_max else self.producer_epoch + 1
            changes["last_producer_epoch"] = self.producer_epoch
            if self.state in RESTING:
                changes["txn_start_timestamp"] = now_ms
        return self._prepare(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, now_ms, **changes)

    def prepare_epoch_fence(
        self,
        now_ms: int,
        transaction_version: int = 0,
        next_producer_id: int = NO_PRODUCER_ID,
    ) -> TxnTransit:
        """Ongoing -> PrepareEpochFence -> PrepareAbort with the epoch bumped: the running
        transaction is aborted under an epoch its producer does not know, which fences it.
        No second bump after a failed fence append (the bumped epoch is already in memory),
        and none at Short.MaxValue (Kafka 4.1: never overflow).

        ``transaction_version`` is the coordinator's finalized level (Kafka: a fence is not
        from a client, so the server's version decides). At 2 the abort is a TV2 abort: one
        bump (KAFKA-19367), ``last_producer_epoch`` = the fenced epoch, client transaction
        version 2 and, at an exhausted epoch, ``next_producer_id`` (KAFKA-20090)."""
        for edge in ((self.state, S.PREPARE_EPOCH_FENCE), (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT)):
            if edge not in EDGES:
                raise IllegalTransition(f"{self.transactional_id}: fence from {self.state.name}")
        at_max = self.producer_epoch >= MAX_EPOCH
        if supports_epoch_bump(transaction_version):
            return self._prepare(
                S.PREPARE_ABORT,
                now_ms,
                producer_epoch=self.producer_epoch if at_max else self.producer_epoch + 1,
                last_producer_epoch=self.producer_epoch,
                next_producer_id=next_producer_id,
                client_transaction_version=transaction_version,
                epoch_fence=True,
                check_edge=False,
            )
        keep = self.has_failed_epoch_fence or at_max
        return self._prepare(
            S.PREPARE_ABORT,
            now_ms,
            producer_epoch=self.producer_epoch if keep else self.producer_epoch + 1,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            next_producer_id=NO_PRODUCER_ID,
            client_transaction_version=0,
            epoch_fence=True,
            check_edge=False,
        )

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """PrepareCommit/PrepareAbort -> CompleteCommit/CompleteAbort once every marker is
        written; the partition set is cleared."""
        if self.state not in PREPARE:
            raise IllegalTransition(f"{self.transactional_id}: complete from {self.state.name}")
        target = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        changes: dict[str, Any] = {"next_producer_id": NO_PRODUCER_ID}
        if supports_epoch_bump(self.client_transaction_version) and (
            self.next_producer_id != NO_PRODUCER_ID
        ):
            # TV2 epoch overflow: the markers carried (old id, Short.MaxValue); the producer
            # continues as (next id, 0). last_producer_epoch stays what the client last saw.
            changes.update(producer_id=self.next_producer_id, producer_epoch=0)
        return self._prepare(target, now_ms, partitions=frozenset(), **changes)

    def prepare_dead(self) -> TxnTransit:
        """transactional.id.expiration.ms: a tombstone; the id leaves the cache when durable."""
        return self._prepare(S.DEAD, self.txn_last_update_timestamp, partitions=frozenset())

    def _prepare(
        self,
        target: TxnState,
        now_ms: int,
        *,
        check_edge: bool = True,
        epoch_fence: bool = False,
        **changes: object,
    ) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTransition(
                f"{self.transactional_id}: prepare {target.name} while {self.pending_state.name}"
                " is pending"
            )
        client_tv = changes.get("client_transaction_version", self.client_transaction_version)
        assert isinstance(client_tv, int)
        if check_edge and not is_legal(self.state, target, client_tv):
            raise IllegalTransition(f"{self.transactional_id}: {self.state.name} -> {target.name}")
        fields: dict[str, object] = {
            "transactional_id": self.transactional_id,
            "producer_id": self.producer_id,
            "prev_producer_id": self.producer_id,  # Kafka: prev = the id before this transit
            "next_producer_id": self.next_producer_id,
            "producer_epoch": self.producer_epoch,
            "last_producer_epoch": self.last_producer_epoch,
            "txn_timeout_ms": self.txn_timeout_ms,
            "state": target,
            "partitions": self.partitions,
            "txn_start_timestamp": self.txn_start_timestamp,
            "txn_last_update_timestamp": now_ms,
            "client_transaction_version": self.client_transaction_version,
            "epoch_fence": epoch_fence,
        }
        fields.update(changes)
        transit = TxnTransit(**fields)  # type: ignore[arg-type]
        if transit.producer_id < 0:
            raise IllegalTransition(f"{self.transactional_id}: producer id {transit.producer_id}")
        if target is not S.DEAD and transit.producer_epoch < 0:
            raise IllegalTransition(f"{self.transactional_id}: epoch {transit.producer_epoch}")
        self.pending_state = target
        return transit

    # -- after the append ------------------------------------------------------------------

    def abandon(self, transit: TxnTransit) -> None:
        """The append failed: forget the pending move. A failed fence leaves the bumped epoch
        in memory (never returned to a client) so the old producer stays fenced."""
        if self.pending_state is not transit.state:
            raise IllegalTransition(f"{self.transactional_id}: abandon {transit.state.name}")
        self.pending_state = None
        if transit.epoch_fence and not supports_epoch_bump(transit.client_transaction_version):
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = NO_PRODUCER_EPOCH
            self.has_failed_epoch_fence = True

    def complete(self, transit: TxnTransit) -> None:
        """The record is durable: check Kafka's invariants, then take every field from it."""
        if self.pending_state is not transit.state or transit.state is S.DEAD:
            raise IllegalTransition(
                f"{self.transactional_id}: complete {transit.state.name}, pending"
                f" {self.pending_state and self.pending_state.name}"
            )
        if not self._valid(transit):
            raise IllegalTransition(f"{self.transactional_id}: {self} cannot become {transit}")
        self._overwrite(transit)

    def _valid(self, t: TxnTransit) -> bool:
        same_id = t.producer_id == self.producer_id
        same_epoch = same_id and t.producer_epoch == self.producer_epoch
        tv2 = supports_epoch_bump(t.client_transaction_version)
        match t.state:
            case S.EMPTY:
                bump = (same_id and t.producer_epoch == self.producer_epoch + 1) or (
                    t.producer_epoch == 0 and not same_id
                )
                return (same_epoch or bump) and not t.partitions and t.txn_start_timestamp == -1
            case S.ONGOING:
                return (
                    same_epoch
                    and self.partitions <= t.partitions
                    and t.txn_timeout_ms == self.txn_timeout_ms
                )
            case S.PREPARE_COMMIT | S.PREPARE_ABORT:
                fence = t.epoch_fence and same_id and t.producer_epoch >= self.producer_epoch
                # TV2: the epoch was bumped from the current one (Kafka's validProducerEpoch);
                # an empty abort (from a resting state) starts its transaction now.
                bumped = tv2 and same_id and t.last_producer_epoch == self.producer_epoch
                empty_abort = tv2 and t.state is S.PREPARE_ABORT and self.state in RESTING
                return (
                    (bumped if tv2 else (same_epoch or fence))
                    and t.partitions == self.partitions
                    and t.txn_timeout_ms == self.txn_timeout_ms
                    and (t.txn_start_timestamp == self.txn_start_timestamp or empty_abort)
                )
            case _:  # CompleteCommit / CompleteAbort
                rotated = (
                    tv2
                    and not same_id
                    and t.producer_epoch == 0
                    and t.prev_producer_id == self.producer_id
                    and t.last_producer_epoch == self.last_producer_epoch
                )
                return (
                    (same_epoch or rotated)
                    and t.txn_timeout_ms == self.txn_timeout_ms
                    and t.txn_start_timestamp != -1
                )

    def _overwrite(self, t: TxnTransit) -> None:
        self.producer_id = t.producer_id
        self.prev_producer_id = t.prev_producer_id
        self.next_producer_id = t.next_producer_id
        self.producer_epoch = t.producer_epoch
        self.last_producer_epoch = t.last_producer_epoch
        self.txn_timeout_ms = t.txn_timeout_ms
        self.state = t.state
        self.partitions = t.partitions
        self.txn_start_timestamp = t.txn_start_timestamp
        self.txn_last_update_timestamp = t.txn_last_update_timestamp
        self.client_transaction_version = t.client_transaction_version
        self.pending_state = None
        self.has_failed_epoch_fence = False

    def remove_partition(self, tp: TP) -> None:
        """A marker for ``tp`` is written (memory only, for DescribeTransactions: the partitions
        still lacking markers). Only while PrepareCommit/PrepareAbort."""
        if self.state not in PREPARE:
            raise IllegalTransition(f"{self.transactional_id}: remove {tp} in {self.state.name}")
        self.partitions = self.partitions - {tp}

    def copy(self) -> TxnMetadata:
        return dataclasses.replace(self)


class TxnCache(Mapping[str, TxnMetadata]):
    """The metadata of every transactional id one coordinator owns, keyed by id.

    ``apply`` is the single entry for durable records: live (the id has the transit pending:
    ``complete``) and at startup (``replay`` of the decoded log: overwrite or create). A
    tombstone removes the id either way.
    """

    def __init__(self) -> None:
        self._by_id: dict[str, TxnMetadata] = {}

    def __getitem__(self, transactional_id: str) -> TxnMetadata:
        return self._by_id[transactional_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def put_if_absent(self, meta: TxnMetadata) -> TxnMetadata:
        """Insert a newly created id (InitProducerId) before its first append; a concurrent
        creator wins (Kafka's putTransactionStateIfNotExists)."""
        return self._by_id.setdefault(meta.transactional_id, meta)

    def apply(self, transit: TxnTransit) -> None:
        """A record is durable: complete it live, or replay it at startup."""
        meta = self._by_id.get(transit.transactional_id)
        if transit.is_tombstone:
            self._by_id.pop(transit.transactional_id, None)
        elif meta is not None and meta.pending_state is not None:
            meta.complete(transit)
        else:
            self._by_id[transit.transactional_id] = TxnMetadata.from_transit(transit)

    def replay(self, records: Iterable[TxnTransit]) -> None:
        for transit in records:
            self.apply(transit)
