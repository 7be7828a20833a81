"""confluent-kafka / librdkafka (pinned in pyproject) against the broker."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from compat_tests._support import BASE_TS, Rec, sample_records, topic_name, wait_for

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
TIMEOUT_S = 15


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": bootstrap})


def create_topic(admin: AdminClient, partitions: int = 1, check_response: bool = False) -> str:
    """Create via the admin API, then wait for it in metadata; the CreateTopics answer is
    only checked when asked, so a bad one fails the admin test and not every test."""
    name = topic_name("ck")
    (future,) = admin.create_topics([NewTopic(name, partitions, 1)]).values()
    if check_response:
        assert future.result(TIMEOUT_S) is None
    # All topics: asking for this one by name would auto-create it if CreateTopics lagged.
    md = wait_for(lambda: admin.list_topics(timeout=TIMEOUT_S).topics.get(name), TIMEOUT_S, name)
    assert (md.error, sorted(md.partitions)) == (None, list(range(partitions)))
    return name


def produce(bootstrap: str, topic: str, recs: list[Rec], partition: int | None = 0, **config):
    """Produce and return the delivery reports, in produce order."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, **config})
    reports: list = [None] * len(recs)

    def on_delivery(i: int):
        return lambda err, msg: reports.__setitem__(i, (err, msg))

    for i, r in enumerate(recs):
        kw = {} if partition is None else {"partition": partition}
        producer.produce(
            topic,
            key=r.key,
            value=r.value,
            headers=list(r.headers),
            timestamp=r.timestamp,
            on_delivery=on_delivery(i),
            **kw,
        )
    assert producer.flush(TIMEOUT_S) == 0, "records still queued after flush"
    errors = [(i, rep[0]) for i, rep in enumerate(reports) if rep is None or rep[0] is not None]
    assert not errors, errors
    return [rep[1] for rep in reports]


def make_consumer(bootstrap: str) -> Consumer:
    # group.id is required by the client; assign() never joins the group.
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "compat-unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )


def consume(bootstrap: str, start: list[TopicPartition], count: int, timeout: float = TIMEOUT_S):
    consumer = make_consumer(bootstrap)
    try:
        consumer.assign(start)
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for msg in consumer.consume(count - len(out), timeout=0.2):
                assert msg.error() is None, msg.error()
                out.append(msg)
        assert len(out) >= count, f"got {len(out)} of {count} records"
        return sorted(out, key=lambda m: (m.partition(), m.offset()))
    finally:
        consumer.close()


def assert_records(got, want: list[Rec], partition: int, first_offset: int) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert (g.partition(), g.offset()) == (partition, first_offset + i)
        assert (g.key(), g.value()) == (w.key, w.value), i
        assert (g.headers() or []) == list(w.headers), i
        assert g.timestamp() == (TIMESTAMP_CREATE_TIME, w.timestamp), i


def test_create_topics_answer(admin: AdminClient) -> None:
    name = create_topic(admin, partitions=2, check_response=True)
    (again,) = admin.create_topics([NewTopic(name, 1, 1)]).values()
    with pytest.raises(KafkaException) as exc:
        again.result(TIMEOUT_S)
    assert exc.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS


def test_metadata_cluster_and_configs(bootstrap: str, admin: AdminClient) -> None:
    name = create_topic(admin, partitions=3)
    md = admin.list_topics(timeout=TIMEOUT_S)
    assert name in md.topics
    assert sorted(md.topics[name].partitions) == [0, 1, 2]
    host, port = bootstrap.rsplit(":", 1)
    assert [(b.host, b.port) for b in md.brokers.values()] == [(host, int(port))]
    assert {p.leader for p in md.topics[name].partitions.values()} == set(md.brokers)

    cluster = admin.describe_cluster(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    assert [(n.host, n.port) for n in cluster.nodes] == [(host, int(port))]
    assert cluster.controller is not None and cluster.cluster_id

    (described,) = admin.describe_configs([ConfigResource("topic", name)]).values()
    configs = described.result(TIMEOUT_S)
    assert configs["cleanup.policy"].value == "delete"
    assert configs["retention.ms"].value == "604800000"  # Kafka's default: 7 days


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_every_field(bootstrap: str, admin: AdminClient, codec: str) -> None:
    topic = create_topic(admin)
    recs = sample_records(f"ck-{codec}")
    msgs = produce(bootstrap, topic, recs, **{"compression.type": codec, "linger.ms": 50})
    assert [(m.partition(), m.offset()) for m in msgs] == [(0, i) for i in range(len(recs))]
    assert [m.timestamp() for m in msgs] == [(TIMESTAMP_CREATE_TIME, r.timestamp) for r in recs]
    assert_records(consume(bootstrap, [TopicPartition(topic, 0, 0)], len(recs)), recs, 0, 0)


@pytest.mark.parametrize("topic_codec", ["gzip", "zstd", "uncompressed"])
def test_a_topic_codec_recompresses_what_producers_send(
    bootstrap: str, admin: AdminClient, topic_codec: str
) -> None:
    """compression.type on the topic: batches sent in another codec (idempotent ones too) are
    recompressed by the broker, and consumers get every field back."""
    name = topic_name("ck-codec")
    config = {"compression.type": topic_codec}
    (future,) = admin.create_topics([NewTopic(name, 1, 1, config=config)]).values()
    assert future.result(TIMEOUT_S) is None
    recs = sample_records(f"ck-topic-{topic_codec}")
    sent_codec = "lz4" if topic_codec != "lz4" else "snappy"
    msgs = produce(
        bootstrap,
        name,
        recs,
        **{"compression.type": sent_codec, "linger.ms": 50, "enable.idempotence": True},
    )
    assert [m.offset() for m in msgs] == list(range(len(recs)))
    assert_records(consume(bootstrap, [TopicPartition(name, 0, 0)], len(recs)), recs, 0, 0)
    (described,) = admin.describe_configs([ConfigResource("topic", name)]).values()
    assert described.result(TIMEOUT_S)["compression.type"].value == topic_codec


def test_null_header_value(bootstrap: str, admin: AdminClient) -> None:
    topic = create_topic(admin)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False})
    producer.produce(topic, value=b"v", headers=[("null", None), ("empty", b"")], partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    (msg,) = consume(bootstrap, [TopicPartition(topic, 0, 0)], 1)
    assert msg.headers() == [("null", None), ("empty", b"")]


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(bootstrap: str, admin: AdminClient, acks: str) -> None:
    topic = create_topic(admin)
    recs = sample_records(f"ck-acks-{acks}") * 3
    msgs = produce(bootstrap, topic, recs, acks=acks)
    if acks != "0":  # acks=0 gets no offsets back; the records must still all land, in order
        assert [m.offset() for m in msgs] == list(range(len(recs)))
    assert_records(consume(bootstrap, [TopicPartition(topic, 0, 0)], len(recs)), recs, 0, 0)


def test_seek_offsets_and_timestamps(bootstrap: str, admin: AdminClient) -> None:
    topic = create_topic(admin)
    recs = sample_records("ck-seek")
    produce(bootstrap, topic, recs[:3], **{"linger.ms": 50})  # two batches
    produce(bootstrap, topic, recs[3:], **{"linger.ms": 50})
    assert_records(consume(bootstrap, [TopicPartition(topic, 0, 4)], 2), recs[4:], 0, 4)

    consumer = make_consumer(bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        assert consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S) == (0, len(recs))

        def lookup(ts: int) -> TopicPartition:
            (found,) = consumer.offsets_for_times([TopicPartition(topic, 0, ts)], TIMEOUT_S)
            assert found.error is None, found.error
            return found

        assert lookup(BASE_TS + 2500).offset == 3  # the first record at or after it
        assert lookup(BASE_TS + 1000).offset == 1
        assert lookup(BASE_TS + 10**6).offset == -1  # OFFSET_END: no record that late
        # Assigning the looked-up offset reads from exactly there.
        assert_records(consume(bootstrap, [lookup(BASE_TS + 2001)], 3), recs[3:], 0, 3)
    finally:
        consumer.close()


def test_keyed_records_stay_on_their_partition(bootstrap: str, admin: AdminClient) -> None:
    topic = create_topic(admin, partitions=3)
    recs = [Rec(f"key-{i % 7}".encode(), f"v{i}".encode(), (), BASE_TS + i) for i in range(40)]
    msgs = produce(bootstrap, topic, recs, partition=None, acks="all")
    by_key: dict[bytes | None, int] = {}
    for r, m in zip(recs, msgs, strict=True):
        assert by_key.setdefault(r.key, m.partition()) == m.partition()
    assert len(set(by_key.values())) > 1, "the client's hash spread 7 keys over 1 partition"
    got = consume(bootstrap, [TopicPartition(topic, p, 0) for p in range(3)], len(recs))
    stored = {(g.partition(), g.offset()): g.value() for g in got}
    assert stored == {(m.partition(), m.offset()): r.value for r, m in zip(recs, msgs, strict=True)}


def test_every_topic_config_through_the_admin_client(admin: AdminClient) -> None:
    """incremental_alter_configs stores configs a single node only keeps (replication
    throttles, tiered storage's local retention), describe_configs shows them with their
    source, and a value out of Kafka's range is refused with Kafka's message."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    name = create_topic(admin, partitions=1)
    resource = ConfigResource(
        "topic",
        name,
        incremental_configs=[
            ConfigEntry(
                "leader.replication.throttled.replicas",
                "0:1",
                incremental_operation=AlterConfigOpType.SET,
            ),
            ConfigEntry("local.retention.ms", "1000", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    (done,) = admin.incremental_alter_configs([resource]).values()
    done.result(TIMEOUT_S)
    (described,) = admin.describe_configs([ConfigResource("topic", name)]).values()
    configs = described.result(TIMEOUT_S)
    assert configs["leader.replication.throttled.replicas"].value == "0:1"
    assert configs["local.retention.ms"].value == "1000"
    assert not configs["local.retention.ms"].is_default
    assert configs["remote.storage.enable"].value == "false"
    assert configs["remote.storage.enable"].is_default
    bad = ConfigResource(
        "topic",
        name,
        incremental_configs=[
            ConfigEntry("retention.ms", "-2", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    (refused,) = admin.incremental_alter_configs([bad]).values()
    with pytest.raises(KafkaException, match="Value must be at least -1"):
        refused.result(TIMEOUT_S)
