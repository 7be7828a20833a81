"""Many offset commits, then restarts of the broker's state before and after the log cleaner
ran over ``__consumer_offsets`` (issue 8). Shared by the CI test and the benchmark:

    /work/main/.venv/bin/python -m tests.coordinator.offsets_restart 1000000

commits N offsets (OffsetCommit of 10 partitions at a time, 20 groups, 100 partitions each,
so 2000 distinct keys) through the group coordinator, then measures the time to open the store
and load the broker's state (topics, producer state, the group coordinator's replay) before
and after cleaning.
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import trio
from kio.schema.errors import ErrorCode

from coordinator.group.offsets import CommitRequest
from coordinator.group.offsets_log import OFFSETS_TOPIC
from proxy.broker import Broker
from proxy.config import load_config
from storage.api import TopicPartition
from storage.backends import open_store
from wire.records import iter_batches

GROUPS, PARTITIONS, PER_COMMIT = 20, 100, 10


@asynccontextmanager
async def broker_at(data_dir: str, segment_bytes: int = 1 << 20) -> AsyncIterator[Broker]:
    cfg = load_config(
        listen="127.0.0.1:0",
        advertise=None,
        data_dir=data_dir,
        config_file=None,
        overrides={"offsets.topic.segment.bytes": str(segment_bytes)},
        environ={},
    )
    async with open_store(data_dir) as store:
        broker = Broker(cfg, store)
        await broker.start()
        await broker.groups.load()
        try:
            yield broker
        finally:
            await broker.close()


def offsets_of(broker: Broker) -> dict[tuple[str, TopicPartition], int]:
    out = {}
    for g in range(GROUPS):
        group = f"g{g}"
        code, fetched = broker.groups.fetch_offsets(group, None, require_stable=False)
        assert code is ErrorCode.none
        for f in fetched:
            out[(group, f.tp)] = f.offset
    return out


@dataclass
class Measured:
    commits: int
    log_bytes_before: int
    log_bytes_after: int
    restart_before_s: float
    restart_after_s: float
    clean_s: float
    records_after: int  # records left in __consumer_offsets (what a restart replays)


async def offsets_bytes(broker: Broker) -> int:
    topic = broker.topics.get(OFFSETS_TOPIC)
    assert topic is not None
    return sum(p.log.size_bytes for p in topic.partitions)


async def offsets_records(broker: Broker) -> int:
    topic = broker.topics.get(OFFSETS_TOPIC)
    assert topic is not None
    n = 0
    for p in topic.partitions:
        data = await p.read(p.log_start_offset, 1 << 30) if p.high_watermark else b""
        n += sum(h.records_count for _, h in iter_batches(data))
    return n


async def run(data_dir: str, commits: int, segment_bytes: int = 1 << 20) -> Measured:
    async with broker_at(data_dir, segment_bytes) as broker:
        n = 0
        while n < commits:
            group = f"g{(n // PER_COMMIT) % GROUPS}"
            first = (n // (PER_COMMIT * GROUPS)) * PER_COMMIT % PARTITIONS
            reqs = [
                CommitRequest(TopicPartition("in", (first + i) % PARTITIONS), n + i, -1, None)
                for i in range(PER_COMMIT)
            ]
            got = await broker.groups.commit_offsets(group, "", None, -1, reqs)
            assert isinstance(got, dict) and set(got.values()) == {ErrorCode.none}, got
            n += PER_COMMIT
        expected = offsets_of(broker)
        size_before = await offsets_bytes(broker)
    t0 = time.perf_counter()
    async with broker_at(data_dir, segment_bytes) as broker:
        restart_before = time.perf_counter() - t0
        assert offsets_of(broker) == expected
        t1 = time.perf_counter()
        for p, plan in broker.cleaner.plans(broker.topics, broker.now_ms()):
            await broker.cleaner.clean_partition(p, plan, broker.now_ms())
        clean_s = time.perf_counter() - t1
        size_after = await offsets_bytes(broker)
    t2 = time.perf_counter()
    async with broker_at(data_dir, segment_bytes) as broker:
        restart_after = time.perf_counter() - t2
        assert offsets_of(broker) == expected
        records_after = await offsets_records(broker)
    return Measured(
        commits, size_before, size_after, restart_before, restart_after, clean_s, records_after
    )


if __name__ == "__main__":
    import tempfile

    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        m = trio.run(run, f"file://{sys.argv[2] if len(sys.argv) > 2 else tmp}", count)
    print(
        f"{m.commits} commits: __consumer_offsets {m.log_bytes_before / 1e6:.1f} MB -> "
        f"{m.log_bytes_after / 1e6:.2f} MB after cleaning ({m.clean_s:.2f} s); restart "
        f"{m.restart_before_s:.2f} s before, {m.restart_after_s:.3f} s after; "
        f"{m.records_after} records left"
    )
