"""Transactions end to end with confluent-kafka (librdkafka): atomic multi-partition commits,
aborts that read_committed consumers never see, an open transaction holding back later records
(the LSO), zombie fencing, consume-transform-produce with offsets committed in the transaction,
a commit that survives kill -9, two interleaved transactions on one partition, a stalled
producer's transaction aborted by the timeout (which fences it), 200 back-to-back transactions,
zombie fencing of offsets, and a subscribed read_committed consumer.

Every expectation here is Kafka's own; run against Apache Kafka with KAFKAD_BOOTSTRAP (the tests
that kill the broker or need the short timed-out-transaction scan of the module's own broker,
``fast``, are skipped then).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from compat_tests._support import EXTERNAL, topic_name, wait_for
from compat_tests.conftest import _LIVE, BrokerProcess, _spawn
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


# A broker of this module's own: group.initial.rebalance.delay.ms=0 for the subscribed consumer,
# and a 200 ms timed-out-transaction scan for the timeout scenario (skipped on KAFKAD_BOOTSTRAP).
SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
}


@contextmanager
def txn_test_broker(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[str]:
    """KAFKAD_BOOTSTRAP, or a kafkad subprocess with SETTINGS, for one module's tests."""
    if EXTERNAL:
        yield EXTERNAL
        return
    b = _spawn(tmp_path_factory.mktemp(f"kafkad-{name}"), name, SETTINGS)
    try:
        yield b.bootstrap
    finally:
        b.stop()
        _LIVE.remove(b)


@pytest.fixture(scope="module")
def fast(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with txn_test_broker(tmp_path_factory, "txn-confluent") as bs:
        yield bs


def lso(bs: str, topic: str, partition: int = 0) -> int:
    c = Consumer({"bootstrap.servers": bs, "group.id": "lso", "isolation.level": "read_committed"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, partition), 10, cached=False)[1])
    finally:
        c.close()


def committed_offset(bs: str, group: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        (tp,) = c.committed([TopicPartition(topic, 0)], 10)
        return int(tp.offset)
    finally:
        c.close()


def fenced(exc: KafkaException) -> bool:
    """librdkafka's verdict on INVALID_PRODUCER_EPOCH/PRODUCER_FENCED: a fatal _FENCED."""
    err = exc.args[0]
    return bool(err.fatal() and err.code() == KafkaError._FENCED)


def test_interleaved_transactions_on_one_partition(bootstrap: str) -> None:
    t = create(bootstrap, topic_name("interleave"), 1)
    a, b = (
        txn_producer(bootstrap, topic_name("tid-a")),
        txn_producer(bootstrap, topic_name("tid-b")),
    )
    a.begin_transaction()
    b.begin_transaction()
    for p, v in ((a, b"a1"), (b, b"b1"), (a, b"a2")):  # offsets 0, 1 (b's first), 2
        p.produce(t, v, partition=0)
        p.flush(10)
    a.commit_transaction(30)  # marker at 3
    # The LSO stops at b's first offset: a1 is visible at once, a2 only once b ends.
    assert lso(bootstrap, t) == 1
    assert values(read_all(bootstrap, [(t, 0)], "read_committed")) == [b"a1"]
    b.produce(t, b"b2", partition=0)
    b.commit_transaction(30)
    assert values(read_all(bootstrap, [(t, 0)], "read_committed")) == [b"a1", b"b1", b"a2", b"b2"]


def test_200_back_to_back_transactions(bootstrap: str) -> None:
    t = create(bootstrap, topic_name("many"), 1)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic_name("tid")})
    p.init_transactions(30)
    for i in range(200):
        p.begin_transaction()
        p.produce(t, f"m{i}".encode(), partition=0)
        p.commit_transaction(30)
    assert values(read_all(bootstrap, [(t, 0)], "read_committed")) == [
        f"m{i}".encode() for i in range(200)
    ]
    assert lso(bootstrap, t) == 400  # each record, then its marker


def test_a_fenced_zombie_cannot_commit_offsets(bootstrap: str) -> None:
    src = create(bootstrap, topic_name("zsrc"), 1)
    dst = create(bootstrap, topic_name("zdst"), 1)
    group = topic_name("zgroup")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    tid = topic_name("tid")
    zombie = txn_producer(bootstrap, tid)
    try:
        meta = consumer.consumer_group_metadata()
        zombie.begin_transaction()
        zombie.produce(dst, b"z1", partition=0)
        zombie.send_offsets_to_transaction([TopicPartition(src, 0, 3)], meta, 30)
        zombie.commit_transaction(30)
        assert committed_offset(bootstrap, group, src) == 3
        zombie.begin_transaction()
        zombie.produce(dst, b"z2", partition=0)
        zombie.flush(10)
        fresh = txn_producer(bootstrap, tid)  # fences the zombie, aborts its transaction
        with pytest.raises(KafkaException) as info:  # AddOffsetsToTxn: INVALID_PRODUCER_EPOCH
            zombie.send_offsets_to_transaction([TopicPartition(src, 0, 10)], meta, 30)
        assert fenced(info.value)
        with pytest.raises(KafkaException) as info:
            zombie.commit_transaction(30)
        assert fenced(info.value)
        assert committed_offset(bootstrap, group, src) == 3
        assert values(read_all(bootstrap, [(dst, 0)], "read_committed")) == [b"z1"]
        fresh.begin_transaction()
        fresh.send_offsets_to_transaction([TopicPartition(src, 0, 7)], meta, 30)
        fresh.commit_transaction(30)
        assert committed_offset(bootstrap, group, src) == 7
    finally:
        consumer.close()


def test_a_subscribed_read_committed_consumer_sees_only_committed_data(fast: str) -> None:
    t = create(fast, topic_name("sub"), 2)
    p = txn_producer(fast, topic_name("tid"))
    plain = plain_producer(fast)
    for tag, end in (("c1", p.commit_transaction), ("ab", p.abort_transaction)):
        p.begin_transaction()
        for part in (0, 1):
            p.produce(t, f"{tag}-{part}".encode(), partition=part)
        p.flush(10)
        end(30)
    p.begin_transaction()
    p.produce(t, b"open-0", partition=0)  # holds back partition 0 ...
    p.flush(10)
    plain.produce(t, b"after-0", partition=0)  # ... including this
    plain.produce(t, b"after-1", partition=1)  # partition 1 is not held back
    plain.flush(10)
    group = topic_name("sub-group")
    c = Consumer(
        {
            "bootstrap.servers": fast,
            "group.id": group,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    got: dict[int, list[bytes]] = {0: [], 1: []}

    def caught_up(ends: dict[int, int]) -> bool:
        for m in c.consume(100, 0.1):
            if m.error() is None:
                got[m.partition()].append(m.value())
        pos = c.position([TopicPartition(t, part) for part in ends]) if c.assignment() else []
        return len(pos) == len(ends) and all(tp.offset >= ends[tp.partition] for tp in pos)

    try:
        c.subscribe([t])
        ends = {part: lso(fast, t, part) for part in (0, 1)}
        assert ends == {0: 4, 1: 5}  # c1 0, marker 1, ab 2, marker 3 | + after-1 4
        wait_for(lambda: caught_up(ends), 20, f"the consumer to reach the LSOs {ends}")
        assert got == {0: [b"c1-0"], 1: [b"c1-1", b"after-1"]}
        p.commit_transaction(30)
        ends = {part: lso(fast, t, part) for part in (0, 1)}
        assert ends == {0: 7, 1: 5}  # open-0 4, after-0 5, marker 6
        wait_for(lambda: caught_up(ends), 20, f"the consumer to reach the LSOs {ends}")
        assert got == {0: [b"c1-0", b"open-0", b"after-0"], 1: [b"c1-1", b"after-1"]}
    finally:
        c.close()


def test_a_stalled_producers_transaction_is_aborted_by_the_timeout(fast: str) -> None:
    if EXTERNAL:
        pytest.skip("needs a short timed-out-transaction scan interval")
    t = create(fast, topic_name("timeout"), 1)
    p = Producer(
        {"bootstrap.servers": fast, "transactional.id": topic_name("tid"),
         "transaction.timeout.ms": 2000, "linger.ms": 0}
    )  # fmt: skip
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(t, b"lost", partition=0)  # offset 0, then silence
    p.flush(10)
    plain = plain_producer(fast)
    plain.produce(t, b"after", partition=0)  # offset 1
    plain.flush(10)
    assert values(read_all(fast, [(t, 0)], "read_committed")) == []
    # The coordinator aborts the transaction (marker at 2): the LSO moves past everything.
    wait_for(lambda: lso(fast, t) == 3, 15, "the timed-out transaction to be aborted")
    assert values(read_all(fast, [(t, 0)], "read_committed")) == [b"after"]
    # The abort bumped the epoch: the stalled producer can no longer commit.
    with pytest.raises(KafkaException) as info:  # Produce: INVALID_PRODUCER_EPOCH
        p.produce(t, b"late", partition=0)
        p.commit_transaction(30)
    assert fenced(info.value)
    assert values(read_all(fast, [(t, 0)], "read_committed")) == [b"after"]
