"""Broker CPU of one small transaction, in process (no sockets, no client).

    python bench/txn_cpu.py [--txns 3000] [--records 5] [--blocks 15] [--data-dir DIR|memory://]

A broker and its dispatcher in this process, its transaction coordinator running, a file
data dir (default: a fresh temp dir, as ``throughput.py --start-kafkad``). One transactional
producer (InitProducerId v4 once) then runs back-to-back transactions the way librdkafka does
with ``linger.ms=0``: AddPartitionsToTxn v3, one Produce v9 of ``--records`` records (acks=-1),
EndTxn v3 commit. Reported: process time per transaction and per request kind, the best of 15
blocks (``--blocks``; 60 blocks of 100 transactions resolve a 5% change on a busy machine), so
other load on the machine counts least. The socket work (a read and a write per request, about
a fifth of the broker's CPU in ``throughput.py``'s txn phase) is not in it: this is the Python
side, the figure to compare builds by (``--checkout`` a ``git archive`` of the other build, as
bench/startup.py does).
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
from kio.schema.add_partitions_to_txn.v3 import request as ap
from kio.schema.create_topics.v5 import request as ct
from kio.schema.end_txn.v3 import request as et
from kio.schema.init_producer_id.v4 import request as ip
from kio.schema.produce.v9 import request as pr

from proxy.broker import Broker
from proxy.config import load_config
from proxy.dispatch import Dispatcher
from storage.backends import open_store
from tests.proxy.harness import decode_response, encode_request
from wire.records import Record, build_batch

MS = datetime.timedelta(milliseconds=1)
TOPIC = "txn-cpu"
TXN_ID = "bench-txn"


def frame(req: Any, cid: int = 1) -> bytes:
    return encode_request(req, cid)[4:]  # what Dispatcher.handle takes: no size prefix


def errors(answer: bytes | None, api_key: int, version: int) -> Any:
    assert answer is not None
    return decode_response(api_key, version, answer[4:])[1]


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
        nursery.start_soon(broker.txns.run)
        await broker.txns.loaded.wait()
        d = Dispatcher(broker)
        topic = ct.CreatableTopic(
            name=TOPIC, num_partitions=1, replication_factor=-1, assignments=(), configs=()
        )
        await d.handle(
            frame(ct.CreateTopicsRequest(topics=(topic,), timeout=1000 * MS, validate_only=False))
        )
        init = ip.InitProducerIdRequest(
            transactional_id=TXN_ID,
            transaction_timeout=60_000 * MS,
            producer_id=-1,
            producer_epoch=-1,
        )
        got = errors(await d.handle(frame(init)), 22, 4)
        assert got.error_code == 0, got
        pid, epoch = int(got.producer_id), int(got.producer_epoch)
        add = frame(
            ap.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=TXN_ID,
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=(ap.AddPartitionsToTxnTopic(name=TOPIC, partitions=(0,)),),
            )
        )
        end = frame(
            et.EndTxnRequest(
                transactional_id=TXN_ID, producer_id=pid, producer_epoch=epoch, committed=True
            )
        )
        value = b"x" * 100

        def produce(seq: int) -> bytes:
            records = [
                Record(offset_delta=i, timestamp_delta=0, key=None, value=value, headers=[])
                for i in range(args.records)
            ]
            batch = build_batch(
                records,
                base_timestamp=int(time.time() * 1000),
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=seq,
                transactional=True,
            )
            part = pr.PartitionProduceData(index=0, records=batch)
            return frame(
                pr.ProduceRequest(
                    transactional_id=TXN_ID,
                    acks=-1,
                    timeout=30_000 * MS,
                    topic_data=(pr.TopicProduceData(name=TOPIC, partition_data=(part,)),),
                )
            )

        produces = [produce(i * args.records) for i in range(args.txns + 1)]
        kinds = {"AddPartitionsToTxn": 0.0, "Produce": 0.0, "EndTxn": 0.0}
        blocks, best, best_kinds = args.blocks, float("inf"), dict(kinds)
        per_block = max(1, args.txns // blocks)
        i = 0
        for _ in range(blocks):
            spent = dict.fromkeys(kinds, 0.0)
            started = time.process_time()
            for _ in range(per_block):
                steps = (("AddPartitionsToTxn", add), ("Produce", produces[i]), ("EndTxn", end))
                for name, f in steps:
                    t = time.process_time()
                    answer = await d.handle(f)
                    spent[name] += time.process_time() - t
                    assert answer is not None
                i += 1
            took = (time.process_time() - started) / per_block
            if took < best:
                best, best_kinds = took, {k: v / per_block for k, v in spent.items()}
        got = errors(await d.handle(add), 24, 3)  # the last commit completed: a new one starts
        assert (
            got.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        )
        print(f"{args.records} records/txn, {per_block * blocks} txns, best of {blocks} blocks:")
        print(f"  broker CPU per transaction: {best * 1e6:,.0f} µs")
        for name, v in best_kinds.items():
            print(f"    {name:20} {v * 1e6:7,.0f} µs")
        nursery.cancel_scope.cancel()


def main() -> None:
    ap_ = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap_.add_argument("--txns", type=int, default=3000)
    ap_.add_argument("--records", type=int, default=5)
    ap_.add_argument("--blocks", type=int, default=15, help="report the best of this many")
    ap_.add_argument("--data-dir", default=None, help="default: a fresh temp dir")
    ap_.add_argument("--checkout", default=None, help="another source tree to time")
    args = ap_.parse_args()
    with tempfile.TemporaryDirectory(prefix="txn-cpu-") as tmp:
        args.data_dir = args.data_dir or tmp
        trio.run(run, args)


if __name__ == "__main__":
    main()
