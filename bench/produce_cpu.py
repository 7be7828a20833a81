"""Broker CPU of one one-record acks=all Produce, in process (no sockets, no client).

    python bench/produce_cpu.py [--requests 6000] [--blocks 20] [--idempotent] [--checkout DIR]

A broker and its dispatcher in this process, a file data dir (default: a fresh temp dir, as
``throughput.py --start-kafkad``), one topic of one partition. Produce v9 (what librdkafka
sends) of one 100-byte record, acks=-1, back to back, as the latency loop of
``throughput.py --latency`` does (``linger.ms=0``, one request in flight); ``--idempotent``
gives the batches a producer id and sequences (InitProducerId once). Reported: process time
per request, the best of ``--blocks`` blocks, so other load on the machine counts least. The
socket work (a read and a write per request) is not in it. Compare builds with ``--checkout``
a ``git archive`` of the other build (as bench/txn_cpu.py does), alternating runs.

``--cold KIB`` writes KIB KiB of memory between requests and reports the median wall time of
one: a broker serving one client on 2 cores finds its caches cold at each request (a real
round trip's handling costs ~3x the back-to-back figure), so a change that touches less memory
saves more there than the back-to-back figure shows.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: the repository's packages, tests' raw client too
    here = Path(__file__).resolve().parent.parent
    if "--checkout" in sys.argv:
        here = Path(sys.argv[sys.argv.index("--checkout") + 1]).resolve()
    sys.path.insert(0, str(here))

import trio
from kio.schema.create_topics.v5 import request as ct
from kio.schema.init_producer_id.v4 import request as ip
from kio.schema.produce.v9 import request as pr

from proxy.broker import Broker
from proxy.config import load_config
from proxy.dispatch import Dispatcher
from storage.backends import open_store
from tests.proxy.harness import decode_response, encode_request
from wire.records import Record, build_batch

MS = datetime.timedelta(milliseconds=1)
TOPIC = "produce-cpu"


def frame(req: Any, cid: int = 1) -> bytes:
    return encode_request(req, cid)[4:]  # what Dispatcher.handle takes: no size prefix


async def run(args: argparse.Namespace) -> None:
    cfg = load_config(
        listen="127.0.0.1:0",
        advertise=None,
        data_dir=args.data_dir,
        config_file=None,
        overrides={},
        environ={},
    )
    async with open_store(cfg.data_dir) as store, trio.open_nursery() as nursery:
        broker = Broker(cfg, store)
        await broker.start()
        d = Dispatcher(broker)
        topic = ct.CreatableTopic(
            name=TOPIC, num_partitions=1, replication_factor=-1, assignments=(), configs=()
        )
        await d.handle(
            frame(ct.CreateTopicsRequest(topics=(topic,), timeout=1000 * MS, validate_only=False))
        )
        pid, epoch = -1, -1
        if args.idempotent:
            init = ip.InitProducerIdRequest(
                transactional_id=None,
                transaction_timeout=60_000 * MS,
                producer_id=-1,
                producer_epoch=-1,
            )
            answer = await d.handle(frame(init))
            assert answer is not None
            got = decode_response(22, 4, answer[4:])[1]
            assert got.error_code == 0, got
            pid, epoch = int(got.producer_id), int(got.producer_epoch)
        value = b"x" * 100

        def produce(seq: int) -> bytes:
            record = Record(offset_delta=0, timestamp_delta=0, key=None, value=value, headers=[])
            batch = build_batch(
                [record],
                base_timestamp=int(time.time() * 1000),
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=seq if pid >= 0 else -1,
            )
            part = pr.PartitionProduceData(index=0, records=batch)
            return frame(
                pr.ProduceRequest(
                    transactional_id=None,
                    acks=-1,
                    timeout=30_000 * MS,
                    topic_data=(pr.TopicProduceData(name=TOPIC, partition_data=(part,)),),
                ),
                seq + 1,
            )

        frames = [produce(i) for i in range(args.requests)]
        first = await d.handle(frames[0])
        assert first is not None
        resp = decode_response(0, 9, first[4:])[1]
        assert resp.responses[0].partition_responses[0].error_code == 0, resp
        blocks, best = args.blocks, float("inf")
        per_block = max(1, (args.requests - 1) // blocks)
        i = 1
        if args.cold:
            await cold_loop(d, frames[1:], args.cold)
            nursery.cancel_scope.cancel()
            return
        for _ in range(blocks):
            started = time.process_time()
            for _ in range(per_block):
                await d.handle(frames[i])
                i += 1
            best = min(best, (time.process_time() - started) / per_block)
        kind = "idempotent" if args.idempotent else "plain"
        print(f"{kind} one-record acks=-1 Produce v9, {per_block * blocks} requests:")
        print(f"  broker CPU per request (best of {blocks} blocks): {best * 1e6:,.1f} µs")
        nursery.cancel_scope.cancel()


async def cold_loop(d: Dispatcher, frames: list[bytes], kib: int) -> None:
    """``--cold``: ``kib`` KiB of memory written between requests (every cache line), as the
    client and the kernel do between a real broker's requests on 2 cores; the median wall time
    of a request (a median, so preemption by other load counts least)."""
    junk = bytearray(kib * 1024)
    ones = bytes(len(junk[::64]))
    took = []
    for n, data in enumerate(frames):
        junk[::64] = ones if n % 2 else ones.replace(b"\0", b"\1")
        started = time.perf_counter_ns()
        await d.handle(data)
        took.append(time.perf_counter_ns() - started)
    took.sort()
    print(f"one-record acks=-1 Produce v9, {len(took)} requests, {kib} KiB written between:")
    print(f"  wall per request: median {took[len(took) // 2] / 1000:,.1f} µs")


def main() -> None:
    ap_ = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap_.add_argument("--requests", type=int, default=6000)
    ap_.add_argument("--blocks", type=int, default=20, help="report the best of this many")
    ap_.add_argument("--idempotent", action="store_true")
    ap_.add_argument("--data-dir", default=None, help="default: a fresh temp dir")
    ap_.add_argument("--checkout", default=None, help="another source tree to time")
    ap_.add_argument(
        "--cold", type=int, default=0, metavar="KIB", help="write KIB KiB between requests"
    )
    args = ap_.parse_args()
    with tempfile.TemporaryDirectory(prefix="produce-cpu-") as tmp:
        args.data_dir = args.data_dir or tmp
        trio.run(run, args)


if __name__ == "__main__":
    main()
