"""Transaction version 2 against classic transactions: transactions/s and broker CPU per
transaction, same run, same broker.

    python bench/txn_versions.py [--records 5] [--txns 400] [--rounds 5] [--producers 2]
                                 [--bootstrap HOST:PORT]

Both flows are the raw-protocol producer ``kafkad/client/txn_producer.py`` (what Java 4.x's
producer sends), each transaction ``--records`` records as one batch to one partition, then
a commit:

* classic: AddPartitionsToTxn v3, Produce v11, EndTxn v4 (3 requests; the epoch stays);
* tv2: Produce v12 (the broker adds the partition through its coordinator), EndTxn v5
  (2 requests; the epoch is bumped at every commit).

``--producers`` threads, each with its own transactional id and a partition of its own, run
back-to-back transactions; blocks of ``--txns`` transactions per producer alternate between the
flows (classic, tv2, tv2, classic, ...), so load drift on the machine hits both alike. Broker
CPU is user+system of the broker process over each block (``/proc/PID/stat``). The figures are
medians over ``--rounds``; ``spread`` is (max - min) / median.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository's packages
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.brokers import Broker, external_broker, start_kafkad
from kafkad.client.txn_producer import TxnProducer
from kafkad.client.txn_transport import SocketTransport

FLOWS = ("classic", "tv2")


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    t = SocketTransport(bootstrap)
    try:
        topic = {"name": name, "num_partitions": partitions, "replication_factor": 1}
        resp = t.send(None, 19, 7, {"topics": [topic], "timeout": 30_000})
        code = int(resp.topics[0].error_code)
        if code not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
            raise RuntimeError(f"CreateTopics {name}: error code {code}")
    finally:
        t.close()


class Worker:
    def __init__(self, bootstrap: str, topic: str, partition: int, flow: str) -> None:
        self.t = SocketTransport(bootstrap)
        tid = f"bench-{flow}-{partition}-{uuid.uuid4().hex[:6]}"
        self.p = TxnProducer(self.t, tid, tv2=flow == "tv2")
        self.p.init_transactions()
        self.topic, self.partition = topic, partition

    def run(self, txns: int, records: int, value: bytes) -> None:
        values = [value] * records
        for _ in range(txns):
            self.p.begin()
            self.p.send(self.topic, self.partition, values)
            self.p.commit()


def block(
    broker: Broker, workers: list[Worker], txns: int, records: int, value: bytes
) -> tuple[float, float | None]:
    """(transactions/s, broker CPU ms per transaction) of one block."""
    errors: list[BaseException] = []

    def go(w: Worker) -> None:
        try:
            w.run(txns, records, value)
        except BaseException as exc:  # reported after the block
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(w,)) for w in workers]
    cpu0, t0 = broker.cpu_seconds(), time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall, cpu1 = time.monotonic() - t0, broker.cpu_seconds()
    if errors:
        raise RuntimeError(f"a producer failed: {errors[0]!r}") from errors[0]
    total = txns * len(workers)
    cpu_ms = None if cpu0 is None or cpu1 is None else (cpu1 - cpu0) * 1000 / total
    return total / wall, cpu_ms


def spread(xs: list[float]) -> float:
    med = statistics.median(xs)
    return (max(xs) - min(xs)) / med if med else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=5, help="records per transaction")
    ap.add_argument("--txns", type=int, default=400, help="transactions per producer per block")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--bootstrap", help="an already running broker (default: start kafkad)")
    ap.add_argument("--flows", default="classic,tv2", help="which flows, comma-separated")
    ap.add_argument("--kafkad-set", action="append", default=[], metavar="NAME=VALUE")
    args = ap.parse_args()
    flows = tuple(f for f in FLOWS if f in args.flows.split(","))

    if args.bootstrap:
        broker = external_broker("external", args.bootstrap)
    else:
        extra = [a for kv in args.kafkad_set for a in ("--set", kv)]
        broker = start_kafkad("memory://", Path("/tmp"), extra)
    try:
        if "tv2" in flows:
            probe = SocketTransport(broker.bootstrap)
            why = probe.why_no_tv2()
            probe.close()
            if why is not None:
                raise SystemExit(f"no transaction version 2: {why} (--flows classic runs the rest)")
        topic = f"txn-versions-{uuid.uuid4().hex[:6]}"
        create_topic(broker.bootstrap, topic, 2 * args.producers)
        value = b"v" * args.value_size
        workers = {
            flow: [Worker(broker.bootstrap, topic, 2 * i + k, flow) for i in range(args.producers)]
            for k, flow in enumerate(flows)
        }
        for flow in flows:  # warm-up
            block(broker, workers[flow], max(args.txns // 4, 10), args.records, value)
        rates: dict[str, list[float]] = {f: [] for f in flows}
        cpus: dict[str, list[float]] = {f: [] for f in flows}
        for r in range(args.rounds):
            for flow in flows if r % 2 == 0 else flows[::-1]:
                rate, cpu = block(broker, workers[flow], args.txns, args.records, value)
                rates[flow].append(rate)
                if cpu is not None:
                    cpus[flow].append(cpu)
                shown = "-" if cpu is None else f"{cpu:.3f}"
                line = f"round {r} {flow:8} {rate:8.0f} txn/s  broker CPU {shown} ms/txn"
                print(line, flush=True)
        print(
            f"\n{args.records} records/txn, {args.producers} producers, "
            f"{args.txns} txns/producer/block, {args.rounds} rounds (medians)"
        )
        print(f"{'flow':8} {'txn/s':>8} {'spread':>7} {'CPU ms/txn':>11} {'spread':>7}")
        for flow in flows:
            cpu_s = (
                f"{statistics.median(cpus[flow]):11.3f} {spread(cpus[flow]):7.0%}"
                if cpus[flow]
                else f"{'-':>11} {'-':>7}"
            )
            rate = statistics.median(rates[flow])
            print(f"{flow:8} {rate:8.0f} {spread(rates[flow]):7.0%} {cpu_s}")
        if cpus.get("classic") and cpus.get("tv2"):
            ratio_rate = statistics.median(rates["tv2"]) / statistics.median(rates["classic"])
            ratio_cpu = statistics.median(cpus["tv2"]) / statistics.median(cpus["classic"])
            print(f"tv2/classic: {ratio_rate:.2f}x txn/s, {ratio_cpu:.2f}x CPU per txn")
        for ws in workers.values():
            for w in ws:
                w.t.close()
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
