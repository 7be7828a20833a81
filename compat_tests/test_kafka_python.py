"""kafka-python (pinned in pyproject) against the broker: admin, produce, consume by assign."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import TopicAlreadyExistsError

from compat_tests._support import BASE_TS, Rec, sample_records, topic_name

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="compat-kafka-python")
    yield client
    client.close()


def test_kafka_python_infers_kafka_4_2_from_api_versions(bootstrap: str) -> None:
    # kafka-python picks the broker version from ApiVersions (ListOffsets v11 -> 4.2, Produce
    # v13 -> 4.1, ListOffsets v10 -> 4.0, Fetch v17 -> 3.9...) and sizes its requests by it
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        assert consumer.config["api_version"] == (4, 2)
    finally:
        consumer.close()


def create_topic(admin: KafkaAdminClient, partitions: int = 1) -> str:
    name = topic_name("kpy")
    result = admin.create_topics({name: {"num_partitions": partitions, "replication_factor": 1}})
    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [(name, 0)]
    return name


def make_producer(bootstrap: str, **config) -> KafkaProducer:
    # A plain producer; kafka-python's default, idempotence, has its own test below.
    return KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, **config)


def produce(producer: KafkaProducer, topic: str, recs: list[Rec], partition: int | None = 0):
    futures = [
        producer.send(
            topic,
            key=r.key,
            value=r.value,
            headers=list(r.headers),
            partition=partition,
            timestamp_ms=r.timestamp,
        )
        for r in recs
    ]
    producer.flush(timeout=15)
    return [f.get(timeout=15) for f in futures]


def consume(bootstrap: str, start: dict[TopicPartition, int], count: int, timeout: float = 15):
    """Read with manual assignment until `count` records arrive (or fail at the deadline)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, fetch_max_wait_ms=100
    )
    try:
        consumer.assign(list(start))
        for tp, offset in start.items():
            consumer.seek(tp, offset)
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                out.extend(batch)
        assert len(out) >= count, f"got {len(out)} of {count} records: {out}"
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def assert_records(got, want: list[Rec], partition: int, first_offset: int) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert (g.partition, g.offset) == (partition, first_offset + i)
        assert (g.key, g.value) == (w.key, w.value), i
        assert [(k, bytes(v)) for k, v in g.headers] == list(w.headers), i
        assert (g.timestamp, g.timestamp_type) == (w.timestamp, 0), i  # 0: CreateTime


def test_create_topics_answer(admin: KafkaAdminClient) -> None:
    name = create_topic(admin, partitions=2)
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics({name: {"num_partitions": 1, "replication_factor": 1}})


def test_metadata(bootstrap: str, admin: KafkaAdminClient) -> None:
    name = create_topic(admin, partitions=3)
    assert name in admin.list_topics()
    (described,) = admin.describe_topics([name])
    assert (described["name"], described["error_code"]) == (name, 0)
    assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1, 2]
    cluster = admin.describe_cluster()
    host, port = bootstrap.rsplit(":", 1)
    assert [(b["host"], b["port"]) for b in cluster["brokers"]] == [(host, int(port))]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        assert consumer.partitions_for_topic(name) == {0, 1, 2}
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c or "none")
def test_roundtrip_every_field(bootstrap: str, admin: KafkaAdminClient, codec) -> None:
    topic = create_topic(admin)
    recs = sample_records(f"kpy-{codec}")
    producer = make_producer(bootstrap, compression_type=codec, linger_ms=50)
    try:
        metas = produce(producer, topic, recs)
    finally:
        producer.close()
    assert [(m.partition, m.offset) for m in metas] == [(0, i) for i in range(len(recs))]
    assert [m.timestamp for m in metas] == [r.timestamp for r in recs]
    tp = TopicPartition(topic, 0)
    assert_records(consume(bootstrap, {tp: 0}, len(recs)), recs, 0, 0)


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(bootstrap: str, admin: KafkaAdminClient, acks) -> None:
    topic = create_topic(admin)
    recs = sample_records(f"acks-{acks}") * 3
    producer = make_producer(bootstrap, acks=acks)
    try:
        metas = produce(producer, topic, recs)
    finally:
        producer.close()
    if acks != 0:  # acks=0 gets no offsets back; the records must still all land, in order
        assert [m.offset for m in metas] == list(range(len(recs)))
    assert_records(consume(bootstrap, {TopicPartition(topic, 0): 0}, len(recs)), recs, 0, 0)


def test_seek_offsets_and_timestamps(bootstrap: str, admin: KafkaAdminClient) -> None:
    topic = create_topic(admin)
    recs = sample_records("seek")
    producer = make_producer(bootstrap, linger_ms=50)
    try:
        produce(producer, topic, recs[:3])  # two batches: lookups must cross them
        produce(producer, topic, recs[3:])
    finally:
        producer.close()
    tp = TopicPartition(topic, 0)
    assert_records(consume(bootstrap, {tp: 4}, 2), recs[4:], 0, 4)

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: len(recs)}
        found = consumer.offsets_for_times(
            {tp: BASE_TS + 2500}  # between records 2 and 3: the first at or after is 3
        )
        assert (found[tp].offset, found[tp].timestamp) == (3, BASE_TS + 3000)
        exact = consumer.offsets_for_times({tp: BASE_TS + 1000})
        assert (exact[tp].offset, exact[tp].timestamp) == (1, BASE_TS + 1000)
        assert consumer.offsets_for_times({tp: BASE_TS + 10**6}) == {tp: None}
    finally:
        consumer.close()


def test_keyed_records_stay_on_their_partition(bootstrap: str, admin: KafkaAdminClient) -> None:
    topic = create_topic(admin, partitions=3)
    recs = [Rec(f"key-{i % 7}".encode(), f"v{i}".encode(), (), BASE_TS + i) for i in range(40)]
    producer = make_producer(bootstrap, acks="all")
    try:
        metas = produce(producer, topic, recs, partition=None)
    finally:
        producer.close()
    by_key = {}
    for r, m in zip(recs, metas, strict=True):
        assert by_key.setdefault(r.key, m.partition) == m.partition  # one partition per key
    assert len(set(by_key.values())) > 1, "the client's hash spread 7 keys over 1 partition"
    start = {TopicPartition(topic, p): 0 for p in range(3)}
    got = consume(bootstrap, start, len(recs))
    stored = {(g.partition, g.offset): g.value for g in got}
    assert stored == {(m.partition, m.offset): r.value for r, m in zip(recs, metas, strict=True)}


def test_default_producer_is_idempotent_and_works(bootstrap: str, admin: KafkaAdminClient) -> None:
    """kafka-python 3 defaults to enable_idempotence=True, as Java does."""
    topic = create_topic(admin)
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_block_ms=10_000)
    try:
        meta = producer.send(topic, b"v", partition=0).get(timeout=15)
    finally:
        producer.close(timeout=5)
    assert (meta.partition, meta.offset) == (0, 0)
