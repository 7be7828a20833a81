"""``Partition.append`` alone: one 100-byte record batch into a file log, per call.

    python bench/append_cpu.py [--appends 6000] [--idempotent] [--cold KIB] [--checkout DIR]

The storage share of a produce (the partition lock, the producer checks, the header patch,
the roll decision, the ``pwrite``, the index and the high watermark), without the handler and
the codecs around it, so a storage change shows at a resolution ``produce_cpu.py`` (~30 µs a
request, noisier) does not give. A file store in a fresh temp dir, one partition, default
topic configs; the batches are built and parsed beforehand. Reported: the median wall time of
one append, back to back, or with ``--cold KIB`` KiB of memory written before each (as
``produce_cpu.py --cold``). Compare builds with ``--checkout`` a ``git archive`` of the other
build, alternating runs and taking the median of several.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository's packages
    here = Path(__file__).resolve().parent.parent
    if "--checkout" in sys.argv:
        here = Path(sys.argv[sys.argv.index("--checkout") + 1]).resolve()
    sys.path.insert(0, str(here))

import trio

from storage.api import LogConfig, TopicMeta, TopicPartition
from storage.backends import open_store
from storage.partition import Partition
from wire.records import BatchHeader, Record, build_batch, read_batch_header


def batches(n: int, idempotent: bool, now_ms: int) -> list[tuple[bytes, BatchHeader]]:
    record = Record(offset_delta=0, timestamp_delta=0, key=None, value=b"x" * 100, headers=[])
    out = []
    for seq in range(n):
        data = build_batch(
            [record],
            base_timestamp=now_ms,
            producer_id=1000 if idempotent else -1,
            producer_epoch=0 if idempotent else -1,
            base_sequence=seq if idempotent else -1,
        )
        out.append((data, read_batch_header(data)))
    return out


async def run(args: argparse.Namespace, directory: str) -> None:
    async with open_store(directory) as store:
        meta = TopicMeta("append-cpu", uuid.uuid4(), 1)
        await store.create_topic(meta)
        tp, cfg = TopicPartition(meta.name, 0), LogConfig()
        log = await store.open_partition(tp, cfg)
        partition = Partition(tp, meta.topic_id, log, cfg)
        now = int(time.time() * 1000)
        junk = bytearray(args.cold * 1024)
        lines = len(junk[::64])
        marks = (bytes(lines), b"\1" * lines)
        took = []
        clock = time.perf_counter_ns
        for n, (data, header) in enumerate(batches(args.appends, args.idempotent, now)):
            if args.cold:
                junk[::64] = marks[n % 2]
            started = clock()
            await partition.append(data, header, now)
            took.append(clock() - started)
        await log.close()
    took.sort()
    kind = "idempotent" if args.idempotent else "plain"
    where = f"{args.cold} KiB written between" if args.cold else "back to back"
    print(f"{kind} Partition.append of one 100 B record, {len(took)} appends, {where}:")
    print(f"  wall per append: median {took[len(took) // 2] / 1000:,.2f} µs")


def main() -> None:
    ap_ = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap_.add_argument("--appends", type=int, default=6000)
    ap_.add_argument("--idempotent", action="store_true")
    ap_.add_argument("--cold", type=int, default=0, metavar="KIB")
    ap_.add_argument("--checkout", default=None, help="another source tree to time")
    args = ap_.parse_args()
    with tempfile.TemporaryDirectory(prefix="append-cpu-") as tmp:
        trio.run(run, args, tmp)


if __name__ == "__main__":
    main()
