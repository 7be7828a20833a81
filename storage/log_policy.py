"""Decisions both log backends share: when a segment rolls and which segments retention deletes.

Pure functions of numbers and ``now_ms``: no I/O, no clock. The memory backend keeps the same
segment structure as the file backend only so that these rules, and therefore what the contract
suite observes (retention, ``size_bytes``), are identical.

``should_roll`` has a twin, ``roll_limits``: the same rules solved for the append once per
segment, which the file backend checks instead on every append (and asks ``should_roll`` only
past a limit).

Kafka sources: ``LogSegment.shouldRoll`` / ``timeWaitedForRoll``, ``UnifiedLog.deletableSegments``
and its ``retention.ms`` / ``retention.bytes`` predicates. Differences: no ``segment.jitter.ms``;
retention also rolls an active segment created more than ``segment.ms`` ago by the wall clock
(``segment_expired``: Kafka rolls only on append), so an idle compacted partition's data becomes
cleanable; and in the memory
backend a segment without timestamps ages by its last append's wall time for retention (Kafka,
and the file backend: the file's mtime).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from storage.api import LogConfig

# Index entries hold offsets relative to the segment's base offset: Kafka rolls before an
# offset could no longer be expressed as a non-negative int32 relative offset.
REL_OFFSET_MAX = 2**31 - 1
POSITION_MAX = 2**32 - 1  # index positions are u32 (Kafka caps segment.bytes at int32 max)
OFFSET_INDEX_ENTRY = 8
TIME_INDEX_ENTRY = 12


def segment_age(first_batch_ts: int | None, created_ms: int, ts_ms: int, now_ms: int) -> int:
    """Kafka's ``LogSegment.timeWaitedForRoll``: how long the segment has waited to roll, seen
    from a batch with max timestamp ``ts_ms``. When the segment's first batch has a timestamp
    (``first_batch_ts`` >= 0) that is record time: ``ts_ms - first_batch_ts``; otherwise wall
    time since the segment was created (or opened at startup): ``now_ms - created_ms``."""
    if first_batch_ts is not None and first_batch_ts >= 0:
        return ts_ms - first_batch_ts
    return now_ms - created_ms


def should_roll(
    cfg: LogConfig,
    *,
    seg_size: int,
    seg_base: int,
    add_bytes: int,
    last_offset: int,
    max_timestamp: int,
    first_batch_ts: int | None,
    created_ms: int,
    now_ms: int,
    offset_entries: int = 0,
    time_entries: int = 0,
) -> bool:
    """Whether an append of ``add_bytes`` ending at ``last_offset``, whose max timestamp is
    ``max_timestamp``, must go to a new segment (Kafka's ``LogSegment.shouldRoll``).

    An empty segment never rolls: a batch larger than ``segment_bytes`` would get a segment of
    its own (``Partition.append`` refuses one first, with RECORD_LIST_TOO_LARGE, as Kafka does).
    Age is ``segment_age``: the incoming batch's max timestamp against the segment's first
    batch's. Each index is full by its own entry count (``segment.index.bytes`` / entry size).
    """
    if seg_size == 0:
        return False
    return (
        seg_size + add_bytes > min(cfg.segment_bytes, POSITION_MAX)
        or segment_age(first_batch_ts, created_ms, max_timestamp, now_ms) > cfg.segment_ms
        or last_offset - seg_base > REL_OFFSET_MAX
        or (offset_entries + 1) * OFFSET_INDEX_ENTRY > cfg.segment_index_bytes
        or (time_entries + 1) * TIME_INDEX_ENTRY > cfg.segment_index_bytes
    )


ASK_EVERY_APPEND = -(2**63) - 1  # below every timestamp: the age is wall time, ask should_roll


class RollLimits(NamedTuple):
    """``should_roll``'s rules solved once per segment (Kafka's ``LogSegment.shouldRoll`` asks
    them per append): an append to the non-empty segment can roll it only if it passes one of
    these, so an append inside all of them needs no ``should_roll`` call. Each bound is exact
    (passing it is that rule firing), except ``max_timestamp`` when the segment's first batch
    had no timestamp: the age is then wall time and every append asks ``should_roll``."""

    max_size: int  # the segment's size after the append
    max_last_offset: int  # the append's last offset (relative offsets fit an int32)
    max_timestamp: int  # the append's max timestamp (segment.ms after the first batch's)
    max_offset_index: int  # the offset index's bytes before the append (room for one entry)
    max_time_index: int  # the time index's bytes before the append


def roll_limits(cfg: LogConfig, seg_base: int, first_batch_ts: int | None) -> RollLimits:
    """The ``RollLimits`` of a segment based at ``seg_base`` whose first batch's max timestamp
    is ``first_batch_ts`` (see ``segment_age``): ``size + add_bytes > max_size`` is the size
    rule, ``(entries + 1) * 8 > segment_index_bytes`` is ``8 * entries > max_offset_index``."""
    max_ts = ASK_EVERY_APPEND
    if first_batch_ts is not None and first_batch_ts >= 0:
        max_ts = first_batch_ts + cfg.segment_ms
    return RollLimits(
        min(cfg.segment_bytes, POSITION_MAX),
        seg_base + REL_OFFSET_MAX,
        max_ts,
        cfg.segment_index_bytes - OFFSET_INDEX_ENTRY,
        cfg.segment_index_bytes - TIME_INDEX_ENTRY,
    )


def segment_expired(cfg: LogConfig, created_ms: int, now_ms: int) -> bool:
    """The active segment was created (or opened) more than ``segment_ms`` ago by the wall
    clock (retention rolls it; a kafkad addition, Kafka rolls only on append). Wall time
    against wall time: comparing ``now_ms`` with record timestamps would roll a segment of
    old records (a mirrored topic) at every retention check and never one of future records."""
    return now_ms - created_ms > cfg.segment_ms


def retention_deletable(
    cfg: LogConfig, segments: Sequence[tuple[int, int]], total_size: int, now_ms: int
) -> int:
    """How many of the oldest segments retention deletes (Kafka's ``deletableSegments`` with
    the ``retention.ms`` / ``retention.bytes`` predicates).

    ``segments`` are (size in bytes, largest timestamp) oldest first; the last one is the
    active segment. It counts too when it is not empty: a result of ``len(segments)`` means
    "roll, then delete them all" (``UnifiedLog.deleteSegments``), so ``retention.ms`` empties a
    quiet partition instead of waiting for ``segment.ms``. Kafka bounds deletion by the high
    watermark, which on this single-replica broker is the log end offset: every segment ends
    at or below it. An open transaction does not hold retention back (the transaction timeout
    is what ends a hanging one); the last stable offset is then clamped to the log start.

    Nothing is deleted unless ``cleanup.policy`` lists ``delete``. Time first: leading
    segments whose largest timestamp is more than ``retention_ms`` old. Then size: while the
    log minus the next oldest segment would still be at least ``retention_bytes``, that
    segment goes (Kafka's ``diff - size >= 0``).
    """
    if not cfg.delete:  # cleanup.policy=compact: the cleaner, not retention, shrinks the log
        return 0
    candidates = segments if segments and segments[-1][0] else segments[:-1]
    n = 0
    if cfg.retention_ms >= 0:
        while n < len(candidates) and now_ms - candidates[n][1] > cfg.retention_ms:
            n += 1
    if cfg.retention_bytes >= 0:
        diff = total_size - cfg.retention_bytes - sum(size for size, _ in candidates[:n])
        while n < len(candidates) and diff - candidates[n][0] >= 0:
            diff -= candidates[n][0]
            n += 1
    return n
