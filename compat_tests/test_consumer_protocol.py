"""The consumer group protocol (KIP-848) with confluent-kafka ``group.protocol=consumer``:
members join and leave with incremental reassignment and no record consumed twice, a killed
member's partitions move after the session timeout, a static member restarts without moving
anything, a broker kill -9 mid-reconciliation, a regex subscription picks up a topic created
later, and consume-transform-produce with ``send_offsets_to_transaction`` fences a zombie
member by its member id (UNKNOWN_MEMBER_ID once it left) and by its epoch (STALE_MEMBER_EPOCH
with group metadata from before a rebalance).

Members are compat_tests/group_consumer.py subprocesses (client "confluent-consumer"), which
commit each record synchronously before printing it. The broker runs with a 500 ms heartbeat
interval and a 6 s session timeout (Kafka's defaults are 5 s and 45 s).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from compat_tests._support import EXTERNAL, topic_name, wait_for
from compat_tests.conftest import _LIVE, BrokerProcess, BrokerStartError, _spawn, module_broker
from compat_tests.test_groups import (
    Member,
    all_values,
    live_members,
    produce,
    setup_topic,
    wait_consumed,
)
from compat_tests.txn_support import create, plain_producer, read_all, values

CLIENT = "confluent-consumer"
SETTINGS = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "6000",
}
PARTS = 6
pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    why = "needs a short consumer session timeout on a kafkad subprocess"
    yield from module_broker(tmp_path_factory, "kip848", SETTINGS, why)


@pytest.fixture
def members() -> Iterator[list[Member]]:
    yield from live_members()


def described(bs: str, group: str) -> tuple[str, list[set[int]]]:
    """The group's state and each member's current partitions (ConsumerGroupDescribe)."""
    admin = AdminClient({"bootstrap.servers": bs})
    (fut,) = admin.describe_consumer_groups([group]).values()
    d = fut.result(10)
    return d.state.name, [{tp.partition for tp in m.assignment.topic_partitions} for m in d.members]


def wait_split(bs: str, group: str, sizes: list[int], timeout: float = 30) -> None:
    """The group is Stable with members owning ``sizes`` partitions, none owned twice."""

    def check() -> bool | None:
        state, owned = described(bs, group)
        seen: set[int] = set()
        for parts in owned:
            assert not parts & seen, f"a partition assigned twice: {owned}"
            seen |= parts
        return (state == "STABLE" and sorted(len(p) for p in owned) == sizes) or None

    wait_for(check, timeout, f"a stable split {sizes}")


def no_duplicates(ms: list[Member]) -> None:
    dups = {v: n for v, n in all_values(ms).items() if n > 1}
    assert not dups, f"delivered twice: {sorted(dups)[:10]}"


def test_members_join_and_leave_incrementally(cbroker: BrokerProcess, members) -> None:
    bs, group = cbroker.bootstrap, topic_name("g848")
    topic = setup_topic(bs)
    a = produce(bs, topic, "a")
    first = Member(CLIENT, bs, topic, group, None)
    members.append(first)
    wait_consumed(members, a)
    wait_split(bs, group, [6])
    for n, sizes in ((2, [3, 3]), (3, [2, 2, 2])):
        started = time.monotonic()
        members.append(Member(CLIENT, bs, topic, group, None))
        wait_split(bs, group, sizes)
        print(
            f"\n[kip848] member {n} joined: stable in {time.monotonic() - started:.2f} s",
            file=sys.stderr,
        )
        marks = [len(m.records) for m in members]
        more = produce(bs, topic, f"j{n}-")
        wait_consumed(members, more)
        split = [m.partitions_since(k) for m, k in zip(members, marks, strict=True)]
        assert sorted(len(s) for s in split) == sizes and len(set().union(*split)) == PARTS
    no_duplicates(members)
    # one leaves (close: a leave heartbeat); the other two take its partitions
    members[0].stop()
    wait_split(bs, group, [3, 3])
    rest = members[1:]
    marks = [len(m.records) for m in rest]
    b = produce(bs, topic, "b")
    wait_consumed(rest, b)
    split = [m.partitions_since(k) for m, k in zip(rest, marks, strict=True)]
    assert sorted(len(s) for s in split) == [3, 3] and len(set().union(*split)) == PARTS
    no_duplicates(members)


def test_killed_member_partitions_move(cbroker: BrokerProcess, members) -> None:
    bs, group = cbroker.bootstrap, topic_name("g848")
    topic = setup_topic(bs)
    members += [Member(CLIENT, bs, topic, group, None), Member(CLIENT, bs, topic, group, None)]
    wait_split(bs, group, [3, 3])
    members[1].kill9()
    killed_at = time.monotonic()
    mark = len(members[0].records)
    b = produce(bs, topic, "b")
    wait_consumed(members[:1], b, timeout=40)
    moved = time.monotonic() - killed_at
    assert members[0].partitions_since(mark) == set(range(PARTS))
    assert moved < 6 + 5
    print(f"\n[kip848] kill -9 -> survivor consumes all: {moved:.2f} s", file=sys.stderr)


def test_static_member_restarts_without_moving_partitions(cbroker: BrokerProcess, members) -> None:
    bs, group = cbroker.bootstrap, topic_name("g848")
    topic = setup_topic(bs)
    members += [Member(CLIENT, bs, topic, group, "s1"), Member(CLIENT, bs, topic, group, "s2")]
    wait_split(bs, group, [3, 3])
    a = produce(bs, topic, "a")
    wait_consumed(members, a)
    before = [m.partitions_since(0) for m in members]
    members[0].stop()  # a static member's close leaves with epoch -2: its partitions wait
    again = Member(CLIENT, bs, topic, group, "s1")
    members.append(again)
    mark = len(members[1].records)
    b = produce(bs, topic, "b")
    wait_consumed([members[1], again], b)
    assert again.partitions_since(0) == before[0]
    assert members[1].partitions_since(mark) == before[1]
    no_duplicates(members)


def test_broker_kill9_mid_reconciliation(tmp_path: Path, members) -> None:
    """The broker dies while a second member is being given its half; after the restart the
    group carries on from its records: the split completes, nothing is consumed twice."""
    if EXTERNAL:
        pytest.skip("kills the broker")
    broker = _spawn(tmp_path, "kill848", SETTINGS)
    try:
        bs, group = broker.bootstrap, topic_name("g848")
        topic = setup_topic(bs)
        a = produce(bs, topic, "a")
        members.append(Member(CLIENT, bs, topic, group, None))
        wait_consumed(members, a)
        wait_split(bs, group, [6])
        members.append(Member(CLIENT, bs, topic, group, None))
        wait_for(lambda: len(described(bs, group)[1]) == 2 or None, 30, "the second member")
        port = broker.port
        broker.kill9()
        try:
            broker.start(port=port)
        except BrokerStartError:
            pytest.skip("the broker's port was taken meanwhile")
        wait_split(bs, group, [3, 3], timeout=40)
        marks = [len(m.records) for m in members]
        b = produce(bs, topic, "b")
        wait_consumed(members, b, timeout=40)
        split = [m.partitions_since(k) for m, k in zip(members, marks, strict=True)]
        assert sorted(len(s) for s in split) == [3, 3] and len(set().union(*split)) == PARTS
        no_duplicates(members)
    finally:
        for m in members:
            m.stop()
        broker.stop()
        _LIVE.remove(broker)


def test_regex_subscription_picks_up_a_new_topic(cbroker: BrokerProcess) -> None:
    bs = cbroker.bootstrap
    prefix = topic_name("rx")
    first = create(bs, f"{prefix}-a", 2)
    plain = plain_producer(bs)
    plain.produce(first, b"a1", partition=0)
    plain.flush(10)
    c = _consumer(bs, topic_name("g848rx"), f"^{prefix}-.*")
    try:
        got: list[tuple[str, bytes]] = []

        def consumed(n: int) -> bool | None:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                got.append((m.topic(), m.value()))
            return len(got) >= n or None

        wait_for(lambda: consumed(1), 30, "the record of the first topic", step=0)
        second = create(bs, f"{prefix}-b", 1)
        plain.produce(second, b"b1", partition=0)
        plain.flush(10)
        wait_for(lambda: consumed(2), 30, "the record of the topic created later", step=0)
        assert got == [(first, b"a1"), (second, b"b1")]
    finally:
        c.close()


def _consumer(bs: str, group: str, topic: str) -> Consumer:
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": group,
            "group.protocol": "consumer",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    return c


def _poll_until_assigned(c: Consumer, n: int, timeout: float = 30) -> None:
    def assigned() -> bool | None:
        c.poll(0.1)
        return len(c.assignment()) == n or None

    wait_for(assigned, timeout, f"{n} partitions assigned", step=0)


def _committed(bs: str, group: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bs, "group.id": group})
    try:
        (tp,) = c.committed([TopicPartition(topic, 0)], 10)
        return tp.offset
    finally:
        c.close()


def test_consume_transform_produce_and_a_zombie_member(cbroker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    bs = cbroker.bootstrap
    src, dst = create(bs, topic_name("src"), 1), create(bs, topic_name("dst"), 1)
    plain = plain_producer(bs)
    for i in range(10):
        plain.produce(src, f"in-{i}".encode(), partition=0)
    plain.flush(10)
    group = topic_name("ctp848")
    p = Producer({"bootstrap.servers": bs, "transactional.id": topic_name("tid"), "linger.ms": 5})
    p.init_transactions(30)
    c1 = _consumer(bs, group, src)
    c2: Consumer | None = None
    try:
        taken: list[bytes] = []
        while len(taken) < 10:
            taken += [m.value() for m in c1.consume(10, 1.0) if m.error() is None]
        p.begin_transaction()
        for v in taken:
            p.produce(dst, v.upper(), partition=0)
        p.send_offsets_to_transaction(
            [TopicPartition(src, 0, 10)], c1.consumer_group_metadata(), 30
        )
        p.commit_transaction(30)
        assert _committed(bs, group, src) == 10
        assert values(read_all(bs, [(dst, 0)], "read_committed")) == [
            f"IN-{i}".encode() for i in range(10)
        ]
        # c1 leaves and another member takes over: c1's group metadata is a zombie's
        zombie_meta = c1.consumer_group_metadata()
        c1.close()
        c2 = _consumer(bs, group, src)
        _poll_until_assigned(c2, 1)
        p.begin_transaction()
        p.produce(dst, b"zombie", partition=0)
        with pytest.raises(KafkaException) as info:  # TxnOffsetCommit: UNKNOWN_MEMBER_ID
            p.send_offsets_to_transaction([TopicPartition(src, 0, 99)], zombie_meta, 30)
        assert info.value.args[0].code() == KafkaError.UNKNOWN_MEMBER_ID, info.value
        p.abort_transaction(30)
        assert _committed(bs, group, src) == 10
        # the live member commits through the same producer
        p.begin_transaction()
        p.produce(dst, b"live", partition=0)
        p.send_offsets_to_transaction(
            [TopicPartition(src, 0, 10)], c2.consumer_group_metadata(), 30
        )
        p.commit_transaction(30)
        assert values(read_all(bs, [(dst, 0)], "read_committed"))[-1] == b"live"
    finally:
        if c2 is not None:
            c2.close()


def test_offsets_with_a_stale_member_epoch_are_refused(cbroker: BrokerProcess) -> None:
    """KIP-447 fencing by member epoch: group metadata taken before a rebalance bumped the
    member's epoch is refused (STALE_MEMBER_EPOCH, abortable); the member's current metadata
    commits."""
    from confluent_kafka import Producer

    bs = cbroker.bootstrap
    src = create(bs, topic_name("stale"), 2)
    group = topic_name("g848stale")
    c1 = _consumer(bs, group, src)
    c2: Consumer | None = None
    p = Producer({"bootstrap.servers": bs, "transactional.id": topic_name("tid")})
    p.init_transactions(30)
    try:
        _poll_until_assigned(c1, 2)
        old = c1.consumer_group_metadata()
        c2 = _consumer(bs, group, src)
        other = c2

        def split() -> bool | None:
            c1.poll(0.05)
            other.poll(0.05)
            return (len(c1.assignment()) == 1 and len(other.assignment()) == 1) or None

        wait_for(split, 30, "a 1/1 split", step=0)
        p.begin_transaction()
        with pytest.raises(KafkaException) as info:
            p.send_offsets_to_transaction([TopicPartition(src, 0, 5)], old, 30)
        assert info.value.args[0].code() == KafkaError.STALE_MEMBER_EPOCH
        assert info.value.args[0].txn_requires_abort()
        p.abort_transaction(30)
        p.begin_transaction()
        p.send_offsets_to_transaction([TopicPartition(src, 0, 5)], c1.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        assert _committed(bs, group, src) == 5
    finally:
        c1.close()
        if c2 is not None:
            c2.close()
