"""Per-partition producer state: the idempotence checks of spec eos.md §3 (Kafka's
``ProducerStateManager``, ``ProducerAppendInfo``, ``ProducerStateEntry``, ``BatchMetadata``).

Theory of operation
-------------------
For every producer id that wrote to a partition the partition keeps one *entry*: the producer's
epoch, the metadata of its last ``NUM_BATCHES_TO_RETAIN`` (5) batches of that epoch (first/last
sequence, first/last offset, max timestamp), the last timestamp (for expiration) and two fields
that belong to transactions: the coordinator epoch of the last marker and the first offset of
the transaction it has open on this partition (-1: none). This module is pure: no trio, no
clock, no storage. ``storage/partition.py`` drives it in Kafka's order, under the partition lock:

1. ``prepare_update(header)`` checks a client batch against the entry and returns a
   ``ProducerAppendInfo`` (accepted), a ``BatchMetadata`` (an exact duplicate of a retained
   batch: answer success with its original offsets, append nothing) or an ``ErrorCode``.
   Nothing changes here.
2. the batch is appended to the log;
3. ``update(info, first_offset)`` applies the accepted append. A failed append never reaches it.

The checks, in order (``APPEND_CHECKS``, the first row that matches decides)::

    condition                                                      outcome
    same epoch and (first_seq, last_seq) equal a retained batch    DUPLICATE (original offsets)
    batch epoch < entry epoch                                      INVALID_PRODUCER_EPOCH
    no entry, or the entry has no epoch (KIP-360)                  ACCEPT, any sequence
    batch epoch > entry epoch, first_seq == 0                      ACCEPT (epoch bump)
    batch epoch > entry epoch, first_seq != 0                      OUT_OF_ORDER_SEQUENCE_NUMBER
    same epoch, first_seq == last_seq + 1 (2^31-1 wraps to 0)      ACCEPT
    same epoch, anything else (gap, retry outside the window)      OUT_OF_ORDER_SEQUENCE_NUMBER

"last_seq" is the newest retained batch's last sequence, -1 when none is retained for the
epoch, so the first batch after a marker that moved the entry to this epoch must be sequence 0.

Transactions (spec §3.2 step 6, §4.10, §5.1-5.2): a plain batch of a producer with a
transaction open here is INVALID_TXN_STATE; the first transactional batch opens one at its
base offset (``ongoing``: producer id -> first offset, whose minimum bounds the LSO).
``check_marker`` refuses a marker whose epoch is below the producer's (INVALID_PRODUCER_EPOCH)
or whose coordinator epoch is below the last marker's (TRANSACTION_COORDINATOR_FENCED);
``complete_txn`` applies one: closes the transaction, takes the marker's epoch (a new epoch
clears the retained batches, the same one keeps them) and coordinator epoch, and for an ABORT
of a transaction that wrote data here appends (producer id, first offset, marker offset, LSO
after the abort) to the aborted-transaction index. ``prepare_update(coordinator=True)`` is
Kafka's AppendOrigin.COORDINATOR (TxnOffsetCommit's batch): epoch checked, no duplicate or
sequence check.

Replay (``replay``, Kafka's origin "replication"): at start-up the state is rebuilt from a
snapshot plus the batch headers of the log after it; replay applies the same update with no
checks, so a state rebuilt from the log equals the state the live checks built. Changing the
epoch clears the retained batches. A control batch is replayed with its marker (commit or
abort, coordinator epoch), which the caller reads from the control record; other control
types are ignored.

Expiration (``remove_expired``): entries whose last timestamp is ``producer.id.expiration.ms``
or more before now and that have no open transaction are dropped (Kafka's
``isProducerExpired``). The last timestamp is the batch's max timestamp, as in Kafka (so a
producer whose clock runs far behind expires early; that only loses dedupe state of an idle
producer, which the KIP-360 "unknown producer: accept any sequence" rule tolerates).

Verification state (Kafka's ``VerificationStateEntry``, KIP-890): ``start_verification`` is
called for a client's transactional batch of a producer with no transaction open here at the
batch's epoch, before the transaction coordinator is asked (Produce v12+: before the implicit
add; v3-11: before the verification), and keeps per producer the lowest sequence seen (reset
by a higher epoch) and whether the request speaks transaction version 2 (``supports_epoch_bump``,
Produce v12+; fixed by the first request that made the entry). ``check_verification`` then
refuses, after the other checks accepted the batch, OUT_OF_ORDER_SEQUENCE_NUMBER for (Kafka's
``ProducerAppendInfo.checkSequence``): a TV2 entry, no batch of the producer retained here
and a first sequence other than 0; a first sequence above the lowest seen (a lower batch
whose verification failed is being retried). A transactional batch written clears the entry,
so does a marker, except a TV2 entry's at its own epoch (the next transaction's verification
began before the previous transaction's marker); ``remove_expired`` drops entries made
``producer.id.expiration.ms`` ago or earlier. The usual append pays one test of an empty dict.

Deliberate differences from Kafka: the snapshot keeps all retained batches per producer, not
only the newest (``producer_snapshot.py``), so the dedupe window survives a restart whole.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from wire.records import BatchHeader

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_OFFSET = -1
INT32_MAX = 2**31 - 1


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The batch's last sequence: base + delta, wrapping after 2^31-1 to 0 (NO_SEQUENCE stays
    NO_SEQUENCE: coordinator batches carry none)."""
    if base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return (base_sequence + last_offset_delta) % (INT32_MAX + 1)


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class BatchMetadata(NamedTuple):
    """What is retained of one appended batch of a producer. This and the other per-batch
    values below are named tuples: a frozen dataclass costs ~1 µs more to build, per append."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int  # the batch's max timestamp (the append time on LogAppendTime topics)


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    coordinator_epoch: int = -1
    current_txn_first_offset: int = NO_OFFSET  # the open transaction's first offset, -1 = none
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else NO_OFFSET

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            self.producer_epoch = epoch
            self.batches.clear()


@dataclass(slots=True)
class VerificationStateEntry:
    """A producer's verification in progress on the partition (Kafka's
    ``VerificationStateEntry``): when it began, the lowest sequence seen at ``epoch``, and
    whether it is a transaction version 2 one."""

    timestamp: int
    lowest_sequence: int
    epoch: int
    supports_epoch_bump: bool

    def update(self, sequence: int, epoch: int) -> None:
        """Kafka's ``maybeUpdateLowestSequenceAndEpoch``."""
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence


class Check(Enum):
    DUPLICATE = "an exact duplicate of a retained batch"
    ACCEPT = "append"


class BatchFacts(NamedTuple):
    """What the checks look at: the batch's producer fields against the entry (or None)."""

    entry: ProducerStateEntry | None
    epoch: int
    first_seq: int
    last_seq: int

    @property
    def duplicate(self) -> BatchMetadata | None:
        e = self.entry
        return None if e is None else e.find_duplicate(self.epoch, self.first_seq, self.last_seq)


def _epoch(f: BatchFacts) -> int:
    return NO_PRODUCER_EPOCH if f.entry is None else f.entry.producer_epoch


# Spec §3.2 steps 3-5, in order; the first row whose condition holds decides.
APPEND_CHECKS: tuple[tuple[str, Callable[[BatchFacts], bool], Check | ErrorCode], ...] = (
    ("exact duplicate of a retained batch", lambda f: f.duplicate is not None, Check.DUPLICATE),
    ("stale epoch", lambda f: f.epoch < _epoch(f), ErrorCode.invalid_producer_epoch),
    ("unknown producer (KIP-360)", lambda f: _epoch(f) == NO_PRODUCER_EPOCH, Check.ACCEPT),
    ("epoch bump from 0", lambda f: f.epoch > _epoch(f) and f.first_seq == 0, Check.ACCEPT),
    (
        "epoch bump not from 0",
        lambda f: f.epoch > _epoch(f),
        ErrorCode.out_of_order_sequence_number,
    ),
    (
        "next in sequence",
        lambda f: in_sequence(f.entry.last_seq if f.entry else NO_SEQUENCE, f.first_seq),
        Check.ACCEPT,
    ),
    ("gap or retry outside the window", lambda f: True, ErrorCode.out_of_order_sequence_number),
)


def check_append(facts: BatchFacts) -> Check | ErrorCode:
    for _, condition, outcome in APPEND_CHECKS:
        if condition(facts):
            return outcome
    raise AssertionError("the last row always matches")


class ProducerAppendInfo(NamedTuple):
    """An accepted client batch, waiting for its append to succeed."""

    producer_id: int
    producer_epoch: int
    first_seq: int
    last_seq: int
    last_offset_delta: int
    max_timestamp: int
    is_transactional: bool = False


# built from a tuple: ~0.1 µs less than through the named tuple's __new__ (twice per append)
_new_info = ProducerAppendInfo._make
_new_batch = BatchMetadata._make


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One entry of the aborted-transaction index (spec §5.2, Kafka's ``AbortedTxn``)."""

    producer_id: int
    first_offset: int  # the transaction's first data batch on this partition
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int  # the LSO once the abort completed


class ProducerStateManager:
    """The producer entries of one partition, its ongoing transactions and its
    aborted-transaction index."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.aborted: list[AbortedTxn] = []  # in abort order (not first-offset order)
        self.verifying: dict[int, VerificationStateEntry] = {}  # producer id -> its entry

    def __len__(self) -> int:
        return len(self.producers)

    def __iter__(self) -> Iterator[ProducerStateEntry]:
        return iter(list(self.producers.values()))

    def get(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    # -- data batches ------------------------------------------------------------------------

    def prepare_update(
        self, header: BatchHeader, max_timestamp: int | None = None, *, coordinator: bool = False
    ) -> ProducerAppendInfo | BatchMetadata | ErrorCode:
        """Check a client batch with a producer id (nothing changes). ``max_timestamp``
        overrides the header's (LogAppendTime topics pass the append time). ``coordinator``:
        Kafka's AppendOrigin.COORDINATOR (TxnOffsetCommit's batch): only the epoch is checked,
        no duplicate or sequence check."""
        pid, epoch, first = header.producer_id, header.producer_epoch, header.base_sequence
        delta = header.last_offset_delta
        entry = self.producers.get(pid)
        if not coordinator and entry is not None and epoch == entry.producer_epoch:
            # the usual batch: in sequence and no duplicate means APPEND_CHECKS' ACCEPT, without
            # walking the table (in_sequence and find_duplicate, inline)
            batches = entry.batches
            newest = batches[-1].last_seq if batches else NO_SEQUENCE
            usual = first == newest + 1 or (first == 0 and newest == INT32_MAX)
            last = (first + delta) % (INT32_MAX + 1)  # first >= 0 when usual: last_sequence
            if usual:
                for b in batches:
                    if b.first_seq == first and b.last_seq == last:
                        usual = False
                        break
        else:
            usual = False
        if not usual:
            last = last_sequence(first, delta)
            if coordinator:
                if entry is not None and epoch < entry.producer_epoch:
                    return ErrorCode.invalid_producer_epoch
            else:
                facts = BatchFacts(entry, epoch, first, last)
                outcome = check_append(facts)
                if outcome is Check.DUPLICATE:
                    dup = facts.duplicate
                    assert dup is not None
                    return dup
                if isinstance(outcome, ErrorCode):
                    return outcome
        transactional = header.is_transactional
        if entry is not None and entry.current_txn_first_offset != NO_OFFSET and not transactional:
            return ErrorCode.invalid_txn_state  # "Expected transactional write from producer"
        ts = header.max_timestamp if max_timestamp is None else max_timestamp
        return _new_info((pid, epoch, first, last, delta, ts, transactional))

    def start_verification(
        self, producer_id: int, sequence: int, epoch: int, supports_epoch_bump: bool, now_ms: int
    ) -> None:
        """Kafka's ``UnifiedLog.maybeStartTransactionVerification`` for a transactional batch of
        a producer with no transaction open here at ``epoch``: make or update the producer's
        entry; none for a stale epoch (Kafka throws INVALID_PRODUCER_EPOCH there, and the
        append refuses the batch for it)."""
        entry = self.producers.get(producer_id)
        if entry is not None and epoch < entry.producer_epoch:
            return
        found = self.verifying.get(producer_id)
        if found is None:
            self.verifying[producer_id] = VerificationStateEntry(
                now_ms, sequence, epoch, supports_epoch_bump
            )
        else:
            found.update(sequence, epoch)

    def check_verification(self, info: ProducerAppendInfo) -> ErrorCode:
        """Kafka's ``ProducerAppendInfo.checkSequence`` against the producer's verification
        entry (see the theory above): OUT_OF_ORDER_SEQUENCE_NUMBER or NONE."""
        found = self.verifying.get(info.producer_id)
        if found is None:
            return ErrorCode.none
        first = info.first_seq
        if found.supports_epoch_bump and first != 0:
            entry = self.producers.get(info.producer_id)
            if entry is None or not entry.batches:
                return ErrorCode.out_of_order_sequence_number  # "Expected sequence 0 ..."
        if first > found.lowest_sequence:
            return ErrorCode.out_of_order_sequence_number  # "... (earliest seen sequence)"
        return ErrorCode.none

    def update(self, info: ProducerAppendInfo, first_offset: int) -> None:
        """Apply an accepted batch once it is in the log at ``first_offset``."""
        pid, epoch, first_seq, last_seq, delta, ts, transactional = info
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerStateEntry(pid)
        if epoch != entry.producer_epoch:  # (set_epoch's own test: skips the call)
            entry.set_epoch(epoch)
        entry.batches.append(
            _new_batch((first_seq, last_seq, first_offset, first_offset + delta, ts))
        )
        entry.last_timestamp = ts
        if transactional:
            if entry.current_txn_first_offset == NO_OFFSET:
                entry.current_txn_first_offset = first_offset
                self.ongoing[pid] = first_offset
            if self.verifying:
                self.verifying.pop(pid, None)

    # -- transaction markers -----------------------------------------------------------------

    def check_marker(
        self, producer_id: int, epoch: int, coordinator_epoch: int, transaction_version: int = 0
    ) -> ErrorCode:
        """Spec §4.10, partition-leader side. A TV0/TV1 marker may carry the entry's epoch; a
        marker that says it is TV2 (WriteTxnMarkers v2's ``transaction_version``) must carry a
        greater one, the coordinator having bumped it (Kafka's
        ``ProducerAppendInfo.checkProducerEpoch``), except that an equal one with no transaction
        open here is the retry of a marker already written, and written again (KAFKA-19999,
        Kafka 4.2)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return ErrorCode.none
        if transaction_version >= 2:
            stale = epoch < entry.producer_epoch or (
                epoch == entry.producer_epoch and entry.current_txn_first_offset != NO_OFFSET
            )
        else:
            stale = epoch < entry.producer_epoch
        if stale:
            return ErrorCode.invalid_producer_epoch
        if coordinator_epoch < entry.coordinator_epoch:
            return ErrorCode.transaction_coordinator_fenced
        return ErrorCode.none

    def complete_txn(
        self,
        producer_id: int,
        epoch: int,
        commit: bool,
        coordinator_epoch: int,
        marker_offset: int,
        timestamp: int,
    ) -> AbortedTxn | None:
        """Apply a COMMIT/ABORT marker written at ``marker_offset`` (no checks). Returns the
        aborted-index entry it added (ABORT of a transaction that wrote data here), else None."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        if self.verifying:  # Kafka's updateProducers: kept for the TV2 next transaction only
            found = self.verifying.get(producer_id)
            if found is not None and not (found.supports_epoch_bump and found.epoch == epoch):
                del self.verifying[producer_id]
        first = entry.current_txn_first_offset
        entry.set_epoch(epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.current_txn_first_offset = NO_OFFSET
        entry.last_timestamp = timestamp
        self.ongoing.pop(producer_id, None)
        if first == NO_OFFSET or commit:
            return None
        lso = min(self.ongoing.values(), default=marker_offset + 1)
        aborted = AbortedTxn(producer_id, first, marker_offset, lso)
        self.aborted.append(aborted)
        return aborted

    # -- reads -------------------------------------------------------------------------------

    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest open transaction, None if none is open."""
        return min(self.ongoing.values(), default=None)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of every aborted transaction overlapping
        [fetch_offset, upper_bound) (spec §5.3), in index order."""
        return [
            (a.producer_id, a.first_offset)
            for a in self.aborted
            if a.last_offset >= fetch_offset and a.first_offset < upper_bound
        ]

    def truncate_aborted(self, log_start_offset: int) -> None:
        """Forget aborted transactions that ended below the log start offset."""
        self.aborted = [a for a in self.aborted if a.last_offset >= log_start_offset]

    # -- replay, expiration, load ------------------------------------------------------------

    def replay(
        self, header: BatchHeader, marker: tuple[bool, int] | None = None
    ) -> AbortedTxn | None:
        """Re-apply a batch read back from the log (no checks). Batches without a producer id
        are ignored. A control batch needs ``marker`` = (commit, coordinator epoch) from its
        record; control batches of other kinds (None) are ignored, as Kafka does."""
        if header.producer_id < 0:
            return None
        if header.is_control:
            if marker is None:
                return None
            commit, coordinator_epoch = marker
            return self.complete_txn(
                header.producer_id,
                header.producer_epoch,
                commit,
                coordinator_epoch,
                header.base_offset,
                header.max_timestamp,
            )
        self.update(
            ProducerAppendInfo(
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                last_sequence(header.base_sequence, header.last_offset_delta),
                header.last_offset_delta,
                header.max_timestamp,
                header.is_transactional,
            ),
            header.base_offset,
        )
        return None

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Drop idle entries without an open transaction; returns the ids dropped."""
        gone = [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset == NO_OFFSET
            and now_ms - e.last_timestamp >= expiration_ms
        ]
        for pid in gone:
            del self.producers[pid]
        if self.verifying:  # lingering verifications (Kafka's removeExpiredProducers)
            self.verifying = {
                pid: v for pid, v in self.verifying.items() if now_ms - v.timestamp < expiration_ms
            }
        return gone

    def load(
        self, entries: list[ProducerStateEntry], aborted: list[AbortedTxn] | None = None
    ) -> None:
        self.producers = {e.producer_id: e for e in entries}
        self.ongoing = {
            e.producer_id: e.current_txn_first_offset
            for e in entries
            if e.current_txn_first_offset != NO_OFFSET
        }
        self.aborted = list(aborted or [])
