"""``FileLog``: a partition log over segment files (the file backend's ``PartitionLog``).

Theory of operation
-------------------
State lives on the event loop thread: the segment list (sorted by base offset, the last one
active), the log start and end offsets, the total size. Everything that decides something
happens without an ``await`` in between, so concurrent callers see a consistent log:

* ``append`` checks contiguity, rolls if needed, writes with one ``os.pwrite`` and moves the log
  end offset without awaiting anything. Whether to roll is ``should_roll``'s answer, asked only
  when the append passes one of the active segment's ``RollLimits`` (``log_policy``: the same
  rules solved once, when the segment takes its first batch, at the open and at a config
  change), so the usual append compares five numbers. Only an append that leaves
  ``flush.messages`` offsets unflushed then awaits, on the store's group commit
  (``commit.py``), before it is acknowledged (Kafka's ``unflushedMessages >= flushInterval``).
  With ``flush.ms`` the first
  unflushed append arms a timer (a task in the store's nursery, cancelled at close) that
  flushes ``flush.ms`` after the last fsync. Deviation: the fsync that seals a rolled segment
  does not count as a flush here (Kafka's roll moves the recovery point), so after a roll the
  next flush may come a little earlier than ``flush.messages`` says, never later.
* A roll creates the next segment and returns at once; sealing the old one (fsync, index
  files) runs as a background task in the store's nursery. ``close`` waits for it.
* Reads run inline when they start in the newest two segments or when the range they start
  with is in the page cache (probed with ``preadv(RWF_NOWAIT)``): a 1 MiB read is then three
  ``pread`` calls and one copy. Otherwise the read may wait for the disk and runs in a worker
  thread (which costs ~100 us more here). Fds used in a thread are pinned (``FileHandle``), so
  retention can delete a segment that a slow reader still holds.
* Retention and ``delete_before`` (``admin.py``, a base class of ``FileLog``, as is the
  cleaner's side below) hold an admin lock (one at a time) and only ever remove
  whole segments from the front; when retention takes the active segment too, the log rolls
  first, so there is always an (empty) active segment at the log end offset.
* The log cleaner (``replace_segments``, under the same admin lock) swaps a run of rolled
  segments for one cleaned segment (``swap.py``): the old segments' fds and index maps are
  pinned first, the files are swapped in a worker thread, and the segment list is switched
  without an await, so reads in flight finish on the old files.

Failures: a write that fails is truncated back and raises StorageError; the log stays usable
(ENOSPC may pass). A failure that leaves the files in doubt (an fsync, a write that cannot be
undone) *fails* the log: every later call raises StorageError until the store is reopened and
recovery runs (Kafka's offline log directory, per partition); with ``flush_every_append`` its
log end offset also goes back to the last durable offset, since nothing after it was
acknowledged.

Deleting segments (retention, DeleteRecords) follows Kafka's asynchronous delete: the files are
renamed to ``*.deleted`` at once and unlinked ``file.delete.delay.ms`` later (at once with 0, or
when the log closes first; the next open removes any left behind). A reader thread that holds
a deleted segment keeps reading it through its open fd either way. Deviation: the log cleaner's
swap (``swap.py``) still unlinks the segments it replaces at once.
"""

from __future__ import annotations

import logging
import struct
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path

import trio

from storage.api import (
    NEVER,
    LogConfig,
    StorageError,
    TimestampLookup,
    TopicPartition,
)
from storage.log_policy import roll_limits, should_roll
from storage.log_positions import check_append
from storage.segment import osio, scan
from storage.segment.admin import LogAdmin
from storage.segment.commit import GroupCommit, SyncSnapshot
from storage.segment.files import (
    SNAPSHOT_SUFFIX,
    Buffer,
    FileHandle,
    read_if_exists,
    snapshot_offsets,
    unlink_quietly,
    write_atomic,
)
from storage.segment.load import Loaded
from storage.segment.segment import Segment, WriteFailed, read_segments
from wire.records import BATCH_HEADER_SIZE, LOG_OVERHEAD, iter_batches

log = logging.getLogger("kafkad.storage")

_FIRST = struct.Struct(">qi")  # base_offset, batch_length
Spawn = Callable[..., None]
HOT_SEGMENTS = 2  # reads starting in the newest segments run inline


def offset_of_max(batch: bytes, max_timestamp: int, default: int) -> int:
    """Base offset of the first batch in a multi-batch append reaching ``max_timestamp``."""
    for _, h in iter_batches(batch):
        if h.max_timestamp >= max_timestamp:
            return h.base_offset
    return default


class FileLog(LogAdmin):
    def __init__(
        self,
        tp: TopicPartition,
        directory: Path,
        config: LogConfig,
        loaded: Loaded,
        *,
        commit: GroupCommit,
        spawn: Spawn,
        clock: Callable[[], int],
        on_close: Callable[[FileLog], None] = lambda _: None,
    ) -> None:
        self.tp = tp
        self.directory = directory
        self.config = config
        self._segments = loaded.segments
        self._bases = [s.base for s in self._segments]
        # PartitionLog's property, kept as an attribute (read twice per Partition.append); only
        # a roll changes the active segment
        self.active_segment_base = self._bases[-1]
        self._lso = loaded.log_start_offset
        self._leo = self._durable = loaded.log_end_offset
        self._size = sum(s.size for s in self._segments)
        self._commit, self._spawn, self._clock, self._on_close = commit, spawn, clock, on_close
        self._segments[-1].created_ms = clock()  # Kafka: a loaded segment's "created" is now
        self._sealing: dict[Segment, trio.Event] = {}
        self._rolls = self._dir_synced = 0
        self._failed: str | None = None
        self._closed = False
        self._sealing_allowed = True  # False once abandoned
        self._admin = trio.Lock()
        self._flush_timer: trio.CancelScope | None = None  # armed while flush.ms is pending
        self._closing = trio.Event()  # set by close, discard and abandon
        self._last_flush = trio.current_time()  # trio time of the last fsync (or the open)
        self._offset_index: Buffer = b""
        self._time_index: Buffer = b""
        self._set_roll_limits(self._segments[-1])

    # -- properties ------------------------------------------------------------------------

    @property
    def durable_offset(self) -> int:
        return self._durable

    @property
    def segments(self) -> list[Segment]:
        """The live segment list (tests and tools only)."""
        return self._segments

    def check_usable(self) -> None:
        if self._failed is not None:
            raise StorageError(f"log {self.tp} is offline: {self._failed}")
        if self._closed:
            raise StorageError(f"log {self.tp} is closed")

    def _fail(self, reason: str) -> None:
        if self._failed is None:
            self._failed = reason
            log.error("log %s failed, offline until reopened: %s", self.tp, reason)

    # -- appends ---------------------------------------------------------------------------

    async def append(
        self, base_offset: int, last_offset: int, max_timestamp: int, batch: bytes
    ) -> None:
        n = len(batch)
        if (  # check_usable and check_append, whose refusals come in this order
            self._failed is not None
            or self._closed
            or base_offset != self._leo
            or last_offset < base_offset
            or n < BATCH_HEADER_SIZE
        ):
            self.check_usable()
            check_append(self._leo, base_offset, last_offset, batch)
        first_base, first_length = _FIRST.unpack_from(batch)
        if first_base != base_offset:
            check_append(self._leo, base_offset, last_offset, batch)  # raises
        ts_offset = base_offset
        if first_length + LOG_OVERHEAD != n:
            ts_offset = offset_of_max(batch, max_timestamp, base_offset)
        seg = self._segments[-1]
        size = seg.size
        if not size:  # an empty segment never rolls; its first batch dates it
            seg.first_batch_ts = max_timestamp
            self._set_roll_limits(seg)
        elif (  # passes one of the roll limits: should_roll decides (rarely true)
            size + n > self._roll_size
            or last_offset > self._roll_last
            or max_timestamp > self._roll_ts
            or len(self._offset_index) > self._roll_offset_index
            or len(self._time_index) > self._roll_time_index
        ) and self._should_roll(seg, n, last_offset, max_timestamp):
            seg = self._roll()
            seg.first_batch_ts = max_timestamp
            self._set_roll_limits(seg)
        try:
            seg.append(batch, base_offset - seg.base, max_timestamp, ts_offset - seg.base)
        except WriteFailed as exc:
            self._fail(str(exc))
            raise
        self._leo = last_offset + 1
        self._size += n
        if self._leo - self._durable >= self.config.flush_messages:  # Kafka's unflushedMessages
            # written: a cancellation must not end the append between the write and the
            # caller's bookkeeping (producer state, high watermark), or a retry duplicates it
            with trio.CancelScope(shield=True):
                await self._commit.wait_durable(self, self._leo)
        elif self._flush_timer is None and self.config.flush_ms < NEVER:
            self._arm_flush_timer()

    def _set_roll_limits(self, seg: Segment) -> None:
        """The active segment's ``RollLimits`` and index buffers, for ``append``'s quick check:
        set at the open, when the segment takes its first batch, and when the config changes."""
        limits = roll_limits(self.config, seg.base, seg.first_batch_ts)
        self._roll_size, self._roll_last, self._roll_ts = limits[:3]
        self._roll_offset_index, self._roll_time_index = limits[3:]
        if seg.writer is not None:  # the active segment's (grown in place)
            self._offset_index = seg.writer.offsets.buffer
            self._time_index = seg.writer.times.buffer

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self._set_roll_limits(self._segments[-1])

    def _should_roll(self, seg: Segment, n: int, last_offset: int, max_timestamp: int) -> bool:
        return should_roll(
            self.config,
            seg_size=seg.size,
            seg_base=seg.base,
            add_bytes=n,
            last_offset=last_offset,
            max_timestamp=max_timestamp,
            first_batch_ts=seg.first_batch_ts,
            created_ms=seg.created_ms,
            now_ms=self._clock(),
            offset_entries=len(seg.offsets()),
            time_entries=len(seg.times()),
        )

    def _arm_flush_timer(self) -> None:
        """flush.ms: fsync ``flush_ms`` after the last fsync (at once if that is past)."""
        scope = self._flush_timer = trio.CancelScope()
        due = self._last_flush + self.config.flush_ms / 1000
        self._spawn(self._flush_at, scope, due)

    async def _flush_at(self, scope: trio.CancelScope, due: float) -> None:
        """Background task in the store's nursery: it must not raise. Cancelled at close."""
        try:
            with scope:
                await trio.sleep_until(due)
                await self.flush()
        except StorageError as exc:  # the log failed: every later call says so
            log.warning("%s: timed flush failed: %s", self.tp, exc)
        finally:
            if self._flush_timer is scope:
                self._flush_timer = None

    def _roll(self) -> Segment:
        old = self._segments[-1]
        new = Segment.create(self.directory, self._leo, self.config.index_interval_bytes)
        new.created_ms = self._clock()
        assert old.writer is not None
        old.writer.finish()
        self._segments.append(new)
        self._bases.append(new.base)
        self.active_segment_base = new.base
        self._rolls += 1
        done = self._sealing[old] = trio.Event()
        self._spawn(self._seal, old, self._rolls, done)
        return new

    async def _seal(self, seg: Segment, generation: int, done: trio.Event) -> None:
        """Background task in the store's nursery: it must not raise. A failed fsync takes the
        log offline; failing to write the index files only leaves the segment without them
        (it keeps its in-memory indexes, and is validated at the next open)."""
        try:
            if not self._sealing_allowed:
                return  # abandoned (a simulated kill -9): nothing more reaches the disk
            try:
                handle = seg.handle()
                fd = handle.acquire()
                try:
                    await trio.to_thread.run_sync(osio.ops.fsync, fd)
                finally:
                    handle.release()
            except (OSError, StorageError) as exc:
                self._fail(f"fsync of rolled segment {seg.base} failed: {exc}")
                return
            try:
                await trio.to_thread.run_sync(seg.write_indexes)
            except OSError as exc:
                log.warning("%s: index files of segment %d not written: %s", self.tp, seg.base, exc)
            else:
                seg.mark_sealed()
                self._dir_synced = max(self._dir_synced, generation)  # write_indexes synced it
        finally:
            del self._sealing[seg]
            done.set()

    async def settle(self) -> None:
        """Wait until every rolled segment is sealed (tests and tools)."""
        while self._sealing:
            await next(iter(self._sealing.values())).wait()

    # -- group commit (SyncTarget) ---------------------------------------------------------

    def sync_begin(self) -> SyncSnapshot:
        handles: list[FileHandle] = [s.handle() for s in (*self._sealing, self._segments[-1])]
        fds = [h.acquire() for h in handles]
        directory = self.directory if self._dir_synced < self._rolls else None
        return SyncSnapshot(handles, fds, directory, self._leo, self._rolls)

    def sync_end(self, snap: SyncSnapshot, synced: bool, error: OSError | None) -> None:
        for handle in snap.handles:
            handle.release()
        if error is not None:
            self._fail(f"fsync failed: {error}")
            if self.config.flush_every_append:  # the unsynced appends were never acknowledged
                self._leo = max(self._durable, self._lso)
        elif synced:
            self._durable = max(self._durable, snap.offset)
            self._last_flush = trio.current_time()
            if snap.directory is not None:
                self._dir_synced = max(self._dir_synced, snap.generation)

    async def flush(self) -> None:
        self.check_usable()
        await self._commit.wait_durable(self, self._leo)

    # -- producer-state snapshots ------------------------------------------------------------

    def _snapshot_path(self, offset: int) -> Path:
        return self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    async def producer_snapshots(self) -> list[int]:
        self.check_usable()
        try:
            return await trio.to_thread.run_sync(snapshot_offsets, self.directory)
        except OSError as exc:
            raise StorageError(f"listing snapshots of {self.tp}: {exc}") from exc

    async def read_producer_snapshot(self, offset: int) -> bytes | None:
        self.check_usable()
        try:
            return await trio.to_thread.run_sync(read_if_exists, self._snapshot_path(offset))
        except OSError as exc:
            raise StorageError(f"reading snapshot {offset} of {self.tp}: {exc}") from exc

    async def write_producer_snapshot(self, offset: int, data: bytes) -> None:
        self.check_usable()
        try:
            await trio.to_thread.run_sync(write_atomic, self._snapshot_path(offset), data)
        except OSError as exc:
            raise StorageError(f"writing snapshot {offset} of {self.tp}: {exc}") from exc

    async def delete_producer_snapshot(self, offset: int) -> None:
        self.check_usable()
        try:
            await trio.to_thread.run_sync(unlink_quietly, self._snapshot_path(offset))
        except OSError as exc:
            raise StorageError(f"deleting snapshot {offset} of {self.tp}: {exc}") from exc

    # -- reads -----------------------------------------------------------------------------

    def _check_range(self, offset: int) -> None:
        if not self._lso <= offset <= self._leo:
            raise ValueError(
                f"offset {offset} is outside the log [{self._lso}, {self._leo}] of {self.tp}"
            )

    async def read(self, offset: int, max_bytes: int) -> bytes:
        self.check_usable()
        self._check_range(offset)
        if offset == self._leo:
            return b""
        segs = self._segments
        i = bisect_right(self._bases, offset) - 1
        plan, covered = [(segs[i], segs[i].size)], 0
        for k in range(i + 1, len(segs)):  # only the segments this read can reach
            if covered >= max_bytes:
                break
            plan.append((segs[k], segs[k].size))
            covered += segs[k].size
        try:
            seg = segs[i]
            if i >= len(segs) - HOT_SEGMENTS or scan.resident(
                seg.fd(), pos := seg.lookup(offset), min(seg.size, pos + max(max_bytes, 1))
            ):
                return read_segments(plan, [seg.fd() for seg, _ in plan], offset, max_bytes)
            handles = [seg.handle() for seg, _ in plan]
            for seg, _ in plan:
                seg.offsets()  # map the index here, not in the thread
        except OSError as exc:
            raise StorageError(f"reading {self.tp} at {offset}: {exc}") from exc
        fds = [h.acquire() for h in handles]
        try:
            return await trio.to_thread.run_sync(read_segments, plan, fds, offset, max_bytes)
        except OSError as exc:
            raise StorageError(f"reading {self.tp} at {offset}: {exc}") from exc
        finally:
            for h in handles:
                h.release()

    async def find_timestamp(self, timestamp: int) -> TimestampLookup | None:
        self.check_usable()
        lso = self._lso
        try:
            for k, seg in enumerate(self._segments):
                end_offset = self._bases[k + 1] if k + 1 < len(self._bases) else self._leo
                if seg.largest_timestamp < timestamp or end_offset <= lso:
                    continue
                start = max(seg.time_lookup(timestamp), lso)
                fd = seg.fd()
                hit = scan.first_at_or_after(fd, seg.lookup(start), seg.size, timestamp, lso)
                if hit is not None:
                    pos, base, size = hit
                    return TimestampLookup(base, scan.read_exact(fd, pos, size))
        except OSError as exc:
            raise StorageError(f"timestamp search in {self.tp}: {exc}") from exc
        return None

    async def max_timestamp(self) -> tuple[int, int] | None:
        self.check_usable()
        best: tuple[int, int] | None = None
        for seg in self._segments:
            ts = seg.largest_timestamp
            if ts >= 0 and (best is None or ts > best[0]):
                best = (ts, seg.largest_timestamp_offset)
        return best

    # -- closing ---------------------------------------------------------------------------

    async def close(self) -> None:
        """Wait for seals, persist the active segment's indexes, fsync, close the fds."""
        if self._closed:
            return
        self._closed = True
        self._stop_flush_timer()
        try:
            for done in list(self._sealing.values()):
                await done.wait()
            if self._failed is None:
                unsealed = [s for s in self._segments if s.writer is not None]
                for seg in unsealed:
                    assert seg.writer is not None
                    seg.writer.finish()
                # pinned, as every fd a worker thread uses: an abandon() or discard() while
                # the thread runs must not close them under it (files.FileHandle)
                handles = [seg.handle() for seg in unsealed]
                fds = [h.acquire() for h in handles]
                try:
                    await trio.to_thread.run_sync(_persist_all, unsealed, fds)
                except OSError as exc:
                    self._fail(f"closing: {exc}")
                    raise StorageError(f"closing {self.tp}: {exc}") from exc
                finally:
                    for h in handles:
                        h.release()
        finally:
            for seg in self._segments:
                seg.close()
            self._on_close(self)

    async def discard(self) -> None:
        """Close without persisting anything (the data is about to be deleted)."""
        self._closed = True
        self._stop_flush_timer()
        for done in list(self._sealing.values()):
            await done.wait()
        self.abandon()

    def _stop_flush_timer(self) -> None:
        """The log is closing: the flush.ms timer stops, delayed file deletes run now."""
        self._closing.set()
        if self._flush_timer is not None:
            self._flush_timer.cancel()

    @property
    def failed(self) -> bool:
        return self._failed is not None

    def abandon(self) -> None:
        """Drop the log as ``kill -9`` would: close the fds, persist nothing (tests)."""
        self._closed = True
        self._stop_flush_timer()
        self._sealing_allowed = False
        for seg in self._segments:
            seg.close()
        self._on_close(self)


def _persist_all(segments: list[Segment], fds: list[int]) -> None:
    for seg, fd in zip(segments, fds, strict=True):
        seg.persist(fd)
