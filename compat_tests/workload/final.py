"""The final reads of a workload run, through confluent-kafka, each bounded and retried while
the broker is coming back: end offsets at both isolation levels, every record of a partition
from offset 0 to an end, and a group's committed offsets."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition


def _consumer(bootstrap: str, isolation: str, group: str | None = None) -> Any:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group or f"wl-final-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "reconnect.backoff.max.ms": 300,
        }
    )


def end_offsets(
    bootstrap: str, tps: list[tuple[str, int]]
) -> dict[tuple[str, int], tuple[int, int]]:
    """(LSO, high watermark) of every partition."""
    got: dict[str, list[int]] = {}
    for iso in ("read_committed", "read_uncommitted"):
        c = _consumer(bootstrap, iso)
        try:
            got[iso] = [
                c.get_watermark_offsets(TopicPartition(t, p), 10, cached=False)[1] for t, p in tps
            ]
        finally:
            c.close()
    return {tp: (got["read_committed"][i], got["read_uncommitted"][i]) for i, tp in enumerate(tps)}


def wait_end_offsets(
    bootstrap: str, tps: list[tuple[str, int]], timeout_s: float
) -> dict[tuple[str, int], tuple[int, int]]:
    """The end offsets once every LSO has reached its high watermark, or as they are when
    ``timeout_s`` runs out (the checker then reports a stuck LSO)."""
    deadline = time.monotonic() + timeout_s
    last: dict[tuple[str, int], tuple[int, int]] | None = None
    while True:
        try:
            last = end_offsets(bootstrap, tps)
            if all(lso == hw for lso, hw in last.values()):
                return last
        except KafkaException:
            pass
        if time.monotonic() > deadline:
            if last is None:
                raise TimeoutError("no end offsets from the broker")
            return last
        time.sleep(0.5)


def read_partition(
    bootstrap: str, topic: str, partition: int, isolation: str, end: int, timeout_s: float
) -> tuple[list[list[Any]], bool]:
    """[[offset, value], ...] from offset 0 up to ``end`` (exclusive) at an isolation level,
    and whether the reader got there."""
    recs: list[list[Any]] = []
    if end <= 0:
        return recs, True
    c = _consumer(bootstrap, isolation)
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for m in c.consume(500, 0.2):
                if m.error() is None and m.offset() < end:
                    recs.append([m.offset(), m.value().decode()])
            try:
                (pos,) = c.position([TopicPartition(topic, partition)])
            except KafkaException:
                continue
            if pos.offset >= end:
                return recs, True
        return recs, False
    finally:
        c.close()


def committed_offsets(
    bootstrap: str, group: str, topic: str, partitions: int, timeout_s: float
) -> list[list[Any]]:
    """[[topic, partition, committed offset or -1], ...] of a group, read_committed."""
    deadline = time.monotonic() + timeout_s
    while True:
        c = _consumer(bootstrap, "read_committed", group)
        try:
            got = c.committed([TopicPartition(topic, p) for p in range(partitions)], 10)
            return [[tp.topic, tp.partition, max(tp.offset, -1)] for tp in got]
        except KafkaException:
            if time.monotonic() > deadline:
                raise
        finally:
            c.close()
        time.sleep(0.5)
