"""Compacted topics with stock clients (issue 8): keyed writes, tombstones, a committed and an
aborted transaction (confluent-kafka's transactional producer), then the broker's log cleaner
runs (fast settings: short backoff, segments rolled by age); confluent-kafka, kafka-python and
kcat then read the topic from the beginning at read_committed and must end with exactly the
latest committed value per key: no aborted value, no superseded value left once cleaned, no
deleted key.

Against an external Kafka (KAFKAD_BOOTSTRAP) this is skipped: it needs the broker's cleaner
settings (Kafka's defaults would take 15 s backoffs and 7-day rolls).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from compat_tests._support import EXTERNAL, topic_name
from compat_tests.conftest import _LIVE, _spawn

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(bool(EXTERNAL), reason="needs the broker's cleaner settings"),
]

FAST = {
    "log.cleaner.backoff.ms": "200",
    "log.retention.check.interval.ms": "200",  # rolls expired active segments
}
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.ms": "300",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "1000",
}


def write_history(bs: str, topic: str) -> dict[bytes, bytes]:
    """Writes, returns the expected final state (key -> latest committed value)."""
    expected: dict[bytes, bytes] = {}
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for i in range(20):
        for k in range(8):
            key, value = b"k%d" % k, b"v%d-%d" % (k, i)
            p.produce(topic, value, key=key, partition=0)
            expected[key] = value
        p.flush(10)
    p.produce(topic, None, key=b"k7", partition=0)  # tombstone
    expected.pop(b"k7")
    assert p.flush(10) == 0
    t = Producer({"bootstrap.servers": bs, "transactional.id": f"c-{uuid.uuid4().hex[:8]}"})
    t.init_transactions(30)
    t.begin_transaction()
    t.produce(topic, b"committed", key=b"k0", partition=0)
    t.produce(topic, b"committed-new", key=b"t-new", partition=0)
    t.commit_transaction(30)
    expected[b"k0"], expected[b"t-new"] = b"committed", b"committed-new"
    t.begin_transaction()
    t.produce(topic, b"aborted", key=b"k1", partition=0)
    t.produce(topic, b"aborted-only", key=b"never", partition=0)
    t.flush(10)
    t.abort_transaction(30)
    t.begin_transaction()  # the same producer commits again after its abort
    t.produce(topic, b"after-abort", key=b"k2", partition=0)
    t.commit_transaction(30)
    expected[b"k2"] = b"after-abort"
    idem = Producer({"bootstrap.servers": bs, "enable.idempotence": True})
    idem.produce(topic, b"idempotent", key=b"k3", partition=0)  # superseded below: its batch
    assert idem.flush(10) == 0  # stays as an empty header (the producer's last batch)
    for k in range(3, 6):  # and plain writes after the transactions
        p.produce(topic, b"last-%d" % k, key=b"k%d" % k, partition=0)
        expected[b"k%d" % k] = b"last-%d" % k
    assert p.flush(10) == 0
    return expected


def read_confluent(
    bs: str, topic: str, isolation: str = "read_committed"
) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of partition 0 from offset 0 to its end, with confluent-kafka."""
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"r-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out = []
        while True:
            m = c.poll(5)
            assert m is not None, "no EOF"
            if m.error():
                break
            out.append((m.key(), m.value()))
        return out
    finally:
        c.close()


def read_uncommitted(bs: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    return read_confluent(bs, topic, "read_uncommitted")


def fold(records: list[tuple[bytes | None, bytes | None]]) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    for key, value in records:
        assert key is not None
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def read_kafka_python(bs: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    c = KafkaConsumer(
        bootstrap_servers=bs,
        isolation_level="read_committed",
        enable_auto_commit=False,
        consumer_timeout_ms=3000,
    )
    try:
        tp = KTopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        end = c.end_offsets([tp])[tp]
        out = []
        for m in c:
            out.append((m.key, m.value))
            if c.position(tp) >= end:
                break
        return out
    finally:
        c.close()


def read_kcat(bs: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    exe = shutil.which("kcat")
    if exe is None:
        pytest.skip("kcat is not installed")
    proc = subprocess.run(
        [
            exe,
            "-b",
            bs,
            "-C",
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-J",
            "-q",
            "-X",
            "isolation.level=read_committed",
        ],
        capture_output=True,
        encoding="utf-8",
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    out = []
    for line in proc.stdout.splitlines():
        m = json.loads(line)
        key = None if m["key"] is None else m["key"].encode()
        value = None if m["payload"] is None else m["payload"].encode()
        out.append((key, value))
    return out


def test_stock_clients_read_a_cleaned_compacted_topic(tmp_path: Path) -> None:
    broker = _spawn(tmp_path, "compaction", FAST)
    try:
        bs = broker.bootstrap
        topic = topic_name("compacted")
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic(topic, 1, 1, config=TOPIC_CONFIGS)])[topic].result(10)
        expected = write_history(bs, topic)
        before = read_uncommitted(bs, topic)  # the cleaner may already have run
        deadline = time.monotonic() + 60
        ticker = Producer({"bootstrap.servers": bs, "linger.ms": 0})
        while True:  # the cleaner removes superseded values and the aborted transaction
            time.sleep(0.5)
            # an append makes the active segment roll once segment.ms has passed
            ticker.produce(topic, b"tick", key=b"tick", partition=0)
            assert ticker.flush(10) == 0
            expected[b"tick"] = b"tick"
            now = read_uncommitted(bs, topic)
            cleaned = (b"k1", b"aborted") not in now and sum(k == b"k6" for k, _ in now) == 1
            if cleaned:
                break
            assert time.monotonic() < deadline, f"not cleaned: {len(now)} of {len(before)}"
        del ticker  # no reconnect attempts to a stopped broker
        for read in (read_confluent, read_kafka_python, read_kcat):
            got = read(bs, topic)
            assert fold(got) == expected, read.__name__
            assert (b"never", b"aborted-only") not in got
            assert [v for k, v in got if k == b"k6"] == [b"v6-19"], read.__name__
    finally:
        broker.stop()
        _LIVE.remove(broker)
