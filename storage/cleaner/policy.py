"""Which part of a compacted log a pass may clean, whether it is worth it, and how segments are
grouped (Kafka's ``LogCleanerManager.cleanableOffsets``, ``LogToClean`` and
``Cleaner.groupSegmentsBySize``). Pure functions of segment metadata and ``now_ms``.

* First dirty offset: the cleaner's checkpoint (where the previous pass's key map ended), reset
  to the log start if it lies outside [log start, log end].
* First uncleanable offset: the smallest of the last stable offset, the active segment's base
  and (with ``min.compaction.lag.ms``) the base of the first dirty segment whose largest
  timestamp is younger than the lag; then rounded down to the base of the segment holding it,
  so only whole rolled segments entirely below the LSO are ever cleaned.
* Dirty ratio = cleanable bytes / (clean bytes + cleanable bytes); a log is cleaned when it
  exceeds ``min.cleanable.dirty.ratio``, or when some dirty segment's first batch is older
  than ``max.compaction.lag.ms`` (and there is something to clean).
* Groups: consecutive segments whose sizes add up to at most ``segment.bytes`` and whose
  offsets span less than 2^31 (relative index offsets) are cleaned into one segment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from storage.api import LogConfig, SegmentInfo
from storage.log_policy import REL_OFFSET_MAX


@dataclass(frozen=True, slots=True)
class CleanPlan:
    first_dirty: int
    upper: int  # base offset of the first segment that may not be cleaned
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool  # max.compaction.lag.ms was exceeded

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0

    def worth_cleaning(self, cfg: LogConfig) -> bool:
        if self.cleanable_bytes <= 0:
            return False
        return self.needs_compaction_now or self.ratio > cfg.min_cleanable_dirty_ratio


def ends(infos: Sequence[SegmentInfo], log_end: int) -> list[int]:
    """The exclusive end offset of each segment (the next one's base, the log end for the last)."""
    return [s.base_offset for s in infos[1:]] + [log_end]


def plan(
    infos: Sequence[SegmentInfo],
    cfg: LogConfig,
    *,
    checkpoint: int | None,
    log_start: int,
    log_end: int,
    last_stable: int,
    now_ms: int,
) -> CleanPlan:
    """The cleanable range of a log (``infos``: every segment, the active one last)."""
    first_dirty = checkpoint if checkpoint is not None else log_start
    if not log_start <= first_dirty <= log_end:
        first_dirty = log_start
    seg_ends = ends(infos, log_end)
    active = infos[-1].base_offset
    uncleanable = min(last_stable, active)
    rolled = list(zip(infos[:-1], seg_ends[:-1], strict=True))
    if cfg.min_compaction_lag_ms > 0:
        for seg, end in rolled:
            if end > first_dirty and seg.largest_timestamp > now_ms - cfg.min_compaction_lag_ms:
                uncleanable = min(uncleanable, seg.base_offset)
                break
    upper = active
    for seg, end in rolled:
        if seg.base_offset <= uncleanable < end:
            upper = seg.base_offset
            break
    clean = sum(s.size for s in infos[:-1] if s.base_offset < first_dirty)
    cleanable = sum(s.size for s, end in rolled if s.base_offset < upper and end > first_dirty)
    firsts = [
        s.first_batch_timestamp
        for s, end in rolled
        if end > first_dirty and s.first_batch_timestamp > 0
    ]
    lag = max(cfg.max_compaction_lag_ms, 0)
    needs_now = bool(firsts) and min(firsts) < now_ms - lag
    return CleanPlan(first_dirty, upper, clean, cleanable, needs_now)


def group_segments(
    infos: Sequence[SegmentInfo], seg_ends: Sequence[int], max_size: int
) -> list[list[int]]:
    """Consecutive segments (base offsets) merged into one cleaned segment each."""
    groups: list[list[int]] = []
    i = 0
    while i < len(infos):
        group, size = [infos[i].base_offset], infos[i].size
        j = i + 1
        while (
            j < len(infos)
            and size + infos[j].size <= max_size
            and seg_ends[j] - 1 - infos[i].base_offset <= REL_OFFSET_MAX
        ):
            group.append(infos[j].base_offset)
            size += infos[j].size
            j += 1
        groups.append(group)
        i = j
    return groups
