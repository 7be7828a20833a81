"""The log cleaner's passes: one partition at a time, through the narrow storage interface.

Theory of operation
-------------------
``LogCleaner.clean_once`` looks at every partition of every topic whose ``cleanup.policy``
contains ``compact``, plans it (``policy.plan``: the dirty range, below the last stable
offset and the active segment) and runs a pass on each one worth cleaning, dirtiest first.
``Broker.cleaner_loop`` calls it every ``log.cleaner.backoff.ms``.

A pass (``clean_partition``), in Kafka's order (``Cleaner.doClean``):

1. Read the dirty segments one by one and build the key map (``decide.build_key_map``),
   stopping when the map is full (``log.cleaner.dedupe.buffer.size``). ``map_end`` is where
   it stopped; it becomes the next pass's first dirty offset (the checkpoint, kept in memory).
2. Group the rolled segments from the log start up to the one holding ``map_end - 1``
   (``policy.group_segments``). For each group, in offset order: read its segments, decide
   every batch (``decide.decide_batch``, one ``TxnTracker`` for the whole sweep), rebuild the
   batches that change (``rewrite.rebuild``), then
   a. drop the aborted-transaction entries the tracker found dead from the partition's index
      and producer snapshots (``Partition.forget_aborted``): their data is already gone, so
      this is safe before the swap and must not come after it (a crash in between would
      leave an entry whose marker is gone: consumers would then skip that producer's later
      committed data);
   b. swap the group for its cleaned segment (``PartitionLog.replace_segments``, atomic),
      unless it is a single segment that stays byte for byte.
   Groups go in ascending order, so a crash between two swaps leaves a log where everything
   removed so far was removed because of a record that is still there.
3. Every segment read and written goes through the throttle
   (``log.cleaner.io.max.bytes.per.second``), so a pass's I/O rate is bounded.

Nothing at or past the LSO is read for the map or cleaned: an open transaction's batches,
and everything after its first offset, stay exactly as written. If retention or DeleteRecords
removes segments during the pass, ``replace_segments`` refuses and the pass stops.

Deviations from Kafka: the key map holds whole keys (Kafka: MD5 digests, so no collisions
here), and its capacity is ``dedupe.buffer.size / 128`` keys (a Python dict entry costs about
that much, Kafka's 24 bytes); the checkpoint is not persisted, so after a restart the first
pass treats the whole log as dirty (re-cleaning is idempotent). A segment group is held in
memory while it is cleaned (at most ``segment.bytes`` in, about as much out).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import trio

from storage.api import PartitionLog, StorageError, TopicPartition
from storage.cleaner.decide import (
    Action,
    CleanContext,
    LastRecord,
    TxnTracker,
    build_key_map,
    decide_batch,
)
from storage.cleaner.policy import CleanPlan, ends, group_segments, plan
from storage.cleaner.rewrite import parse_batches, rebuild
from storage.partition import Partition
from storage.topics import TopicManager

log = logging.getLogger("kafkad.cleaner")

KEY_MAP_ENTRY_BYTES = 128


class Throttle:
    """At most ``rate`` bytes per second on average since the throttle was made (trio clock)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._start: float | None = None
        self._bytes = 0

    async def spent(self, nbytes: int) -> None:
        if math.isinf(self.rate) or self.rate >= 1e300:
            return
        now = trio.current_time()
        if self._start is None:
            self._start = now
        self._bytes += nbytes
        ahead = self._bytes / self.rate - (now - self._start)
        if ahead > 0:
            await trio.sleep(ahead)


@dataclass(frozen=True, slots=True)
class PassResult:
    tp: TopicPartition
    map_end: int  # the next pass's first dirty offset
    bytes_read: int
    bytes_written: int
    segments_before: int
    segments_after: int
    complete: bool  # every group was swapped


async def clean_partition(
    p: Partition,
    plan_: CleanPlan,
    now_ms: int,
    *,
    max_map_entries: int,
    throttle: Throttle,
) -> PassResult:
    """One cleaning pass over ``p`` (see the module docstring)."""
    plog, cfg = p.log, p.config
    infos = plog.segment_infos()
    seg_ends = ends(infos, plog.log_end_offset)
    aborted = list(p.producers.aborted)
    read = written = 0
    key_map: dict[bytes, int] = {}
    tracker = TxnTracker(a for a in aborted if a.last_offset >= plan_.first_dirty)
    map_end = plan_.upper
    for seg, end in zip(infos[:-1], seg_ends[:-1], strict=True):
        if end <= plan_.first_dirty or seg.base_offset >= plan_.upper:
            continue
        data = await _read(plog, seg.base_offset)
        if data is None:
            return PassResult(p.tp, plan_.first_dirty, read, 0, len(infos), len(infos), False)
        read += len(data)
        await throttle.spent(len(data))
        stop = build_key_map(
            parse_batches(data), tracker, plan_.first_dirty, key_map, max_map_entries
        )
        if stop is not None:
            map_end = stop
            break
    active = {
        e.producer_id: LastRecord(e.last_offset if e.last_offset >= 0 else None, e.producer_epoch)
        for e in p.producers
    }
    ctx = CleanContext(key_map, map_end, active, now_ms, cfg.delete_retention_ms)
    sweep = TxnTracker(a for a in aborted if a.last_offset >= plog.log_start_offset)
    targets = [i for i, s in enumerate(infos[:-1]) if s.base_offset < map_end]
    groups = group_segments(
        [infos[i] for i in targets], [seg_ends[i] for i in targets], cfg.segment_bytes
    )
    swapped = 0
    for group in groups:
        out: list[bytes] = []
        gone, changed = False, len(group) > 1
        for base in group:
            data = await _read(plog, base)
            if data is None:
                gone = True
                break
            read += len(data)
            await throttle.spent(len(data))
            for b in parse_batches(data):
                d = decide_batch(b, sweep, ctx)
                if d.action is Action.KEEP:
                    out.append(b.raw)
                else:
                    changed = True
                    if d.action is Action.REWRITE:
                        out.append(rebuild(b, d.records, d.horizon))
        if gone:
            log.info("%s: segments removed during cleaning; pass stopped", p.tp)
            break
        if sweep.dropped:
            await p.forget_aborted(sweep.dropped)
            sweep.dropped = []
        if not changed:  # a lone segment that stays byte for byte: nothing to swap
            swapped += 1
            continue
        cleaned = b"".join(out)
        await throttle.spent(len(cleaned))
        if not await plog.replace_segments(group, cleaned):
            log.info("%s: segments changed during cleaning; pass stopped", p.tp)
            break
        written += len(cleaned)
        swapped += 1
    return PassResult(
        p.tp,
        map_end,
        read,
        written,
        len(infos),
        len(plog.segment_infos()),
        swapped == len(groups),
    )


async def _read(plog: PartitionLog, base: int) -> bytes | None:
    """A rolled segment's bytes, or None if retention removed it meanwhile."""
    try:
        return await plog.read_segment(base)
    except ValueError:
        return None


class LogCleaner:
    """Checkpoints (first dirty offset per partition) and the choice of what to clean."""

    def __init__(self, *, dedupe_buffer_size: int, io_max_bytes_per_second: float) -> None:
        self.configure(dedupe_buffer_size, io_max_bytes_per_second)
        self.checkpoints: dict[TopicPartition, int] = {}
        self.uncleanable: set[TopicPartition] = set()  # a pass failed unexpectedly (Kafka's)
        # The last pass over each partition and when it ran (read by the web console)
        self.last_passes: dict[TopicPartition, tuple[PassResult, int]] = {}

    def configure(self, dedupe_buffer_size: int, io_max_bytes_per_second: float) -> None:
        """The key map's size and the I/O limit of the passes that start from now on."""
        self.max_map_entries = max(1, dedupe_buffer_size // KEY_MAP_ENTRY_BYTES)
        self.io_rate = io_max_bytes_per_second

    def plans(self, topics: TopicManager, now_ms: int) -> list[tuple[Partition, CleanPlan]]:
        """The compacted partitions worth cleaning now, dirtiest first."""
        out = []
        for topic in topics:
            for p in topic.partitions:
                if p.deleted or not p.config.compact or p.tp in self.uncleanable:
                    continue
                pl = self.plan(p, now_ms)
                if pl.worth_cleaning(p.config):
                    out.append((p, pl))
        out.sort(key=lambda x: -x[1].ratio)
        return out

    def plan(self, p: Partition, now_ms: int) -> CleanPlan:
        """What a pass over ``p`` would clean now (its ``ratio`` is the dirty ratio)."""
        return plan(
            p.log.segment_infos(),
            p.config,
            checkpoint=self.checkpoints.get(p.tp),
            log_start=p.log_start_offset,
            log_end=p.high_watermark,
            last_stable=p.last_stable_offset,
            now_ms=now_ms,
        )

    async def clean_partition(self, p: Partition, pl: CleanPlan, now_ms: int) -> PassResult:
        """One pass. Raises ``StorageError`` (retried next round); any other failure (say a
        batch that does not parse) marks the partition uncleanable until restart, as Kafka
        does, and is raised as ``StorageError``."""
        try:
            result = await clean_partition(
                p,
                pl,
                now_ms,
                max_map_entries=self.max_map_entries,
                throttle=Throttle(self.io_rate),
            )
        except StorageError:
            raise
        except Exception as exc:
            self.uncleanable.add(p.tp)
            raise StorageError(f"{p.tp} marked uncleanable: {exc!r}") from exc
        if result.complete:
            self.checkpoints[p.tp] = result.map_end
        self.last_passes[p.tp] = (result, now_ms)
        return result

    async def clean_once(self, topics: TopicManager, now_ms: int) -> list[PassResult]:
        """A pass over every compacted partition that is worth cleaning now."""
        results = []
        for p, pl in self.plans(topics, now_ms):
            if p.deleted:
                continue
            results.append(await self.clean_partition(p, pl, now_ms))
        return results
