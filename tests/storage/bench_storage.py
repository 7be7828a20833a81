"""Throughput of the file backend with 16 KiB batches (a script, not a test).

    python -m tests.storage.bench_storage [--dir /path] [--mib 512]

Reports MB/s and CPU microseconds per operation for: appends (page cache), durable appends
(``flush_every_append``) from 1 and from 16 concurrent partitions (group commit), and 1 MiB
reads from the newest segments (inline) and from old ones (inline if the page cache holds
them, else a worker thread). A raw ``os.pwrite`` loop gives the ceiling of the same disk.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from pathlib import Path

import trio

from storage.api import LogConfig, TopicMeta, TopicPartition
from storage.backends import open_store
from storage.segment.log import FileLog
from storage.segment.store import FileStore
from tests.storage.conftest import make_batch

BATCH = make_batch(0, 16, value_size=1000)  # 16 records of ~1 KB: ~16.5 KiB
MIB = 1 << 20


def line(name: str, nbytes: int, n: int, wall: float, cpu: float) -> None:
    print(
        f"{name:<44} {nbytes / wall / 1e6:8.0f} MB/s  {wall / n * 1e6:7.1f} us/op wall"
        f"  {cpu / n * 1e6:7.1f} us/op CPU"
    )


def raw_pwrite(directory: Path, total: int) -> None:
    path = directory / "raw.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    n, pos = total // len(BATCH), 0
    t, c = time.perf_counter(), time.process_time()
    for _ in range(n):
        pos += os.pwrite(fd, BATCH, pos)
    line("raw os.pwrite (ceiling)", pos, n, time.perf_counter() - t, time.process_time() - c)
    os.close(fd)
    path.unlink()


async def appends(log: FileLog, n: int) -> int:
    buf = bytearray(BATCH)
    total = 0
    for _ in range(n):
        base = log.log_end_offset
        buf[0:8] = base.to_bytes(8, "big")
        await log.append(base, base + 15, 1015, bytes(buf))
        total += len(buf)
    return total


async def bench(directory: Path, mib: int) -> None:
    n = mib * MIB // len(BATCH)
    cfg = LogConfig(segment_bytes=64 * MIB)
    async with open_store(str(directory / "store")) as store:
        assert isinstance(store, FileStore)
        await store.create_topic(TopicMeta("t", uuid.uuid4(), 1))
        log = await store.open_partition(TopicPartition("t", 0), cfg)
        assert isinstance(log, FileLog)
        t, c = time.perf_counter(), time.process_time()
        total = await appends(log, n)
        line(f"append {len(BATCH)} B batches", total, n, time.perf_counter() - t,
             time.process_time() - c)  # fmt: skip
        await log.settle()

        for max_bytes, label in ((MIB, "read 1 MiB, newest segments (inline)"),
                                 (MIB, "read 1 MiB, old segments (cache probe)")):  # fmt: skip
            tail = "newest" in label
            start = log.segments[-2].base if tail else log.log_start_offset
            stop = log.log_end_offset if tail else log.segments[-3].base
            reads = got = 0
            t, c = time.perf_counter(), time.process_time()
            for _ in range(3 if tail else 1):
                offset = start
                while offset < stop:
                    data = await log.read(offset, max_bytes)
                    got += len(data)
                    reads += 1
                    offset += len(data) // len(BATCH) * 16  # every batch is the same
            line(label, got, reads, time.perf_counter() - t, time.process_time() - c)

        await store.create_topic(TopicMeta("d", uuid.uuid4(), 16))
        durable = LogConfig(segment_bytes=128 * MIB, flush_messages=1)
        logs = [await store.open_partition(TopicPartition("d", p), durable) for p in range(16)]
        one = logs[0]
        assert isinstance(one, FileLog)
        k = min(n, 2_000)
        runs = store.group_commit.runs
        t, c = time.perf_counter(), time.process_time()
        total = await appends(one, k)
        line("durable append, 1 partition", total, k, time.perf_counter() - t,
             time.process_time() - c)  # fmt: skip
        print(f"{'':44} fsync runs: {store.group_commit.runs - runs} for {k} appends")
        per = k // 4
        runs = store.group_commit.runs
        t, c = time.perf_counter(), time.process_time()
        async with trio.open_nursery() as nursery:
            for lg in logs:
                assert isinstance(lg, FileLog)
                nursery.start_soon(appends, lg, per)
        line("durable append, 16 partitions in parallel", 16 * per * len(BATCH), 16 * per,
             time.perf_counter() - t, time.process_time() - c)  # fmt: skip
        print(f"{'':44} fsync runs: {store.group_commit.runs - runs} for {16 * per} appends")
        runs = store.group_commit.runs
        t, c = time.perf_counter(), time.process_time()
        async with trio.open_nursery() as nursery:
            for _ in range(16):  # no lock above the log: appends interleave, fsyncs are shared
                nursery.start_soon(appends, one, per)
        line("durable append, 16 writers on 1 partition", 16 * per * len(BATCH), 16 * per,
             time.perf_counter() - t, time.process_time() - c)  # fmt: skip
        print(f"{'':44} fsync runs: {store.group_commit.runs - runs} for {16 * per} appends")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--mib", type=int, default=512, help="MiB to append")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        raw_pwrite(Path(tmp), args.mib * MIB)
        trio.run(bench, Path(tmp), args.mib)


if __name__ == "__main__":
    main()
