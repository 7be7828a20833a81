"""kafkajs 2.2.4 (pinned in kafkajs/package-lock.json) against the broker, through
kafkajs/driver.js. Produce, admin, metadata and offsets only: the kafkajs consumer always joins
a group, and consumer groups are not served yet. Records are read back with confluent-kafka."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, TopicPartition
from kafka.partitioner.default import murmur2

from compat_tests._support import BASE_TS, Rec, sample_records, topic_name

DRIVER = Path(__file__).parent / "kafkajs" / "driver.js"
TIMEOUT_S = 30


def run(
    bootstrap: str,
    *ops: dict,
    tls: dict[str, str] | None = None,
    sasl: dict[str, str] | None = None,
) -> list:
    """``tls``: {"ca", "cert", "key"} PEM paths, for an SSL listener; ``sasl``: kafkajs's
    {"mechanism", "username", "password"}, or {"mechanism": "oauthbearer", "token"}."""
    node = shutil.which("node")
    if node is None or not (DRIVER.parent / "node_modules" / "kafkajs").is_dir():
        pytest.fail("node or kafkajs missing: run scripts/install-client-tools")
    proc = subprocess.run(
        [node, str(DRIVER)],
        input=json.dumps({"brokers": [bootstrap], "ops": list(ops), "tls": tls, "sasl": sasl}),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    out = json.loads(proc.stdout or "{}")
    assert "error" not in out and proc.returncode == 0, f"{out}\nkafkajs stderr:\n{proc.stderr}"
    return out["results"]


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def message(r: Rec, partition: int | None = 0) -> dict:
    m = {"key": b64(r.key), "value": b64(r.value), "timestamp": r.timestamp}
    m["headers"] = [(name, b64(value)) for name, value in r.headers]
    if partition is not None:
        m["partition"] = partition
    return m


def create_topic(bootstrap: str, partitions: int = 1) -> str:
    name = topic_name("kjs")
    (created,) = run(bootstrap, {"op": "createTopics", "topics": [topic_spec(name, partitions)]})
    assert created is True
    return name


def topic_spec(name: str, partitions: int) -> dict:
    return {"topic": name, "numPartitions": partitions, "replicationFactor": 1}


def consume(bootstrap: str, start: list[TopicPartition], count: int):
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "compat-unused", "enable.auto.commit": False}
    )
    try:
        consumer.assign(start)
        out = []
        deadline = time.monotonic() + 15
        while len(out) < count and time.monotonic() < deadline:
            for msg in consumer.consume(count - len(out), timeout=0.2):
                assert msg.error() is None, msg.error()
                out.append(msg)
        assert len(out) >= count, f"got {len(out)} of {count} records"
        return sorted(out, key=lambda m: (m.partition(), m.offset()))
    finally:
        consumer.close()


def assert_records(got, want: list[Rec], partition: int = 0, first_offset: int = 0) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert (g.partition(), g.offset()) == (partition, first_offset + i)
        assert (g.key(), g.value()) == (w.key, w.value), i
        assert (g.headers() or []) == list(w.headers), i
        assert g.timestamp() == (TIMESTAMP_CREATE_TIME, w.timestamp), i


def test_admin_and_metadata(bootstrap: str) -> None:
    name = topic_name("kjs")
    created, again, topics, md, cluster = run(
        bootstrap,
        {"op": "createTopics", "topics": [topic_spec(name, 3)]},
        {"op": "createTopics", "topics": [topic_spec(name, 3)]},
        {"op": "listTopics"},
        {"op": "fetchTopicMetadata", "topics": [name]},
        {"op": "describeCluster"},
    )
    assert (created, again) == (True, False)  # false: it already exists
    assert name in topics
    (t,) = md["topics"]
    assert t["name"] == name
    assert [(p["partitionId"], p["partitionErrorCode"]) for p in t["partitions"]] == [
        (0, 0),
        (1, 0),
        (2, 0),
    ]
    host, port = bootstrap.rsplit(":", 1)
    assert [(b["host"], b["port"]) for b in cluster["brokers"]] == [(host, int(port))]
    assert {p["leader"] for p in t["partitions"]} == {cluster["brokers"][0]["nodeId"]}
    assert cluster["controller"] == cluster["brokers"][0]["nodeId"] and cluster["clusterId"]


@pytest.mark.parametrize("codec", ["none", "gzip"])  # the rest need kafkajs plugins
def test_produce_every_field(bootstrap: str, codec: str) -> None:
    topic = create_topic(bootstrap)
    recs = sample_records(f"kjs-{codec}")
    (meta,) = run(
        bootstrap,
        {"op": "send", "topic": topic, "acks": -1, "compression": codec,
         "messages": [message(r) for r in recs]},
    )  # fmt: skip
    assert [(m["partition"], m["errorCode"], m["baseOffset"]) for m in meta] == [(0, 0, "0")]
    assert_records(consume(bootstrap, [TopicPartition(topic, 0, 0)], len(recs)), recs)


@pytest.mark.parametrize("acks", [0, 1, -1])
def test_acks(bootstrap: str, acks: int) -> None:
    topic = create_topic(bootstrap)
    recs = sample_records(f"kjs-acks{acks}")
    sends = [{"op": "send", "topic": topic, "acks": acks, "messages": [message(r)]} for r in recs]
    metas = run(bootstrap, *sends)
    if acks != 0:  # acks=0: no answer, so no offsets; the records must still land in order
        assert [m[0]["baseOffset"] for m in metas] == [str(i) for i in range(len(recs))]
    assert_records(consume(bootstrap, [TopicPartition(topic, 0, 0)], len(recs)), recs)


def test_offsets_and_timestamps(bootstrap: str) -> None:
    topic = create_topic(bootstrap, partitions=2)
    recs = sample_records("kjs-ts")
    send = {"op": "send", "topic": topic, "acks": -1}
    offsets, early, mid, late = run(
        bootstrap,
        {**send, "messages": [message(r) for r in recs[:3]]},  # two batches
        {**send, "messages": [message(r) for r in recs[3:]]},
        {"op": "fetchTopicOffsets", "topic": topic},
        {"op": "fetchTopicOffsetsByTimestamp", "topic": topic, "timestamp": BASE_TS - 1},
        {"op": "fetchTopicOffsetsByTimestamp", "topic": topic, "timestamp": BASE_TS + 2500},
        {"op": "fetchTopicOffsetsByTimestamp", "topic": topic, "timestamp": BASE_TS + 10**6},
    )[2:]
    n = str(len(recs))
    assert sorted((o["partition"], o["low"], o["high"], o["offset"]) for o in offsets) == [
        (0, "0", n, n),
        (1, "0", "0", "0"),
    ]
    by_partition = [sorted((o["partition"], o["offset"]) for o in x) for x in (early, mid, late)]
    # kafkajs answers the high watermark where no record is at or after the time
    assert by_partition == [[(0, "0"), (1, "0")], [(0, "3"), (1, "0")], [(0, n), (1, "0")]]


def test_keyed_records_stay_on_their_partition(bootstrap: str) -> None:
    topic = create_topic(bootstrap, partitions=3)
    recs = [Rec(f"key-{i % 7}".encode(), f"v{i}".encode(), (), BASE_TS + i) for i in range(21)]
    (metas,) = run(
        bootstrap,
        {"op": "send", "topic": topic, "acks": -1,
         "messages": [message(r, partition=None) for r in recs]},
    )  # fmt: skip
    got = consume(bootstrap, [TopicPartition(topic, p, 0) for p in range(3)], len(recs))
    # kafkajs's default partitioner is Java's: murmur2 of the key, made positive, mod partitions
    want = {r.value: (murmur2(r.key) & 0x7FFFFFFF) % 3 for r in recs}
    assert {g.value(): g.partition() for g in got} == want
    assert len(set(want.values())) > 1, "7 keys hashed to 1 partition"
    # One batch per partition, each starting at 0; offsets within a partition keep send order.
    assert sorted((m["partition"], m["baseOffset"]) for m in metas) == [
        (p, "0") for p in sorted(set(want.values()))
    ]
    for p in range(3):
        values = [g.value() for g in got if g.partition() == p]
        assert values == [r.value for r in recs if want[r.value] == p]
