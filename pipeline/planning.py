"""Offset arithmetic of the source: positions, rate limits, and splitting into Spark partitions.

A position is a map (topic, partition) -> offset. Spark keeps the streaming positions in its
checkpoint as JSON, in the same shape as its Kafka connector: `{"topic": {"0": 23, "1": 7}}`
(`to_json` / `from_json`). A micro-batch reads [start, end) of every partition; one Spark
partition reads one Kafka partition's range, and a large range is cut into consecutive pieces
(`plan_ranges`), deterministically, so a replayed micro-batch reads exactly what it read the
first time.

With read_committed the end of a range is at most the last stable offset; offsets inside a
range may be transaction markers or aborted records that the reader skips, so a range of n
offsets yields at most n rows (rate limits count offsets, as Spark's connector does).

Pure: no Spark, no Kafka client.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.options import EARLIEST, LATEST, OffsetSpec, OptionError

TP = tuple[str, int]
Positions = dict[TP, int]


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Offsets [from_offset, until_offset) of one partition: one Spark task's input."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


# The split a micro-batch was planned with, kept in its end offsets (a key no topic can have:
# ':' is not allowed in topic names), so that a replay is cut into the same Spark tasks even
# when minPartitions / maxRecordsPerPartition changed between runs of one checkpoint.
SPLIT_KEY = "kafkad:split"


@dataclass(frozen=True)
class Split:
    min_partitions: int | None = None
    max_records_per_partition: int | None = None


def to_json(positions: Mapping[TP, int], split: Split | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for (topic, partition), offset in sorted(positions.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    if split is not None:
        out[SPLIT_KEY] = {
            "minPartitions": split.min_partitions,
            "maxRecordsPerPartition": split.max_records_per_partition,
        }
    return out


def from_json(value: Mapping[str, Mapping[str, int]]) -> Positions:
    return {
        (t, int(p)): int(o)
        for t, parts in value.items()
        if t != SPLIT_KEY
        for p, o in parts.items()
    }


def split_of(value: Mapping[str, Any]) -> Split | None:
    """The split recorded in end offsets (None: offsets written without one)."""
    raw = value.get(SPLIT_KEY)
    if raw is None:
        return None
    return Split(raw.get("minPartitions"), raw.get("maxRecordsPerPartition"))


def resolve(
    spec: OffsetSpec,
    partitions: Iterable[TP],
    earliest: Mapping[TP, int],
    latest: Mapping[TP, int],
    name: str,
) -> Positions:
    """Turn a startingOffsets/endingOffsets spec into absolute offsets for these partitions.
    A JSON spec must name every partition (as in Spark); -2/-1 mean earliest/latest."""
    out: Positions = {}
    for tp in sorted(partitions):
        if spec == "earliest":
            out[tp] = earliest[tp]
        elif spec == "latest":
            out[tp] = latest[tp]
        else:
            if tp not in spec:
                raise OptionError(f"option {name!r} does not name partition {tp[0]}-{tp[1]}")
            wanted = spec[tp]
            out[tp] = (
                earliest[tp] if wanted == EARLIEST else latest[tp] if wanted == LATEST else wanted
            )
    return out


def rate_limit(start: Mapping[TP, int], latest: Mapping[TP, int], max_offsets: int) -> Positions:
    """Spark's maxOffsetsPerTrigger: the offsets available in each partition, shared out in
    proportion to what each has (never more than it has; at least 1 where it has any)."""
    sizes = {tp: max(0, end - start.get(tp, end)) for tp, end in latest.items()}
    total = sum(sizes.values())
    if total <= max_offsets:
        return dict(latest)
    out: Positions = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        share = max_offsets * sizes[tp] / total
        take = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(end, begin + take)
    return out


def cap(latest: Mapping[TP, int], target: Mapping[TP, int], start: Mapping[TP, int]) -> Positions:
    """Trigger.AvailableNow: never past the target taken when the query started; partitions
    that appeared since then stay where they start."""
    return {
        tp: min(end, target[tp]) if tp in target else start.get(tp, end)
        for tp, end in latest.items()
    }


def plan_ranges(
    start: Mapping[TP, int],
    end: Mapping[TP, int],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """The ranges [start, end) per partition, non-empty ones only, cut so that none holds more
    than max_records_per_partition offsets and, like Spark's KafkaOffsetRangeCalculator, into
    about min_partitions pieces in proportion to their sizes when there are fewer."""
    ranges = [
        OffsetRange(tp[0], tp[1], start[tp], end[tp])
        for tp in sorted(end)
        if tp in start and end[tp] > start[tp]
    ]
    if max_records_per_partition is not None:
        ranges = [
            piece
            for r in ranges
            for piece in _split(r, math.ceil(r.size / max_records_per_partition))
        ]
    if min_partitions is not None and 0 < len(ranges) < min_partitions:
        total = sum(r.size for r in ranges)
        ranges = [
            piece
            for r in ranges
            for piece in _split(r, max(1, round(r.size / total * min_partitions)))
        ]
    return ranges


def _split(r: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = max(1, min(parts, r.size))
    bounds = [r.from_offset + r.size * i // parts for i in range(parts + 1)]
    return [OffsetRange(r.topic, r.partition, lo, hi) for lo, hi in itertools.pairwise(bounds)]


def lost(start: Mapping[TP, int], earliest: Mapping[TP, int]) -> dict[TP, tuple[int, int]]:
    """Partitions whose next offset was already deleted (retention): tp -> (wanted, earliest)."""
    return {
        tp: (offset, earliest[tp])
        for tp, offset in start.items()
        if tp in earliest and offset < earliest[tp]
    }


def went_back(start: Mapping[TP, int], latest: Mapping[TP, int]) -> dict[TP, tuple[int, int]]:
    """Partitions whose latest offset is below where the next batch starts (the topic was
    deleted and re-created, or truncated): tp -> (start, latest)."""
    return {
        tp: (offset, latest[tp])
        for tp, offset in start.items()
        if tp in latest and latest[tp] < offset
    }
