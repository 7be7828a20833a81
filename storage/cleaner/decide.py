"""What a cleaning pass keeps: Kafka's compaction rules as pure functions over parsed batches.

Theory of operation
-------------------
A pass over a compacted partition (``runner.py`` drives it) looks at the log in two sweeps,
both in offset order, exactly as Kafka's ``Cleaner.doClean`` does:

1. **Key map** (``build_key_map``) over the *dirty* section [first dirty offset, upper bound):
   key -> offset of its latest record. The upper bound is never past the last stable offset,
   so no record of an open transaction is ever looked at. Records of aborted transactions are
   not entered (they never count as a key's latest value). The map may fill up (a bounded
   number of keys per pass); it then covers [start, ``map_end``) and the rest waits for the
   next pass.
2. **Filter** (``decide_batch``) over every segment from the log start up to the one holding
   ``map_end - 1``. Per batch, in order:

   * ``TxnTracker`` (Kafka's ``CleanedTransactionMetadata``) says whether the batch is
     *discardable*: a data batch of an aborted transaction (known from the aborted-transaction
     index), or a COMMIT/ABORT marker none of whose transaction's batches was seen in this
     sweep (the sweep starts at the log start, so "not seen" means "gone from the log").
   * A data batch's records are kept unless the batch is discardable, or the record has no key
     (Kafka counts it invalid and drops it), or a later offset for its key is in the map, or it
     is a tombstone (null value) whose batch's delete horizon has passed. Records at or past
     ``map_end`` are always kept.
   * A marker is kept until it is discardable *and* its batch's delete horizon has passed.
   * A retained batch that holds a tombstone, or a discardable marker, and has no delete
     horizon yet is rewritten with horizon = now + ``delete.retention.ms`` (attribute bit 6;
     ``baseTimestamp`` then holds the horizon): tombstones and markers outlive the first pass
     that could drop them by ``delete.retention.ms``, so a consumer that read the older value
     (or the transaction's data) sees the tombstone (the marker) too.
   * The last data batch of a producer that is still active (Kafka's
     ``isBatchLastRecordOfProducer``; for a producer with only markers, its last marker) is
     never removed: if all its records go, an empty batch header stays, with its offsets and
     sequence numbers, so producer state rebuilt from the log stays right.

   Offsets never change: a rewritten batch keeps its base and last offset (Kafka's
   ``overrideLastOffset``), so a batch may hold fewer records than its offset range, and
   segments end up with gaps. Readers and clients handle both.

Aborted-transaction index (KAFKA-13727): an entry is dropped (``TxnTracker.dropped``) exactly
when its marker is read with none of its data seen, i.e. when the data is already gone; until
then the entry stays. Its marker then stays one more ``delete.retention.ms`` with no entry
(clients tolerate an ABORT marker without an entry). So an entry never outlives its marker,
which would make consumers skip the producer's later committed transactions.

Everything here is a function of its arguments and ``now_ms``: no I/O, no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from storage.producer_state import AbortedTxn
from wire.records import ATTR_DELETE_HORIZON, BatchHeader, parse_control_record_type

ABORT, COMMIT = 0, 1


@dataclass(slots=True)
class RecordView:
    """What the cleaner needs of a record, and where it lies in its batch's uncompressed
    payload (so a kept record is copied, not re-encoded)."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    tombstone: bool  # null value
    start: int
    end: int


@dataclass(slots=True)
class Batch:
    """One stored batch, parsed: its header, its records, its exact bytes, and its records'
    uncompressed bytes."""

    header: BatchHeader
    records: list[RecordView]
    raw: bytes
    payload: bytes

    @property
    def control_type(self) -> int:
        """ABORT (0), COMMIT (1), another control type, or -1 (not a control batch)."""
        if not self.header.is_control or not self.records:
            return -1
        return parse_control_record_type(self.records[0].key)

    @property
    def delete_horizon(self) -> int | None:
        h = self.header
        return h.base_timestamp if h.attributes & ATTR_DELETE_HORIZON else None

    def record_timestamp(self, r: RecordView) -> int:
        h = self.header
        return h.max_timestamp if h.log_append_time else h.base_timestamp + r.timestamp_delta


@dataclass(frozen=True, slots=True)
class LastRecord:
    """Kafka's ``LastRecord`` of an active producer: the last offset of its last data batch
    (None if it wrote only markers) and its epoch."""

    last_data_offset: int | None
    producer_epoch: int


class TxnTracker:
    """Transactions met during one sweep (Kafka's ``CleanedTransactionMetadata``).

    Built from the partition's aborted-transaction entries; fed every batch in offset order.
    """

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda a: (a.first_offset, a.last_offset))
        self._next = 0
        self._aborted: dict[int, tuple[AbortedTxn, bool]] = {}  # pid -> (entry, data seen)
        self._committed: set[int] = set()  # pids with a (non-aborted) transaction under way
        self.dropped: list[AbortedTxn] = []  # entries whose marker came with no data left

    def _consume_up_to(self, offset: int) -> None:
        while self._next < len(self._pending) and self._pending[self._next].first_offset <= offset:
            entry = self._pending[self._next]
            self._next += 1
            self._aborted.setdefault(entry.producer_id, (entry, False))

    def on_data(self, producer_id: int, transactional: bool, last_offset: int) -> bool:
        """A data batch; True if it belongs to an aborted transaction (discard it)."""
        self._consume_up_to(last_offset)
        if not transactional:
            return False
        if (known := self._aborted.get(producer_id)) is not None:
            self._aborted[producer_id] = (known[0], True)
            return True
        self._committed.add(producer_id)
        return False

    def on_control(self, producer_id: int, control_type: int, last_offset: int) -> bool:
        """A control batch; True if it may go (no batch of its transaction is left)."""
        self._consume_up_to(last_offset)
        if control_type == ABORT:
            known = self._aborted.pop(producer_id, None)
            if known is not None and known[1]:
                return False
            if known is not None:
                self.dropped.append(known[0])
            return True
        if control_type == COMMIT:
            if producer_id in self._committed:
                self._committed.discard(producer_id)
                return False
            return True
        return False


def build_key_map(
    batches: Iterable[Batch],
    tracker: TxnTracker,
    start: int,
    key_map: dict[bytes, int],
    max_entries: int,
) -> int | None:
    """Enter the latest offset of every key at or after ``start`` (aborted data excluded).

    Returns None if every batch fit, else the base offset of the first batch that did not
    (the map then covers [start, that offset))."""
    for b in batches:
        h = b.header
        if h.last_offset < start:
            continue
        if h.is_control:
            tracker.on_control(h.producer_id, b.control_type, h.last_offset)
            continue
        if tracker.on_data(h.producer_id, h.is_transactional, h.last_offset):
            continue
        if len(key_map) + len(b.records) > max_entries and key_map:
            return max(h.base_offset, start)
        for r in b.records:
            offset = h.base_offset + r.offset_delta
            if r.key is not None and offset >= start:
                key_map[r.key] = offset
    return None


class Action(enum.Enum):
    KEEP = "keep"  # the batch stays byte for byte
    REWRITE = "rewrite"  # rebuilt with ``Decision.records`` (maybe none) and ``horizon``
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    records: list[RecordView] = field(default_factory=list)
    horizon: int | None = None  # the delete horizon the rewritten batch carries


@dataclass(frozen=True, slots=True)
class CleanContext:
    key_map: Mapping[bytes, int]
    map_end: int  # records at or past this offset are kept unconditionally
    active: Mapping[int, LastRecord]  # producer id -> its last record, for active producers
    now_ms: int
    delete_retention_ms: int


def _last_of_producer(b: Batch, active: Mapping[int, LastRecord]) -> bool:
    last = active.get(b.header.producer_id)
    if last is None:
        return False
    if last.last_data_offset is not None:
        return b.header.last_offset == last.last_data_offset
    return b.header.is_control and b.header.producer_epoch == last.producer_epoch


def _kept_records(b: Batch, ctx: CleanContext) -> list[RecordView]:
    """Kafka's ``shouldRetainRecord`` for each record of a data batch: at or past
    ``map_end`` always; else it needs a key, no later offset for that key in the map, and a
    value, or a delete horizon not yet passed (the cleaner's inner loop, so inlined)."""
    base, map_end, key_map = b.header.base_offset, ctx.map_end, ctx.key_map
    horizon = b.delete_horizon
    keep_tombstones = horizon is None or ctx.now_ms < horizon
    kept = []
    for r in b.records:
        offset = base + r.offset_delta
        if offset >= map_end or (
            r.key is not None
            and offset >= key_map.get(r.key, -1)
            and (keep_tombstones or not r.tombstone)
        ):
            kept.append(r)
    return kept


def decide_batch(b: Batch, tracker: TxnTracker, ctx: CleanContext) -> Decision:
    """What happens to ``b`` (Kafka's ``checkBatchRetention`` + ``shouldRetainRecord`` +
    ``MemoryRecords.filterTo``). Call for every batch of the sweep, in offset order."""
    h = b.header
    horizon = b.delete_horizon
    if h.is_control:
        discardable = tracker.on_control(h.producer_id, b.control_type, h.last_offset)
        drop_all = discardable and horizon is not None and horizon <= ctx.now_ms
        kept = [] if drop_all else list(b.records)
    else:
        discardable = tracker.on_data(h.producer_id, h.is_transactional, h.last_offset)
        drop_all = discardable
        kept = [] if drop_all else _kept_records(b, ctx)
    if not kept:
        if h.producer_id >= 0 and _last_of_producer(b, ctx.active):
            if not b.records:
                return Decision(Action.KEEP)  # already an empty header
            return Decision(Action.REWRITE, [], None)
        return Decision(Action.DELETE)
    tombstones = not h.is_control and any(r.tombstone for r in kept)
    empty_txn_marker = h.is_control and discardable
    if (tombstones or empty_txn_marker) and horizon is None:
        return Decision(Action.REWRITE, kept, ctx.now_ms + ctx.delete_retention_ms)
    if len(kept) == len(b.records):
        return Decision(Action.KEEP)
    return Decision(Action.REWRITE, kept, horizon)
