"""Decisions both log backends share: when a segment rolls and which segments retention deletes.

Pure functions of numbers and ``now_ms``: no I/O, no clock. The memory backend keeps the same
segment structure as the file backend only so that these rules, and therefore what the contract
suite observes (retention, ``size_bytes``), are identical.

Kafka sources: ``LogSegment.shouldRoll`` and ``UnifiedLog.deleteRetentionMsBreachedSegments`` /
``deleteRetentionSizeBreachedSegments``. Differences: no ``segment.jitter.ms``, and a segment
without timestamps ages by its last append's wall time (Kafka: the file's mtime).
"""

from __future__ import annotations

from collections.abc import Sequence

from storage.api import LogConfig

# Index entries hold offsets relative to the segment's base offset: Kafka rolls before an
# offset could no longer be expressed as a non-negative int32 relative offset.
REL_OFFSET_MAX = 2**31 - 1
POSITION_MAX = 2**32 - 1  # index positions are u32 (Kafka caps segment.bytes at int32 max)
OFFSET_INDEX_ENTRY = 8
TIME_INDEX_ENTRY = 12


def should_roll(
    cfg: LogConfig,
    *,
    seg_size: int,
    seg_base: int,
    add_bytes: int,
    last_offset: int,
    roll_basis_ms: int | None,
    now_ms: int,
    index_entries: int = 0,
) -> bool:
    """Whether an append of ``add_bytes`` ending at ``last_offset`` must go to a new segment.

    An empty segment never rolls: a batch larger than ``segment_bytes`` would get a segment of
    its own (``Partition.append`` refuses one first, with RECORD_LIST_TOO_LARGE, as Kafka does). ``roll_basis_ms`` is when the segment's age started (its first append's wall time, or
    after a restart its first batch's max timestamp, as in Kafka); None for an empty segment.
    """
    if seg_size == 0:
        return False
    return (
        seg_size + add_bytes > min(cfg.segment_bytes, POSITION_MAX)
        or (roll_basis_ms is not None and now_ms - roll_basis_ms > cfg.segment_ms)
        or last_offset - seg_base > REL_OFFSET_MAX
        or (index_entries + 1) * OFFSET_INDEX_ENTRY > cfg.segment_index_bytes
        or (index_entries + 1) * TIME_INDEX_ENTRY > cfg.segment_index_bytes
    )


def segments_below(bases: Sequence[int], offset: int) -> int:
    """How many leading segments (base offsets ``bases``, oldest first) end at or below
    ``offset``: segment i qualifies when segment i + 1 starts at or below it."""
    n = 0
    while n + 1 < len(bases) and bases[n + 1] <= offset:
        n += 1
    return n


def segment_expired(cfg: LogConfig, roll_basis_ms: int | None, now_ms: int) -> bool:
    """The active segment is over ``segment_ms`` old (retention rolls it before deleting)."""
    return roll_basis_ms is not None and now_ms - roll_basis_ms > cfg.segment_ms


def retention_deletable(
    cfg: LogConfig,
    segments: Sequence[tuple[int, int]],
    total_size: int,
    now_ms: int,
    stable: int | None = None,
) -> int:
    """How many of the oldest segments retention deletes.

    ``stable``: how many leading segments lie entirely below the last stable offset (their
    successor's base offset is at or below it); retention never deletes past them, so an open
    transaction's first offset, its data and anything after it stay (issue 5: a segment at or
    past the LSO is never deleted; Kafka bounds deletion by the high watermark, which the LSO
    never exceeds). None: no bound.

    ``segments`` are (size in bytes, largest timestamp) oldest first; the last one is the active
    segment and is never deleted. Nothing is deleted unless ``cleanup.policy`` lists
    ``delete``. Time first: leading segments whose largest timestamp is more
    than ``retention_ms`` old. Then size: while the log minus the next oldest segment would
    still be at least ``retention_bytes``, that segment goes (Kafka's ``diff - size >= 0``).
    """
    if not cfg.delete:  # cleanup.policy=compact: the cleaner, not retention, shrinks the log
        return 0
    candidates = segments[:-1]
    if stable is not None:
        candidates = candidates[:stable]
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
