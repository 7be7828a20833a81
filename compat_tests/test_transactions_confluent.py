"""Transactions end to end with confluent-kafka (librdkafka): atomic multi-partition commits,
aborts that read_committed consumers never see, an open transaction holding back later records
(the LSO), zombie fencing, consume-transform-produce with offsets committed in the transaction,
and a commit that survives kill -9.

Every expectation here is Kafka's own; run against Apache Kafka with KAFKAD_BOOTSTRAP (the tests
that kill the broker are skipped then).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from compat_tests._support import EXTERNAL, topic_name
from compat_tests.conftest import BrokerProcess
from compat_tests.txn_support import create, plain_producer, read_all, values

pytestmark = pytest.mark.timeout(120)


def txn_producer(bs: str, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": bs, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(30)
    return p


def test_commit_is_atomic_across_partitions_and_abort_is_invisible(bootstrap: str) -> None:
    a, b = create(bootstrap, topic_name("txa"), 3), create(bootstrap, topic_name("txb"), 1)
    tps = [(a, 0), (a, 1), (a, 2), (b, 0)]
    p = txn_producer(bootstrap, topic_name("tid"))
    for n, commit in ((1, True), (2, False), (3, True)):
        p.begin_transaction()
        for t, part in tps:
            for i in range(3):
                p.produce(t, f"txn{n}-{t[-4:]}-{part}-{i}".encode(), partition=part)
        if commit:
            p.commit_transaction(30)
        else:
            p.flush(10)
            p.abort_transaction(30)
    committed = read_all(bootstrap, tps, "read_committed")
    assert sorted(values(committed)) == sorted(
        f"txn{n}-{t[-4:]}-{part}-{i}".encode() for n in (1, 3) for t, part in tps for i in range(3)
    )
    for t, part in tps:  # log order within each partition
        got = [v for tt, pp, v in committed if (tt, pp) == (t, part)]
        assert got == [f"txn{n}-{t[-4:]}-{part}-{i}".encode() for n in (1, 3) for i in range(3)]
    uncommitted = read_all(bootstrap, tps, "read_uncommitted")
    assert len(uncommitted) == 3 * 3 * len(tps)  # aborted records are returned, as Kafka does


def test_open_transaction_holds_back_later_records(bootstrap: str) -> None:
    t = create(bootstrap, topic_name("lso"), 1)
    plain = plain_producer(bootstrap)
    plain.produce(t, b"before", partition=0)
    plain.flush(10)
    p = txn_producer(bootstrap, topic_name("tid"))
    p.begin_transaction()
    p.produce(t, b"in-txn", partition=0)
    p.flush(10)
    plain.produce(t, b"after", partition=0)
    plain.flush(10)
    assert values(read_all(bootstrap, [(t, 0)], "read_committed")) == [b"before"]
    assert values(read_all(bootstrap, [(t, 0)], "read_uncommitted")) == [
        b"before",
        b"in-txn",
        b"after",
    ]
    p.commit_transaction(30)
    assert values(read_all(bootstrap, [(t, 0)], "read_committed")) == [
        b"before",
        b"in-txn",
        b"after",
    ]


def test_a_new_instance_fences_the_zombie(bootstrap: str) -> None:
    t = create(bootstrap, topic_name("zombie"), 2)
    tid = topic_name("tid")
    zombie = txn_producer(bootstrap, tid)
    zombie.begin_transaction()
    zombie.produce(t, b"zombie", partition=0)
    zombie.flush(10)
    fresh = txn_producer(bootstrap, tid)  # fences the zombie and aborts its transaction
    fresh.begin_transaction()
    fresh.produce(t, b"fresh", partition=1)
    fresh.commit_transaction(30)
    with pytest.raises(KafkaException) as info:
        zombie.produce(t, b"zombie-2", partition=0)
        zombie.commit_transaction(10)
    assert info.value.args[0].fatal() or "fenced" in str(info.value).lower()
    assert values(read_all(bootstrap, [(t, 0), (t, 1)], "read_committed")) == [b"fresh"]


def test_consume_transform_produce_commits_offsets_in_the_transaction(bootstrap: str) -> None:
    src, dst = create(bootstrap, topic_name("src"), 1), create(bootstrap, topic_name("dst"), 1)
    plain = plain_producer(bootstrap)
    for i in range(10):
        plain.produce(src, f"in-{i}".encode(), partition=0)
    plain.flush(10)
    group = topic_name("ctp")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    p = txn_producer(bootstrap, topic_name("tid"))
    try:
        consumer.assign([TopicPartition(src, 0, 0)])
        taken: list[bytes] = []
        while len(taken) < 10:
            taken += [m.value() for m in consumer.consume(10, 1.0) if m.error() is None]
        for commit in (False, True):
            p.begin_transaction()
            for v in taken:
                p.produce(dst, v.upper(), partition=0)
            p.send_offsets_to_transaction(
                [TopicPartition(src, 0, 10)], consumer.consumer_group_metadata(), 30
            )
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
                (before,) = consumer.committed([TopicPartition(src, 0)], 10)
                assert before.offset < 0  # the aborted offsets were never committed
        (after,) = consumer.committed([TopicPartition(src, 0)], 10)
        assert after.offset == 10
        assert values(read_all(bootstrap, [(dst, 0)], "read_committed")) == [
            f"IN-{i}".encode() for i in range(10)
        ]
    finally:
        consumer.close()


@pytest.fixture
def killable(own_broker: BrokerProcess) -> Iterator[BrokerProcess]:
    if EXTERNAL:
        pytest.skip("kills the broker")
    yield own_broker


def test_an_acknowledged_commit_survives_kill9(killable: BrokerProcess) -> None:
    bs = killable.bootstrap
    t = create(bs, topic_name("durable"), 3)
    p = txn_producer(bs, topic_name("tid"))
    p.begin_transaction()
    for part in range(3):
        p.produce(t, f"c{part}".encode(), partition=part)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(t, b"open", partition=0)
    p.flush(10)
    killable.kill9()
    killable.restart()
    bs = killable.bootstrap
    got = read_all(bs, [(t, 0), (t, 1), (t, 2)], "read_committed")
    assert sorted(values(got)) == [b"c0", b"c1", b"c2"]
