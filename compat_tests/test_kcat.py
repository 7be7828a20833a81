"""kcat (Debian's, librdkafka inside; installed by scripts/install-client-tools) against the
broker. kcat has no admin API and cannot set timestamps, so topics are created and
timestamped records produced with confluent-kafka where a test needs them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import zlib

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests._support import BASE_TS, sample_records, topic_name, wait_for

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
TIMEOUT_S = 30


def kcat(bootstrap: str, *args: str, stdin: str | None = None) -> str:
    exe = shutil.which("kcat")
    if exe is None:
        pytest.fail("kcat is not installed: run scripts/install-client-tools")
    proc = subprocess.run(
        [exe, "-b", bootstrap, "-m", "10", *args],
        input=stdin,
        capture_output=True,
        encoding="utf-8",
        errors="surrogateescape",  # kcat -J prints binary payloads raw
        timeout=TIMEOUT_S,
    )
    assert proc.returncode == 0, f"kcat {args} exited {proc.returncode}: {proc.stderr}"
    return proc.stdout


def consume_json(bootstrap: str, topic: str, *args: str) -> list[dict]:
    out = kcat(bootstrap, "-C", "-t", topic, "-e", "-J", "-q", *args)
    return [json.loads(line) for line in out.splitlines()]


def create_topic(bootstrap: str, partitions: int = 1) -> str:
    name = topic_name("kcat")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])
    wait_for(lambda: name in admin.list_topics(timeout=10).topics, TIMEOUT_S, name)
    return name


LINES = ["k0\tv0", "\tnull key", "tomb\t", "k3\tvalue 3", "k4\t" + "x" * 3000]


def expected_json(topic: str, partition: int = 0) -> list[dict]:
    """What kcat -J must print for LINES produced with -K '\\t' -Z -H h1=a -H h2=bb."""
    out = []
    for offset, line in enumerate(LINES):
        key, value = line.split("\t")
        out.append(
            {
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "tstype": "create",
                "headers": ["h1", "a", "h2", "bb"],
                "key": key or None,
                "payload": value or None,
            }
        )
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume(bootstrap: str, codec: str) -> None:
    topic = create_topic(bootstrap)
    before = int(time.time() * 1000)
    args = ["-P", "-t", topic, "-p", "0", "-K", "\\t", "-Z", "-z", codec, "-X", "acks=all"]
    kcat(bootstrap, *args, "-H", "h1=a", "-H", "h2=bb", stdin="\n".join(LINES) + "\n")
    after = int(time.time() * 1000)
    got = consume_json(bootstrap, topic, "-p", "0", "-o", "beginning")
    for g in got:
        assert before <= g.pop("ts") <= after  # CreateTime set by the producer
        assert g.pop("broker") >= 0
    assert got == expected_json(topic)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(bootstrap: str, acks: str) -> None:
    topic = create_topic(bootstrap)
    lines = [f"k{i}\tv{i}" for i in range(50)]
    kcat(bootstrap, "-P", "-t", topic, "-p", "0", "-K", "\\t", "-X", f"acks={acks}",
         stdin="\n".join(lines) + "\n")  # fmt: skip
    got = consume_json(bootstrap, topic, "-p", "0", "-o", "beginning", "-c", str(len(lines)))
    assert [(g["offset"], g["key"], g["payload"]) for g in got] == [
        (i, f"k{i}", f"v{i}") for i in range(50)
    ]


def test_auto_create_and_metadata(bootstrap: str) -> None:
    topic = topic_name("kcat-auto")  # never created: producing auto-creates it
    kcat(bootstrap, "-P", "-t", topic, stdin="one\ntwo\n")
    md = json.loads(kcat(bootstrap, "-L", "-J", "-t", topic))
    assert [b["name"] for b in md["brokers"]] == [bootstrap]
    (t,) = md["topics"]
    assert t["topic"] == topic and "error" not in t, t
    assert [p["partition"] for p in t["partitions"]] == [0]  # num.partitions=1
    leader = t["partitions"][0]["leader"]
    assert [b["id"] for b in md["brokers"]] == [leader]
    got = consume_json(bootstrap, topic, "-o", "beginning", "-c", "2")
    assert [(g["offset"], g["payload"]) for g in got] == [(0, "one"), (1, "two")]

    listed = json.loads(kcat(bootstrap, "-L", "-J"))
    assert topic in {x["topic"] for x in listed["topics"]}


def test_offsets_and_timestamps(bootstrap: str) -> None:
    topic = create_topic(bootstrap)
    recs = sample_records("kcat-ts")
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False})
    for r in recs:
        producer.produce(topic, key=r.key, value=r.value, timestamp=r.timestamp, partition=0)
    assert producer.flush(TIMEOUT_S) == 0

    got = consume_json(bootstrap, topic, "-p", "0", "-o", "2")
    assert [(g["offset"], g["ts"]) for g in got] == [(i, recs[i].timestamp) for i in range(2, 6)]
    got = consume_json(bootstrap, topic, "-p", "0", "-o", "-2")  # relative to the end
    assert [g["offset"] for g in got] == [4, 5]
    got = consume_json(bootstrap, topic, "-p", "0", "-o", f"s@{BASE_TS + 2500}")
    assert [g["offset"] for g in got] == [3, 4, 5]
    got = consume_json(bootstrap, topic, "-p", "0", "-o", "beginning", "-o", f"e@{BASE_TS + 2000}")
    assert [g["offset"] for g in got] == [0, 1]  # stops before the record at the end time
    out = kcat(bootstrap, "-Q", "-t", f"{topic}:0:{BASE_TS + 1000}")
    assert re.findall(r"\[0\] offset (-?\d+)", out) == ["1"], out


def test_keyed_records_land_on_the_hashed_partition(bootstrap: str) -> None:
    topic = create_topic(bootstrap, partitions=3)
    keys = [f"key-{i}" for i in range(12)]
    kcat(bootstrap, "-P", "-t", topic, "-K", "\\t", stdin="".join(f"{k}\tv-{k}\n" for k in keys))
    got = consume_json(bootstrap, topic, "-o", "beginning", "-c", str(len(keys)))
    # librdkafka's default partitioner for keyed records: CRC-32 of the key mod partitions
    placed = {g["key"]: g["partition"] for g in got}
    assert placed == {k: zlib.crc32(k.encode()) % 3 for k in keys}
    assert len(set(placed.values())) == 3
    # Read each partition by itself: every record is there and nowhere else.
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "compat-unused", "enable.auto.commit": False}
    )
    try:
        for p in range(3):
            lo, hi = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT_S)
            assert (lo, hi) == (0, sum(1 for v in placed.values() if v == p))
    finally:
        consumer.close()
