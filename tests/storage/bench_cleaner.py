"""Log cleaner throughput on the file backend (issue 8's closing note):

    /work/main/.venv/bin/python -m tests.storage.bench_cleaner [MB] [value bytes] [codec]

writes MB of keyed data (batches of 10 records, 4 versions of each key, so a pass keeps about a
quarter), rolls 16 MiB segments, then times one cleaning pass over everything below the active
segment: MB/s = bytes read by the pass (key map sweep + filter sweep counted once, the log's
size) / the pass's wall time.
"""

from __future__ import annotations

import sys
import tempfile
import time
import uuid

import trio

from storage.api import LogConfig, TopicMeta, TopicPartition
from storage.backends import open_store
from storage.cleaner.policy import plan
from storage.cleaner.runner import Throttle, clean_partition
from storage.partition import Partition
from wire.records import Record, build_batch, read_batch_header

TP = TopicPartition("bench", 0)


async def main(megabytes: int, value_size: int, codec: int) -> None:
    cfg = LogConfig(segment_bytes=16 << 20, compact=True, delete=False)
    with tempfile.TemporaryDirectory() as tmp:
        async with open_store(f"file://{tmp}") as store:
            await store.create_topic(TopicMeta("bench", uuid.uuid4(), 1))
            p = Partition(TP, uuid.uuid4(), await store.open_partition(TP, cfg), cfg)
            total = megabytes << 20
            records = total // (value_size + 20)
            keys = max(1, records // 4)
            value = b"x" * value_size
            now = int(time.time() * 1000)
            n = 0
            while p.log.size_bytes < total:
                batch = build_batch(
                    [Record(i, 0, b"key-%09d" % ((n + i) % keys), value) for i in range(10)],
                    base_timestamp=now,
                    compression=codec,
                )
                await p.append(batch, read_batch_header(batch), now)
                n += 10
            await p.append(batch, read_batch_header(batch), now)
            size = p.log.size_bytes
            pl = plan(
                p.log.segment_infos(),
                cfg,
                checkpoint=None,
                log_start=0,
                log_end=p.high_watermark,
                last_stable=p.last_stable_offset,
                now_ms=now,
            )
            t0 = time.perf_counter()
            r = await clean_partition(
                p, pl, now, max_map_entries=10_000_000, throttle=Throttle(float("inf"))
            )
            dt = time.perf_counter() - t0
            print(
                f"{size / 1e6:.0f} MB, {n} records, {keys} keys, codec {codec}: pass "
                f"{dt:.1f} s = {pl.cleanable_bytes / 1e6 / dt:.1f} MB/s of log cleaned "
                f"({r.bytes_read / 1e6:.0f} MB read, {r.bytes_written / 1e6:.0f} MB written, "
                f"{r.segments_before} -> {r.segments_after} segments)"
            )


if __name__ == "__main__":
    args = sys.argv[1:] + [None] * 3
    trio.run(main, int(args[0] or 200), int(args[1] or 100), int(args[2] or 0))
