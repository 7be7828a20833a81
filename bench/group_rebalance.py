"""Rebalance time under both group protocols: members added one by one to a 12-partition
topic, up to 6 members, with confluent-kafka (librdkafka) against a fresh kafkad.

    .venv/bin/python -m bench.group_rebalance [--partitions 12] [--members 6]
        [--heartbeat-ms 5000]

For each protocol (``classic``: JoinGroup/SyncGroup with librdkafka's default eager
range,roundrobin assignment and heartbeat.interval.ms=3000; ``consumer``: KIP-848 with the
broker's group.consumer.heartbeat.interval.ms=5000, Kafka's defaults both) a member is started,
and the time is taken until every member's own assignment (``Consumer.assignment()``, polled
every 20 ms in one thread per member) is balanced (sizes differ by at most one), covers every
partition and assigns none twice. kafkad runs with group.initial.rebalance.delay.ms=0 (the
classic protocol's first join otherwise waits 3 s). ``--heartbeat-ms`` sets both protocols'
heartbeat interval (librdkafka's heartbeat.interval.ms, the broker's
group.consumer.heartbeat.interval.ms); without it each keeps its default.

A KIP-848 member that joins gets its partitions at its next heartbeat after their owners
revoked them at theirs, so each step takes about one consumer heartbeat interval; a classic
step takes about one classic heartbeat interval (the members learn of the rebalance there) plus
the JoinGroup/SyncGroup round.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.brokers import start_kafkad


class Member(threading.Thread):
    def __init__(self, bs: str, group: str, topic: str, protocol: str, hb: int | None) -> None:
        super().__init__(daemon=True)
        conf: dict[str, object] = {"bootstrap.servers": bs, "group.id": group}
        if protocol == "consumer":
            conf["group.protocol"] = "consumer"
        elif hb is not None:
            conf["heartbeat.interval.ms"] = hb
        self.consumer = Consumer(conf)
        self.consumer.subscribe([topic])
        self.owned: frozenset[int] = frozenset()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(0.02)
            self.owned = frozenset(tp.partition for tp in self.consumer.assignment())
        self.consumer.close()


def balanced(members: list[Member], partitions: int) -> bool:
    owned = [m.owned for m in members]
    sizes = [len(o) for o in owned]
    union = frozenset().union(*owned)
    return sum(sizes) == partitions == len(union) and max(sizes) - min(sizes) <= 1


def run(bs: str, protocol: str, partitions: int, n: int, hb: int | None) -> list[float]:
    topic, group = f"rebalance-{protocol}", f"rebalance-{protocol}"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)
    members: list[Member] = []
    times: list[float] = []
    try:
        for _ in range(n):
            start = time.monotonic()
            m = Member(bs, group, topic, protocol, hb)
            members.append(m)
            m.start()
            while not balanced(members, partitions):
                if time.monotonic() - start > 120:
                    raise RuntimeError(f"{protocol}: no balanced assignment with {len(members)}")
                time.sleep(0.01)
            times.append(time.monotonic() - start)
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(30)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--members", type=int, default=6)
    ap.add_argument("--heartbeat-ms", type=int, default=None)
    args = ap.parse_args()
    extra = ["--set", "group.initial.rebalance.delay.ms=0"]
    if args.heartbeat_ms is not None:
        for name in ("heartbeat.interval.ms", "min.heartbeat.interval.ms"):
            extra += ["--set", f"group.consumer.{name}={args.heartbeat_ms}"]
    with tempfile.TemporaryDirectory() as logs:
        broker = start_kafkad(None, Path(logs), extra)
        try:
            for protocol in ("classic", "consumer"):
                times = run(
                    broker.bootstrap, protocol, args.partitions, args.members, args.heartbeat_ms
                )
                steps = " ".join(f"{t:.2f}" for t in times)
                print(
                    f"{protocol:8s} members 1..{args.members}: {steps} s "
                    f"(total {sum(times):.2f} s, median {statistics.median(times):.2f} s)"
                )
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
