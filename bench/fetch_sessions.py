"""What an incremental fetch session (KIP-227) saves a consumer of many partitions.

    python bench/fetch_sessions.py [--partitions 100] [--fetches 3000]

An in-memory broker and its dispatcher, in this process (no sockets: the figure is the
broker's own work). A topic of P partitions holds one small batch each; a consumer that has
read everything polls again and again, as an idle consumer does:

* sessionless: every Fetch (v18, session id 0, epoch -1) names all P partitions and every
  answer lists all P;
* incremental: one full Fetch (epoch 0) opens a session, then each Fetch names no partition
  and the answer lists none (nothing changed).

Reported per fetch: request and response bytes on the wire, and broker CPU (process time of
``Dispatcher.handle``, the best of 15 blocks, so other load on the machine counts least).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: the repository's packages, tests' raw client too
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import trio
from kio.schema.create_topics.v5 import request as ct
from kio.schema.fetch.v18 import request as fr
from kio.schema.produce.v9 import request as pr

from proxy.broker import Broker
from proxy.config import load_config
from proxy.dispatch import Dispatcher
from storage.backends import open_store
from tests.proxy.harness import decode_response, encode_request
from wire.records import Record, build_batch

MS = datetime.timedelta(milliseconds=1)
TOPIC = "sessions"


def frame(req: Any, cid: int = 1) -> bytes:
    return encode_request(req, cid)[4:]  # what Dispatcher.handle takes: no size prefix


def fetch(topic_id: Any, partitions: int, session: tuple[int, int]) -> Any:
    wanted = (
        ()
        if partitions == 0
        else (
            fr.FetchTopic(
                topic_id=topic_id,
                partitions=tuple(
                    fr.FetchPartition(partition=p, fetch_offset=1, partition_max_bytes=1 << 20)
                    for p in range(partitions)
                ),
            ),
        )
    )
    return fr.FetchRequest(
        max_wait=0 * MS,
        min_bytes=0,
        max_bytes=50 << 20,
        session_id=session[0],
        session_epoch=session[1],
        topics=wanted,
        forgotten_topics_data=(),
    )


async def cpu_per_call(d: Dispatcher, make: Any, n: int) -> float:
    """Best-of-15 process time of one ``handle`` (µs); ``make(i)`` gives the i-th frame."""
    blocks, best = 15, float("inf")
    i = 0
    for _ in range(blocks):
        started = time.process_time()
        for _ in range(n // blocks):
            await d.handle(make(i))
            i += 1
        best = min(best, (time.process_time() - started) / (n // blocks))
    return best * 1e6


async def run(partitions: int, fetches: int) -> None:
    cfg = load_config(
        listen="127.0.0.1:0",
        advertise=None,
        data_dir="memory://",
        config_file=None,
        overrides={},
        environ={},
    )
    async with open_store(cfg.data_dir) as store:
        broker = Broker(cfg, store)
        d = Dispatcher(broker)
        topic = ct.CreatableTopic(
            name=TOPIC,
            num_partitions=partitions,
            replication_factor=-1,
            assignments=(),
            configs=(),
        )
        await d.handle(
            frame(ct.CreateTopicsRequest(topics=(topic,), timeout=1000 * MS, validate_only=False))
        )
        data = build_batch(
            [Record(offset_delta=0, timestamp_delta=0, key=None, value=b"v", headers=[])],
            base_timestamp=1_700_000_000_000,
        )
        for p in range(partitions):
            part = pr.PartitionProduceData(index=p, records=data)
            await d.handle(
                frame(
                    pr.ProduceRequest(
                        transactional_id=None,
                        acks=1,
                        timeout=1000 * MS,
                        topic_data=(pr.TopicProduceData(name=TOPIC, partition_data=(part,)),),
                    )
                )
            )
        found = broker.topics.get(TOPIC)
        assert found is not None
        tid = found.topic_id

        full = frame(fetch(tid, partitions, (0, -1)))
        full_answer = await d.handle(full)
        assert full_answer is not None
        full_cpu = await cpu_per_call(d, lambda _: full, fetches)

        opened = await d.handle(frame(fetch(tid, partitions, (0, 0))))
        assert opened is not None
        session_id = decode_response(1, 18, opened[4:])[1].session_id
        assert session_id != 0, "no session was created"
        frames = [frame(fetch(tid, 0, (session_id, e))) for e in range(1, fetches + 2)]
        inc_answer = await d.handle(frames[0])
        assert inc_answer is not None
        assert decode_response(1, 18, inc_answer[4:])[1].responses == ()  # nothing changed
        inc_cpu = await cpu_per_call(d, lambda i: frames[i + 1], fetches)

        print(f"{partitions} partitions, an idle consumer's Fetch v18 (per fetch):")
        print(f"{'':14}{'request B':>11}{'response B':>12}{'broker CPU µs':>15}")
        print(f"{'sessionless':14}{len(full) + 4:>11}{len(full_answer):>12}{full_cpu:>15.0f}")
        print(f"{'incremental':14}{len(frames[0]) + 4:>11}{len(inc_answer):>12}{inc_cpu:>15.0f}")
        broker.shutting_down.set()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--fetches", type=int, default=3000)
    args = ap.parse_args()
    trio.run(run, args.partitions, args.fetches)


if __name__ == "__main__":
    main()
