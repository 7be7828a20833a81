"""A partition as the request handlers see it: its log plus the broker-side rules around it.

Theory of operation
-------------------
Appends happen in Kafka's order: the handler validated the batch (``wire.records``); here the
next offset and the leader epoch are written into its first 16 bytes (of a copy of the batch,
outside the CRC), the bytes go to the log, and only then do the high watermark move and
fetchers waiting for data wake. A per-partition lock keeps offset assignment and the write
together even when the backend awaits an fsync, so two produce requests can never be given the
same offsets.

Idempotent producers (spec eos.md §3): a batch with a producer id is checked against the
partition's ``ProducerStateManager`` under the lock *before* anything is written; an exact
duplicate of one of the producer's last 5 batches is answered with its original offsets and
nothing is appended; a refused batch gets its ``ErrorCode``. The producer state is updated only
after the log append returned, so a failed write leaves it untouched.

Producer-state durability: a snapshot (``storage/producer_snapshot.py``) is written when the
log rolls (taken at the new segment's base offset, before the batch that caused the roll is
applied), at the high watermark before ``delete_records`` moves the log start offset (so
producers whose batches it deleted survive a crash), and by ``take_snapshot`` at clean
shutdown. ``load_producer_state`` rebuilds the state when the partition is opened: the
newest valid snapshot between the log start and end offsets, then a replay of the batch
headers after it (records are never decoded). Only the two newest snapshots are kept.

kafkad is a single-replica broker: the high watermark is the log end offset once the append
that moved it is complete. As in Kafka (whose single-replica high watermark moves after
``appendAsLeader`` returned), it moves only after the write, the fsync the flush policy asks
for (``flush.messages=1``) and the producer-state update: a reader never sees data a power
loss could take back after an acknowledgement was promised, nor a transaction's first batch
before the producer state knows the transaction is open (the LSO would not hold it back).

Transactions (spec eos.md §3.2 step 6, §4.10, §5.1-5.2): the first transactional batch of a
producer opens a transaction at its base offset (after the KIP-890 ``verify`` callback agreed);
the producer state keeps the open transactions (``ProducerStateManager.ongoing``), and the last
stable offset is min(first offset of the earliest open one, high watermark), never below the
log start offset (retention is bounded by the high watermark, as in Kafka, so it may delete the
segment a hanging transaction began in). ``write_marker``
appends a COMMIT/ABORT control batch, closes the producer's transaction, adds an
aborted-transaction index entry for an ABORT of a transaction that wrote data here, and wakes
long polls (a read_committed fetch waits for the LSO, which only markers move past an open
transaction). The aborted index is part of the producer snapshot (format version 2) and is
rebuilt by the replay from the markers in the log tail (only control records are read, never
data records); retention drops entries that end below the new log start offset.

Log cleaning (``storage/cleaner/``) changes no offset and reads only below the LSO; when it
finds an aborted transaction's data gone it calls ``forget_aborted`` before swapping segments,
so an index entry never outlives its marker. ``update_config`` applies altered topic configs.

Long polls: a Fetch that wants more data registers a ``trio.Event`` with every partition it
reads; each append sets (and forgets) the events registered with it.
"""

from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Callable, Collection

import trio
from kio.schema.errors import ErrorCode

from storage.api import LogConfig, PartitionLog, StorageError, TimestampLookup, TopicPartition
from storage.append_lock import FastLock
from storage.producer_snapshot import SnapshotError, encode_snapshot, read_snapshot
from storage.producer_state import (
    AbortedTxn,
    BatchMetadata,
    ProducerAppendInfo,
    ProducerStateEntry,
    ProducerStateManager,
)
from wire.records import (
    BatchHeader,
    RecordBatchError,
    build_control_batch,
    iter_batches,
    read_end_txn_marker,
    set_max_timestamp,
)

log = logging.getLogger("kafkad.partition")

_ATTRS = struct.Struct(">h")
_TS = struct.Struct(">q")
_CRC = struct.Struct(">I")
_PREFIX = struct.Struct(">qii")  # base offset, batch length, partition leader epoch
LEADER_EPOCH = 0  # one node, never re-elected: every partition stays at leader epoch 0
NO_EPOCH = -1  # "no leader epoch" in requests (current_leader_epoch, leader_epoch)


def leader_epoch_error(current_leader_epoch: int) -> ErrorCode | None:
    """Kafka's fencing of a request carrying the leader epoch its sender knows (KIP-320): a
    higher one than the partition's is UNKNOWN_LEADER_EPOCH, a lower one FENCED_LEADER_EPOCH;
    -1 is not checked."""
    if current_leader_epoch in (NO_EPOCH, LEADER_EPOCH):
        return None
    if current_leader_epoch > LEADER_EPOCH:
        return ErrorCode.unknown_leader_epoch
    return ErrorCode.fenced_leader_epoch


SNAPSHOTS_KEPT = 2
REPLAY_READ_BYTES = 8 * 1024 * 1024
DELETE_TO_HIGH_WATERMARK = -1  # DeleteRecords' offset meaning "the high watermark"


def _read_marker(tp: TopicPartition, batch: bytes) -> tuple[bool, int] | None:
    """(commit, coordinator epoch) of a marker batch; None for other control batches."""
    try:
        marker = read_end_txn_marker(batch)
    except RecordBatchError as exc:
        log.warning("%s: unreadable control batch: %s", tp, exc)
        return None
    return None if marker is None else (marker.commit, marker.coordinator_epoch)


class Partition:
    def __init__(
        self,
        tp: TopicPartition,
        topic_id: uuid.UUID,
        log: PartitionLog,
        config: LogConfig,
        log_append_time: bool = False,
    ) -> None:
        self.tp = tp
        self.topic_id = topic_id
        self.log = log
        self.config = config
        self.log_append_time = log_append_time
        self._lock = FastLock()  # no scheduler pass when free
        self._waiters: set[trio.Event] = set()
        self.deleted = False
        self.producers = ProducerStateManager()
        # Moves only once an append (or marker) is complete: written, fsynced if the flush
        # policy asks for it, and applied to the producer state (see the theory above).
        self._high_watermark = log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def last_stable_offset(self) -> int:
        """min(first offset of the earliest open transaction, HW) (spec §5.1), never below the
        log start offset: retention may delete the segment an open transaction started in
        (Kafka's ``maybeIncrementFirstUnstableOffset`` clamps the same way)."""
        hw = self._high_watermark
        first = self.producers.first_unstable_offset()
        return hw if first is None else min(max(first, self.log.log_start_offset), hw)

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def has_open_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Kafka's ``hasOngoingTransaction(producerId, producerEpoch)``: the producer has a
        transaction open here *with this epoch*. A batch of a newer epoch (transaction version
        2 bumps the epoch per transaction) is a new transaction and must be verified again."""
        entry = self.producers.get(producer_id)
        return (
            producer_id in self.producers.ongoing
            and entry is not None
            and entry.producer_epoch == producer_epoch
        )

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping
        [fetch_offset, upper_bound) (spec §5.3), in abort order."""
        return self.producers.aborted_transactions(fetch_offset, upper_bound)

    async def append(
        self,
        data: bytes,
        header: BatchHeader,
        now_ms: int,
        *,
        coordinator: bool = False,
        verify: Callable[[], ErrorCode] | None = None,
        supports_epoch_bump: bool = False,
    ) -> tuple[int, int] | ErrorCode:
        """Append one validated client batch; returns (base offset, log append time or -1), or
        the error that refused it (RECORD_LIST_TOO_LARGE, INVALID_PRODUCER_EPOCH,
        OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_TXN_STATE). A duplicate of a retained batch
        returns that batch's original offset and append time.

        ``coordinator`` is Kafka's AppendOrigin.COORDINATOR (TxnOffsetCommit's batch on
        ``__consumer_offsets``): the epoch is checked, the sequence is not. ``verify`` is the
        KIP-890 transaction verification: called, under the lock and after the duplicate and
        epoch checks (KAFKA-19690), for a transactional batch of a producer that has no
        transaction open here; anything but NONE refuses the batch with that code. Such a
        batch first starts the producer's verification state (``ProducerStateManager.
        start_verification``; ``supports_epoch_bump``: a Produce v12+, transaction version 2),
        and once verified is checked against it (``check_verification``: Kafka's first-sequence
        rules of ``ProducerAppendInfo.checkSequence``, OUT_OF_ORDER_SEQUENCE_NUMBER).

        A batch larger than ``segment.bytes`` is refused with RECORD_LIST_TOO_LARGE before
        anything else, as Kafka's ``UnifiedLog.append`` does (no segment could hold it).

        Raises ``storage.api.StorageError`` if the write failed (nothing is acknowledged)."""
        if len(data) > self.config.segment_bytes:
            return ErrorCode.record_list_too_large
        await trio.lowlevel.checkpoint_if_cancelled()  # async with self._lock, in two halves
        lock = self._lock  # (storage/append_lock.py)
        if not lock.take():
            await lock.wait()
        try:
            info: ProducerAppendInfo | None = None
            if header.producer_id >= 0:
                producers = self.producers
                verifying = (
                    verify is not None
                    and header.is_transactional
                    and not self.has_open_transaction(header.producer_id, header.producer_epoch)
                )
                if verifying:  # Kafka's maybeStartTransactionVerification
                    producers.start_verification(
                        header.producer_id,
                        header.base_sequence,
                        header.producer_epoch,
                        supports_epoch_bump,
                        now_ms,
                    )
                checked = producers.prepare_update(
                    header, now_ms if self.log_append_time else None, coordinator=coordinator
                )
                if isinstance(checked, ErrorCode):
                    return checked
                if isinstance(checked, BatchMetadata):  # Kafka answers the retained batch's
                    return checked.first_offset, checked.timestamp  # timestamp, whatever the type
                info = checked
                if verifying and verify is not None and (code := verify()) is not ErrorCode.none:
                    return code
                if (
                    producers.verifying
                    and not coordinator
                    and (code := producers.check_verification(info)) is not ErrorCode.none
                ):
                    return code
            log = self.log
            base = log.log_end_offset
            # the client's bytes with the base offset and the leader epoch written in (the batch
            # length between them kept): one copy, outside the CRC
            prefix = _PREFIX.pack(base, header.batch_length, LEADER_EPOCH)
            if self.log_append_time:  # re-signed: attributes, max timestamp and CRC change
                signed = bytearray(data)
                set_max_timestamp(signed, now_ms, log_append_time=True)
                batch = prefix + signed[_PREFIX.size :]
                append_time = max_ts = now_ms
            else:
                batch = prefix + data[_PREFIX.size :]
                append_time, max_ts = -1, header.max_timestamp
            segment_before = log.active_segment_base  # _append_locked, inline
            await log.append(base, base + header.last_offset_delta, max_ts, batch)
            if log.active_segment_base != segment_before and base > 0:
                await self._snapshot_at_roll(base)
            if info is not None:
                self.producers.update(info, base)
            self._high_watermark = log.log_end_offset
        finally:
            lock.release()
        if self._waiters:
            self.wake_waiters()
        return base, append_time

    async def _append_locked(self, base: int, last: int, max_ts: int, data: bytes) -> None:
        """Write to the log; if that rolled a segment, snapshot the producer state as it was
        before this batch (the caller applies the batch afterwards)."""
        segment_before = self.log.active_segment_base
        await self.log.append(base, last, max_ts, data)
        if self.log.active_segment_base != segment_before and base > 0:
            await self._snapshot_at_roll(base)

    async def _snapshot_at_roll(self, base: int) -> None:
        with trio.CancelScope(shield=True):  # written: the caller's bookkeeping must follow
            await self._write_snapshot(base, self._encode_snapshot(base))

    def _encode_snapshot(self, offset: int) -> bytes:
        return encode_snapshot(offset, list(self.producers), self.producers.aborted)

    async def write_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        now_ms: int,
        *,
        transaction_version: int = 0,
    ) -> int | ErrorCode:
        """Append a COMMIT/ABORT control batch for the producer (spec §4.10, partition-leader
        side) and close its open transaction here; returns the marker's offset, or
        INVALID_PRODUCER_EPOCH (marker epoch below the producer's) /
        TRANSACTION_COORDINATOR_FENCED (coordinator epoch below the last marker's). An ABORT of
        a transaction that wrote data here adds an aborted-index entry. A marker for a
        producer with nothing open here is legal. Raises ``StorageError``."""
        async with self._lock:
            code = self.producers.check_marker(
                producer_id, producer_epoch, coordinator_epoch, transaction_version
            )
            if code is not ErrorCode.none:
                return code
            base = self.log.log_end_offset
            batch = build_control_batch(
                producer_id,
                producer_epoch,
                commit,
                coordinator_epoch,
                base,
                now_ms,
                partition_leader_epoch=LEADER_EPOCH,
            )
            await self._append_locked(base, base, now_ms, batch)
            self.producers.complete_txn(
                producer_id, producer_epoch, commit, coordinator_epoch, base, now_ms
            )
            self._high_watermark = self.log.log_end_offset
        if self._waiters:
            self.wake_waiters()
        return base

    # -- producer state ----------------------------------------------------------------------

    async def _write_snapshot(self, offset: int, data: bytes) -> None:
        """Store a snapshot and prune old ones. A failure only costs a longer replay."""
        try:
            await self.log.write_producer_snapshot(offset, data)
            for old in (await self.log.producer_snapshots())[:-SNAPSHOTS_KEPT]:
                await self.log.delete_producer_snapshot(old)
        except StorageError as exc:
            log.warning("%s: producer snapshot at %d not written: %s", self.tp, offset, exc)

    async def take_snapshot(self) -> None:
        """Snapshot the producer state at the log end offset (clean shutdown)."""
        async with self._lock:
            end = self.log.log_end_offset
            try:
                if end in await self.log.producer_snapshots():
                    return
            except StorageError as exc:
                log.warning("%s: no producer snapshot at shutdown: %s", self.tp, exc)
                return
            await self._write_snapshot(end, self._encode_snapshot(end))

    async def load_producer_state(self) -> None:
        """Rebuild the producer state: newest valid snapshot in [log start, log end], then replay
        (markers are read from their control record: commit/abort and coordinator epoch)."""
        async with self._lock:
            end = self.log.log_end_offset
            start = 0
            entries: list[ProducerStateEntry] = []
            aborted: list[AbortedTxn] = []
            log_start = self.log.log_start_offset
            for offset in reversed(await self.log.producer_snapshots()):
                # Beyond the end: its log tail was lost in a crash. Below the log start: the
                # batches between it and the log start are gone, so no replay can complete it
                # (it would bring back transactions and sequences that have moved on since).
                # Kafka's truncateAndReload drops both (and one *at* the log start, which is
                # complete: kafkad keeps that, e.g. the one retention takes when it empties a log).
                if offset > end or offset < log_start:
                    await self.log.delete_producer_snapshot(offset)
                    continue
                data = await self.log.read_producer_snapshot(offset)
                try:
                    taken_at, entries, aborted = read_snapshot(data or b"")
                except SnapshotError as exc:
                    log.warning("%s: skipping snapshot %d: %s", self.tp, offset, exc)
                    continue
                if taken_at != offset:
                    log.warning("%s: snapshot %d says offset %d", self.tp, offset, taken_at)
                    entries, aborted = [], []
                    continue
                start = offset
                break
            self.producers.load(entries, aborted)
            position = max(start, log_start)
            while position < end:
                chunk = await self.log.read(position, REPLAY_READ_BYTES)
                if not chunk:
                    break
                for pos, h in iter_batches(chunk):
                    if h.last_offset >= position:
                        marker = None
                        if h.is_control and h.producer_id >= 0 and h.records_count:
                            marker = _read_marker(self.tp, chunk[pos : pos + h.total_size])
                        self.producers.replay(h, marker)
                    position = max(position, h.last_offset + 1)
            self.producers.truncate_aborted(self.log.log_start_offset)

    def update_config(self, config: LogConfig, log_append_time: bool) -> None:
        """Altered topic configs reach the open partition and its log."""
        self.config = config
        self.log_append_time = log_append_time
        self.log.update_config(config)

    async def forget_aborted(self, entries: Collection[AbortedTxn]) -> None:
        """The log cleaner found these aborted transactions' data gone from the log: drop their
        index entries, then replace every producer snapshot (they still list the entries) by
        one taken now. The old snapshots go first: a crash in between leaves none, and the
        replay from the log start only indexes aborts whose data is still there. Raises
        ``StorageError`` (the entries are then gone from memory only, which is safe)."""
        gone = set(entries)
        async with self._lock:
            self.producers.aborted = [a for a in self.producers.aborted if a not in gone]
            end = self.log.log_end_offset
            for old in await self.log.producer_snapshots():
                await self.log.delete_producer_snapshot(old)
            await self.log.write_producer_snapshot(end, self._encode_snapshot(end))

    async def apply_retention(self, now_ms: int) -> int:
        """Retention on the log (bounded by the high watermark, as in Kafka, not by the LSO: an
        open transaction's first segments may go; ``last_stable_offset`` is then the log start),
        then forget aborted transactions below the new log start. If retention rolled the log,
        the producer state is snapshotted before any segment is deleted (Kafka's ``roll`` takes
        it first too: deleting first left a crash window in which no snapshot covered the
        deleted batches). The snapshot is taken under the partition lock at the high watermark,
        which is exactly what the producer state has applied once the lock is held (an append
        moves it right after ``producers.update``; appends that came after the roll are in the
        snapshot and not replayed). Only that step holds the lock: appends go on while retention
        waits for the log's admin lock (the cleaner's swaps) and for the rolled segment's seal."""

        async def snapshot_at_roll() -> None:
            async with self._lock:
                at = self._high_watermark
                await self._write_snapshot(at, self._encode_snapshot(at))

        deleted = await self.log.apply_retention(now_ms, after_roll=snapshot_at_roll)
        self.producers.truncate_aborted(self.log.log_start_offset)
        return deleted

    async def delete_records(self, offset: int) -> int | ErrorCode:
        """DeleteRecords (Kafka's ``Partition.deleteRecordsOnLeader`` and
        ``UnifiedLog.maybeIncrementLogStartOffset``): move the log start offset up to
        ``offset`` (``DELETE_TO_HIGH_WATERMARK``, -1, is the high watermark) and return the low
        watermark, which on one replica is the log start offset. Refusals, in Kafka's order:
        POLICY_VIOLATION when ``cleanup.policy`` is compact only; OFFSET_OUT_OF_RANGE for any
        other negative offset or one past the high watermark. An offset at or below the log
        start changes nothing and answers the current start. Raises ``StorageError``.

        Producer state is kept, as Kafka keeps it in memory (``onLogStartOffsetIncremented``
        only forgets unreplicated transactions): an open transaction whose first offset is now
        below the start stays open, and the LSO is clamped to the start until its marker
        comes (``last_stable_offset``). Aborted-index entries that end below the start go.
        Deviation (stronger than Kafka): before the start moves, the producer state is
        snapshotted at the high watermark, so a ``kill -9`` right after does not lose the
        state of producers whose batches were all deleted (Kafka's ``truncateAndReload`` then
        replays from the new start and forgets them: UNKNOWN_PRODUCER_ID, or an open
        transaction no longer holding the LSO back). Long polls are woken, so a fetch waiting
        below the new start is answered OFFSET_OUT_OF_RANGE at once (Kafka's delayed fetch
        notices only at its next append or at ``max_wait``: the same answer, later)."""
        if self.config.compact and not self.config.delete:  # Kafka: an empty policy may
            return ErrorCode.policy_violation
        target = self._high_watermark if offset == DELETE_TO_HIGH_WATERMARK else offset
        if target < 0 or target > self._high_watermark:
            return ErrorCode.offset_out_of_range
        if target > self.log.log_start_offset:
            async with self._lock:
                at = self._high_watermark
                await self._write_snapshot(at, self._encode_snapshot(at))
            await self.delete_before(target)
            self.wake_waiters()  # a long poll below the new start answers OFFSET_OUT_OF_RANGE
        return self.log.log_start_offset

    async def delete_before(self, offset: int) -> None:
        """Move the log start offset (the log deletes the segments wholly below it), then
        forget aborted transactions that ended below it."""
        await self.log.delete_before(offset)
        self.producers.truncate_aborted(self.log.log_start_offset)

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> list[int]:
        return self.producers.remove_expired(now_ms, expiration_ms)

    def wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for event in waiters:
            event.set()

    def add_waiter(self, event: trio.Event) -> None:
        self._waiters.add(event)

    def remove_waiter(self, event: trio.Event) -> None:
        self._waiters.discard(event)

    async def read(self, offset: int, max_bytes: int) -> bytes:
        return await self.log.read(offset, max_bytes)

    async def find_timestamp(self, timestamp: int) -> TimestampLookup | None:
        return await self.log.find_timestamp(timestamp)
