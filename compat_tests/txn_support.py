"""Shared by the transaction compat tests of every client: topics, a plain producer, and
`read_all`, which reads every partition up to the end the broker reports for an isolation level
(confluent-kafka does the reading whatever client produced); plus the vanished-producer scenario,
whose producer is a subprocess (``txn_vanish.py``) killed with SIGKILL mid-transaction."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests._support import topic_name, wait_for
from compat_tests.conftest import _LIVE, _spawn

T = TypeVar("T")
HERE = Path(__file__).parent
# The coordinator looks for timed-out transactions this often on the vanish broker (Kafka: 10 s).
VANISH_BROKER = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}
VANISH_TXN_TIMEOUT_MS = 2000


def create(bs: str, name: str, partitions: int) -> str:
    admin = AdminClient({"bootstrap.servers": bs})  # kept alive until the result is in
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    return name


def plain_producer(bs: str) -> Producer:
    return Producer({"bootstrap.servers": bs, "linger.ms": 0})


def produce_plain(bs: str, topic: str, vals: list[bytes], partition: int = 0) -> None:
    p = plain_producer(bs)
    for v in vals:
        p.produce(topic, v, partition=partition)
    assert p.flush(10) == 0


def read_all(bs: str, tps: list[tuple[str, int]], isolation: str) -> list[tuple[str, int, bytes]]:
    """Everything readable at this isolation level now: reads each partition up to the end the
    broker reports for that level (the LSO for read_committed, the high watermark otherwise)."""
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        parts = [TopicPartition(t, p, 0) for t, p in tps]
        ends = {
            (t, p): c.get_watermark_offsets(TopicPartition(t, p), 10, cached=False)[1]
            for t, p in tps
        }
        c.assign(parts)
        out: list[tuple[str, int, bytes]] = []
        pending = {tp for tp, end in ends.items() if end > 0}
        for _ in range(400):
            if not pending:
                break
            for m in c.consume(100, 0.1):
                if m.error() is None:
                    out.append((m.topic(), m.partition(), m.value()))
            for t, p in list(pending):
                (pos,) = c.position([TopicPartition(t, p)])
                if pos.offset >= ends[(t, p)]:
                    pending.discard((t, p))
        assert not pending, f"could not read up to {ends}: still {pending}"
        return out
    finally:
        c.close()


def values(recs: list[tuple[str, int, bytes]]) -> list[bytes]:
    return [v for _, _, v in recs]


def by_partition(recs: list[tuple[str, int, bytes]]) -> dict[tuple[str, int], list[bytes]]:
    """Values per (topic, partition), in the order read."""
    out: dict[tuple[str, int], list[bytes]] = {}
    for t, p, v in recs:
        out.setdefault((t, p), []).append(v)
    return out


def committed_values(bs: str, topic: str, partition: int = 0) -> list[bytes]:
    return values(read_all(bs, [(topic, partition)], "read_committed"))


def uncommitted_values(bs: str, topic: str, partition: int = 0) -> list[bytes]:
    return values(read_all(bs, [(topic, partition)], "read_uncommitted"))


def check_vanished_transaction_is_aborted(
    tmp_path: Path, client: str, own_read_committed: Callable[[str, str], list[bytes]]
) -> None:
    """Scenario 7: a producer of `client` (``txn_vanish.py``, transaction.timeout.ms 2 s) writes
    into a transaction and is killed with SIGKILL; plain records follow. Once the coordinator has
    aborted the transaction for its timeout the LSO moves past it and the aborted records stay
    hidden (from confluent-kafka and from `client`'s own read_committed consumer,
    `own_read_committed(bootstrap, topic)`)."""
    broker = _spawn(tmp_path, "vanish", VANISH_BROKER)
    try:
        bs = broker.bootstrap
        t = create(bs, topic_name("vanish"), 1)
        produce_plain(bs, t, [b"before"])
        args = [sys.executable, "-u", str(HERE / "txn_vanish.py"), client, bs, t]
        args += [topic_name("tid"), str(VANISH_TXN_TIMEOUT_MS)]
        with subprocess.Popen(
            args, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
        ) as p:
            try:
                assert p.stdout is not None
                assert p.stdout.readline().strip() == "sent", "the producer did not get to send"
                assert uncommitted_values(bs, t)[:2] == [b"before", b"vanished-0"]
            finally:
                p.kill()
        produce_plain(bs, t, [b"after"])
        want = [b"before", b"after"]
        settles(lambda: committed_values(bs, t), want, 20)
        assert own_read_committed(bs, t) == want
        assert uncommitted_values(bs, t) == [b"before"] + [b"vanished-%d" % i for i in range(3)] + [
            b"after"
        ]
    finally:
        broker.stop()
        _LIVE.remove(broker)


def settles(read: Callable[[], T], want: T, timeout: float = 10) -> None:
    """Wait until `read()` gives `want`: what a commit or abort makes visible lands once the
    coordinator has written its markers, which Kafka does after answering EndTxn."""
    last: list[T] = []

    def check() -> bool:
        last[:] = [read()]
        return last[0] == want

    try:
        wait_for(check, timeout, f"{want!r}")
    except AssertionError:
        assert last[0] == want  # the difference, for the report
        raise
