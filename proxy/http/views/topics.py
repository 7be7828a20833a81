"""Topics and partitions: offsets, segments, cleanup policy and the cleaner's view."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from storage.api import TopicPartition
from storage.partition import Partition

if TYPE_CHECKING:
    from proxy.broker import Broker


@dataclass(frozen=True, slots=True)
class SegmentRow:
    base_offset: int
    size: int
    largest_timestamp: int


@dataclass(frozen=True, slots=True)
class CleanerPass:
    at_ms: int
    bytes_read: int
    bytes_written: int
    segments_before: int
    segments_after: int
    complete: bool


@dataclass(frozen=True, slots=True)
class PartitionRow:
    tp: TopicPartition
    log_start: int
    last_stable: int
    high_watermark: int
    segments: tuple[SegmentRow, ...]
    size_bytes: int
    open_transactions: int
    dirty_ratio: float | None  # compacted partitions only
    last_pass: CleanerPass | None

    @property
    def lso_lag(self) -> int:
        return self.high_watermark - self.last_stable


@dataclass(frozen=True, slots=True)
class TopicRow:
    name: str
    topic_id: str
    internal: bool
    cleanup_policy: str
    partitions: tuple[PartitionRow, ...]

    @property
    def size_bytes(self) -> int:
        return sum(p.size_bytes for p in self.partitions)


def partition_row(broker: Broker, p: Partition, now_ms: int) -> PartitionRow:
    segments = tuple(
        SegmentRow(s.base_offset, s.size, s.largest_timestamp) for s in p.log.segment_infos()
    )
    last = broker.cleaner.last_passes.get(p.tp)
    return PartitionRow(
        tp=p.tp,
        log_start=p.log_start_offset,
        last_stable=p.last_stable_offset,
        high_watermark=p.high_watermark,
        segments=segments,
        size_bytes=sum(s.size for s in segments),
        open_transactions=len(p.producers.ongoing),
        dirty_ratio=broker.cleaner.plan(p, now_ms).ratio if p.config.compact else None,
        last_pass=None
        if last is None
        else CleanerPass(
            last[1],
            last[0].bytes_read,
            last[0].bytes_written,
            last[0].segments_before,
            last[0].segments_after,
            last[0].complete,
        ),
    )


def topic_rows(broker: Broker, now_ms: int, *, internal: bool = True) -> list[TopicRow]:
    """Every topic (internal ones last), each with its partitions."""
    out = []
    for name in sorted(broker.topics.names(), key=lambda n: (n.startswith("__"), n)):
        row = topic_row(broker, name, now_ms)
        if row is not None and (internal or not row.internal):
            out.append(row)
    return out


def topic_row(broker: Broker, name: str, now_ms: int) -> TopicRow | None:
    topic = broker.topics.get(name)
    if topic is None:
        return None
    live = [p for p in topic.partitions if not p.deleted]
    return TopicRow(
        name=topic.name,
        topic_id=str(topic.topic_id),
        internal=topic.internal,
        cleanup_policy=topic.settings.get("cleanup.policy", ""),
        partitions=tuple(partition_row(broker, p, now_ms) for p in live),
    )
