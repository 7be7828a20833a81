"""DeleteRecords with stock admin clients (issue 15.2/15.9): confluent-kafka's
``AdminClient.delete_records``, kafka-python's and aiokafka's ``delete_records`` and kafkajs's
``deleteTopicRecords``, each followed by consumers at both isolation levels; the new start
inside an open transaction (the LSO holds at the start until the transaction ends); and the
start, the LSO and the open transaction across a ``kill -9`` of a real broker. Every
expectation is Kafka's own (the kill -9 test is skipped against an external broker)."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.structs import TopicPartition as AioTP
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition as KpTP

from compat_tests._support import EXTERNAL, topic_name
from compat_tests.conftest import BrokerProcess
from compat_tests.test_kafkajs import run
from compat_tests.txn_support import (
    committed_values,
    create,
    produce_plain,
    uncommitted_values,
)

pytestmark = pytest.mark.timeout(120)


def confluent_delete(bs: str, topic: str, offset: int, partition: int = 0) -> int:
    """The low watermark confluent-kafka's AdminClient reports."""
    admin = AdminClient({"bootstrap.servers": bs})
    futures = admin.delete_records([TopicPartition(topic, partition, offset)])
    (future,) = futures.values()
    return int(future.result(30).low_watermark)


def watermarks(bs: str, topic: str, isolation: str, partition: int = 0) -> tuple[int, int]:
    """(log start, end) as librdkafka's ListOffsets reports them: the end is the LSO for
    read_committed, the high watermark otherwise."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "unused", "isolation.level": isolation})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, partition), 10, cached=False)
        return int(low), int(high)
    finally:
        c.close()


def txn_producer(bs: str, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": bs, "transactional.id": tid, "linger.ms": 0})
    p.init_transactions(30)
    return p


def test_confluent_delete_records_then_consume(bootstrap: str) -> None:
    t = create(bootstrap, topic_name("delrec"), 1)
    produce_plain(bootstrap, t, [b"v%d" % i for i in range(6)])
    assert confluent_delete(bootstrap, t, 2) == 2
    assert watermarks(bootstrap, t, "read_uncommitted") == (2, 6)
    assert committed_values(bootstrap, t) == [b"v2", b"v3", b"v4", b"v5"]
    assert uncommitted_values(bootstrap, t) == [b"v2", b"v3", b"v4", b"v5"]
    assert confluent_delete(bootstrap, t, -1) == 6  # OFFSET_END: the high watermark
    assert watermarks(bootstrap, t, "read_committed") == (6, 6)
    produce_plain(bootstrap, t, [b"v6"])
    assert committed_values(bootstrap, t) == [b"v6"]
    with pytest.raises(KafkaException) as err:
        confluent_delete(bootstrap, t, 100)
    assert err.value.args[0].name() == "OFFSET_OUT_OF_RANGE"


def test_kafka_python_delete_records(bootstrap: str) -> None:
    t = create(bootstrap, topic_name("delrec-kp"), 2)
    produce_plain(bootstrap, t, [b"a%d" % i for i in range(4)], partition=0)
    produce_plain(bootstrap, t, [b"b%d" % i for i in range(3)], partition=1)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        got = admin.delete_records({KpTP(t, 0): 3, KpTP(t, 1): -1})
    finally:
        admin.close()
    lows = {tp.partition: meta["low_watermark"] for tp, meta in got.items()}
    assert lows == {0: 3, 1: 3}
    assert committed_values(bootstrap, t, 0) == [b"a3"]
    assert uncommitted_values(bootstrap, t, 0) == [b"a3"]
    assert watermarks(bootstrap, t, "read_committed", partition=1) == (3, 3)


def test_aiokafka_delete_records(bootstrap: str) -> None:
    t = create(bootstrap, topic_name("delrec-aio"), 1)
    produce_plain(bootstrap, t, [b"c%d" % i for i in range(5)])

    async def run() -> dict[AioTP, int]:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            return await admin.delete_records({AioTP(t, 0): RecordsToDelete(before_offset=4)})
        finally:
            await admin.close()

    assert asyncio.run(run()) == {AioTP(t, 0): 4}
    assert committed_values(bootstrap, t) == [b"c4"]
    assert uncommitted_values(bootstrap, t) == [b"c4"]


def open_txn_then_delete_inside(bs: str, topic: str, tid: str) -> Producer:
    """p0-p2, the transaction's first record at 3, p4-p5; then the start moves to 4, inside
    the (still open) transaction. Returns its producer."""
    produce_plain(bs, topic, [b"p0", b"p1", b"p2"])
    txn = txn_producer(bs, tid)
    txn.begin_transaction()
    txn.produce(topic, b"t3", partition=0)
    assert txn.flush(10) == 0
    produce_plain(bs, topic, [b"p4", b"p5"])
    assert confluent_delete(bs, topic, 4) == 4
    return txn


def test_start_inside_an_open_transaction(bootstrap: str) -> None:
    t = create(bootstrap, topic_name("delrec-txn"), 1)
    txn = open_txn_then_delete_inside(bootstrap, t, topic_name("tid"))
    # Kafka clamps the LSO to the new start: nothing past it is committed yet
    assert watermarks(bootstrap, t, "read_committed") == (4, 4)
    assert uncommitted_values(bootstrap, t) == [b"p4", b"p5"]
    txn.produce(t, b"t6", partition=0)
    txn.abort_transaction(30)
    assert committed_values(bootstrap, t) == [b"p4", b"p5"]
    assert uncommitted_values(bootstrap, t) == [b"p4", b"p5", b"t6"]  # as Kafka returns it


@pytest.mark.skipif(EXTERNAL, reason="kills the broker")
@pytest.mark.timeout(180)
def test_start_and_open_transaction_survive_kill9(own_broker: BrokerProcess) -> None:
    bs = own_broker.bootstrap
    t = create(bs, topic_name("delrec-kill"), 1)
    tid = topic_name("tid")
    txn = open_txn_then_delete_inside(bs, t, tid)
    assert watermarks(bs, t, "read_committed") == (4, 4)
    own_broker.kill9()
    own_broker.restart()
    bs = own_broker.bootstrap
    assert watermarks(bs, t, "read_uncommitted") == (4, 6)
    assert watermarks(bs, t, "read_committed") == (4, 4)  # the transaction still holds it
    assert uncommitted_values(bs, t) == [b"p4", b"p5"]
    # a new instance of the transactional id fences the old one and aborts its transaction
    txn2 = txn_producer(bs, tid)
    assert committed_values(bs, t) == [b"p4", b"p5"]
    assert watermarks(bs, t, "read_committed") == (4, 7)  # the abort marker is at 6
    del txn, txn2


def test_kafkajs_delete_topic_records(bootstrap: str) -> None:
    t = create(bootstrap, topic_name("delrec-kjs"), 1)
    produce_plain(bootstrap, t, [b"k%d" % i for i in range(5)])
    delete = {
        "op": "deleteTopicRecords",
        "topic": t,
        "partitions": [{"partition": 0, "offset": "3"}],
    }
    # kafkajs finds the leader from metadata it must already have (as against Kafka)
    load = {"op": "fetchTopicMetadata", "topics": [t]}
    _, _, offsets = run(bootstrap, load, delete, {"op": "fetchTopicOffsets", "topic": t})
    assert [(o["partition"], o["low"], o["high"]) for o in offsets] == [(0, "3", "5")]
    assert committed_values(bootstrap, t) == [b"k3", b"k4"]
    assert uncommitted_values(bootstrap, t) == [b"k3", b"k4"]
