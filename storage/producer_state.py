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

Replay (``replay``, Kafka's origin "replication"): at start-up the state is rebuilt from a
snapshot plus the batch headers of the log after it; replay applies the same update with no
checks, so a state rebuilt from the log equals the state the live checks built. Changing the
epoch clears the retained batches. Control batches (transaction markers, written by a later
issue) end the producer's open transaction and move its epoch; their coordinator epoch lives in
the record body and is set by the marker path, not by header replay.

Expiration (``remove_expired``): entries whose last timestamp is ``producer.id.expiration.ms``
or more before now and that have no open transaction are dropped (Kafka's
``isProducerExpired``). The last timestamp is the batch's max timestamp, as in Kafka (so a
producer whose clock runs far behind expires early; that only loses dedupe state of an idle
producer, which the KIP-360 "unknown producer: accept any sequence" rule tolerates).

Deliberate differences from Kafka: the snapshot keeps all retained batches per producer, not
only the newest (``producer_snapshot.py``), so the dedupe window survives a restart whole.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum

from kio.schema.errors import ErrorCode

from wire.records import BatchHeader

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_OFFSET = -1
INT32_MAX = 2**31 - 1


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The batch's last sequence: base + delta, wrapping after 2^31-1 to 0."""
    return (base_sequence + last_offset_delta) % (INT32_MAX + 1)


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """What is retained of one appended batch of a producer."""

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
    current_txn_first_offset: int = NO_OFFSET  # transactions (later issue): -1 = none open
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

    def add_batch(self, epoch: int, batch: BatchMetadata) -> None:
        self.set_epoch(epoch)
        self.batches.append(batch)
        self.last_timestamp = batch.timestamp


class Check(Enum):
    DUPLICATE = "an exact duplicate of a retained batch"
    ACCEPT = "append"


@dataclass(frozen=True, slots=True)
class BatchFacts:
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


@dataclass(frozen=True, slots=True)
class ProducerAppendInfo:
    """An accepted client batch, waiting for its append to succeed."""

    producer_id: int
    producer_epoch: int
    first_seq: int
    last_seq: int
    last_offset_delta: int
    max_timestamp: int
    is_transactional: bool = False


class ProducerStateManager:
    """The producer entries of one partition."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}

    def __len__(self) -> int:
        return len(self.producers)

    def __iter__(self) -> Iterator[ProducerStateEntry]:
        return iter(list(self.producers.values()))

    def get(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def prepare_update(
        self, header: BatchHeader, max_timestamp: int | None = None
    ) -> ProducerAppendInfo | BatchMetadata | ErrorCode:
        """Check a client batch with a producer id (nothing changes). ``max_timestamp``
        overrides the header's (LogAppendTime topics pass the append time)."""
        pid, epoch, first = header.producer_id, header.producer_epoch, header.base_sequence
        last = last_sequence(first, header.last_offset_delta)
        facts = BatchFacts(self.producers.get(pid), epoch, first, last)
        outcome = check_append(facts)
        if outcome is Check.DUPLICATE:
            dup = facts.duplicate
            assert dup is not None
            return dup
        if isinstance(outcome, ErrorCode):
            return outcome
        ts = header.max_timestamp if max_timestamp is None else max_timestamp
        return ProducerAppendInfo(
            pid, epoch, first, last, header.last_offset_delta, ts, header.is_transactional
        )

    def update(self, info: ProducerAppendInfo, first_offset: int) -> None:
        """Apply an accepted batch once it is in the log at ``first_offset``."""
        entry = self.producers.get(info.producer_id)
        if entry is None:
            entry = self.producers[info.producer_id] = ProducerStateEntry(info.producer_id)
        entry.add_batch(
            info.producer_epoch,
            BatchMetadata(
                info.first_seq,
                info.last_seq,
                first_offset,
                first_offset + info.last_offset_delta,
                info.max_timestamp,
            ),
        )
        if info.is_transactional and entry.current_txn_first_offset == NO_OFFSET:
            entry.current_txn_first_offset = first_offset

    def replay(self, header: BatchHeader) -> None:
        """Re-apply a batch read back from the log (no checks). Batches without a producer id
        are ignored."""
        if header.producer_id < 0:
            return
        if header.is_control:
            entry = self.producers.setdefault(
                header.producer_id, ProducerStateEntry(header.producer_id)
            )
            entry.set_epoch(header.producer_epoch)
            entry.current_txn_first_offset = NO_OFFSET
            entry.last_timestamp = header.max_timestamp
            return
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
        return gone

    def load(self, entries: list[ProducerStateEntry]) -> None:
        self.producers = {e.producer_id: e for e in entries}
