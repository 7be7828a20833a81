"""Durability: every record the broker acknowledged (acks=all) survives kill -9 and a restart
on the same data dir, at the offset it was acknowledged with.

Idempotence is off and retries are 0, so the producer never sends a record twice: any
duplicate or reordering found afterwards is the broker's."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests._support import topic_name, wait_for

if TYPE_CHECKING:
    from compat_tests.conftest import BrokerProcess

N = 20_000
KILL_AFTER = 2_000  # acknowledged records before the kill
PARTITIONS = 3
TIMEOUT_S = 30


def create_topic(bootstrap: str) -> str:
    name = topic_name("crash")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])
    wait_for(lambda: name in admin.list_topics(timeout=10).topics, TIMEOUT_S, name)
    return name


def read_all(bootstrap: str, topic: str) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of every partition, up to its high watermark: {partition: [(offset, value)]}."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "compat-unused", "enable.auto.commit": False}
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT_S)[1]
            for p in range(PARTITIONS)
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + TIMEOUT_S
        while sum(map(len, out.values())) < sum(ends.values()) and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=0.2):
                assert msg.error() is None, msg.error()
                out[msg.partition()].append((msg.offset(), msg.value()))
        assert {p: len(v) for p, v in out.items()} == ends, "could not read up to the watermarks"
        return out
    finally:
        consumer.close()


@pytest.mark.timeout(180)
def test_acknowledged_records_survive_kill9(own_broker: BrokerProcess) -> None:
    topic = create_topic(own_broker.bootstrap)
    acked: dict[tuple[int, int], bytes] = {}
    failed: list[tuple[int, bytes]] = []
    enough = threading.Event()
    errors: list[BaseException] = []

    def on_delivery(err, msg) -> None:
        if err is None:
            acked[(msg.partition(), msg.offset())] = msg.value()
            if len(acked) >= KILL_AFTER:
                enough.set()
        else:
            failed.append((err.code(), msg.value()))

    producer = Producer(
        {
            "bootstrap.servers": own_broker.bootstrap,
            "acks": "all",
            "enable.idempotence": False,
            "retries": 0,
            "linger.ms": 5,
            "message.timeout.ms": 15_000,
            "queue.buffering.max.messages": N,
        }
    )

    def produce_all() -> None:
        try:
            for i in range(N):
                while True:
                    try:
                        value = b"%08d" % i
                        producer.produce(
                            topic, value, partition=i % PARTITIONS, on_delivery=on_delivery
                        )
                        break
                    except BufferError:
                        producer.poll(0.05)
                producer.poll(0)
            producer.flush(60)
        except BaseException as exc:  # surfaced in the test thread
            errors.append(exc)

    thread = threading.Thread(target=produce_all, name="crash-producer")
    thread.start()
    try:
        assert enough.wait(TIMEOUT_S), f"only {len(acked)} acknowledged before the deadline"
        own_broker.kill9()
        acked_at_kill = len(acked)
        assert acked_at_kill < N, "every record was acknowledged before the kill: not mid-stream"
        own_broker.restart()
    finally:
        thread.join(90)
    assert not thread.is_alive() and not errors, errors
    assert len(acked) + len(failed) == N, (len(acked), len(failed))
    assert all(code != KafkaError.NO_ERROR for code, _ in failed)

    stored = read_all(own_broker.bootstrap, topic)
    print(  # shown on failure
        f"acked {len(acked)} ({acked_at_kill} before the kill), failed {len(failed)},"
        f" stored {sum(map(len, stored.values()))}"
    )
    seen: set[bytes] = set()
    for p, records in stored.items():
        assert [o for o, _ in records] == list(range(len(records))), f"offset gap in {p}"
        values = [int(v) for _, v in records]
        assert values == sorted(set(values)), f"partition {p} reordered or duplicated"
        assert all(v % PARTITIONS == p for v in values), f"foreign records in partition {p}"
        seen.update(v for _, v in records)
    missing = {k: v for k, v in acked.items() if dict(stored[k[0]]).get(k[1]) != v}
    example = sorted(missing.items())[:5]
    assert not missing, (
        f"{len(missing)} acknowledged records lost or moved, e.g. {example}"
        f" (acked {len(acked)}, {acked_at_kill} before the kill)"
    )
    assert len(seen) >= len(acked)


def test_graceful_restart_keeps_everything(own_broker: BrokerProcess) -> None:
    topic = create_topic(own_broker.bootstrap)
    producer = Producer({"bootstrap.servers": own_broker.bootstrap, "enable.idempotence": False})
    for i in range(3000):
        producer.produce(topic, b"%08d" % i, key=str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(TIMEOUT_S) == 0
    before = read_all(own_broker.bootstrap, topic)
    assert sum(map(len, before.values())) == 3000
    own_broker.restart()  # SIGTERM, then the same data dir
    assert read_all(own_broker.bootstrap, topic) == before
