"""Stock consumers against Fetch v13+ and fetch sessions (KIP-227): kafka-python 3 fetches at
v12 (topic names) in incremental sessions, librdkafka (confluent-kafka) sessionless at v13+
(topic ids). Each consumes every record, and the broker's /metrics shows what it was asked."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, TopicPartition

from compat_tests._support import EXTERNAL, topic_name, wait_for
from compat_tests.conftest import BrokerProcess, _spawn

CONSOLE_LINE = re.compile(r"web console on (http://127\.0\.0\.1:\d+)")
PARTITIONS = 4
PER_PARTITION = 50
FETCH_LINE = re.compile(
    r'^kafka_network_requestmetrics_requests_total\{request="Fetch",version="(\d+)"\} (\S+)$', re.M
)


@pytest.fixture
def metered(tmp_path: Path) -> Iterator[tuple[BrokerProcess, str]]:
    """A broker of our own (its counters start at zero) with /metrics."""
    if EXTERNAL:
        pytest.skip("reads kafkad's /metrics: not against KAFKAD_BOOTSTRAP")
    b = _spawn(tmp_path, "fetch", {"kafkad.http.listeners": "http://:0"})
    try:
        url = wait_for(
            lambda: (m := CONSOLE_LINE.search(b.log_tail())) and m.group(1), 10, "console"
        )
        yield b, url
    finally:
        assert b.stop() in (None, 0), b.log_tail()


def metrics(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        return resp.read().decode()


def fetch_versions(text: str) -> dict[int, float]:
    return {int(v): float(n) for v, n in FETCH_LINE.findall(text)}


def value(text: str, name: str) -> float:
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    assert m is not None, f"{name} not in /metrics"
    return float(m.group(1))


def fill(bootstrap: str) -> str:
    """A topic of PARTITIONS partitions with PER_PARTITION records in each."""
    name = topic_name("fsess")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            producer.produce(name, value=b"v%d-%d" % (p, i), partition=p)
    assert producer.flush(15) == 0
    return name


def test_kafka_python_consumes_in_an_incremental_fetch_session(
    metered: tuple[BrokerProcess, str],
) -> None:
    broker, url = metered
    name = fill(broker.bootstrap)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
    )
    try:
        tps = [TopicPartition(name, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        got: list[tuple[int, int]] = []
        deadline = time.monotonic() + 30
        while len(got) < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                got.extend((r.partition, r.offset) for r in batch)
        # a few more polls with nothing new: incremental fetches that name no partition
        for _ in range(5):
            assert not consumer.poll(timeout_ms=200)
    finally:
        consumer.close()
    expected = sorted((p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION))
    assert sorted(got) == expected
    text = metrics(url)
    assert set(fetch_versions(text)) == {12}  # kafka-python 3 fetches by name
    assert value(text, "kafkad_fetch_incremental_requests_total") > 0
    assert value(text, "kafka_server_fetchsessioncache_numincrementalfetchsessions") >= 1
    print(
        "kafka-python incremental fetches:",
        value(text, "kafkad_fetch_incremental_requests_total"),
        fetch_versions(text),
    )


def test_librdkafka_consumes_by_topic_id(metered: tuple[BrokerProcess, str]) -> None:
    broker, url = metered
    name = fill(broker.bootstrap)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "fetch.wait.max.ms": 100}
    )
    try:
        consumer.assign([CTopicPartition(name, p, 0) for p in range(PARTITIONS)])
        got: list[tuple[int, int]] = []
        deadline = time.monotonic() + 30
        while len(got) < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.2):
                assert msg.error() is None, msg.error()
                got.append((msg.partition(), msg.offset()))
    finally:
        consumer.close()
    expected = sorted((p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION))
    assert sorted(got) == expected
    versions = fetch_versions(metrics(url))
    assert versions and min(versions) >= 13, versions  # topic ids, not names
    print("librdkafka Fetch versions seen:", versions)
