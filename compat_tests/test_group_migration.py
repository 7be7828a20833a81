"""Mixed groups and the online migration between the protocols (KIP-848,
``group.consumer.migration.policy=bidirectional``, Kafka's default), with stock clients:
confluent-kafka ``group.protocol=consumer`` next to classic members (kafka-python, and
confluent-kafka ``group.protocol=classic``) in one group, no record delivered twice and every
record consumed; a running classic group upgraded by a consumer-protocol member, then
downgraded back to a classic group when that member leaves.

Members are compat_tests/group_consumer.py subprocesses, which commit each record
synchronously before printing it: a partition consumed by two members at once shows as a
record delivered twice.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from compat_tests._support import topic_name, wait_for
from compat_tests.conftest import BrokerProcess, module_broker
from compat_tests.test_consumer_protocol import SETTINGS as KIP848
from compat_tests.test_consumer_protocol import no_duplicates
from compat_tests.test_groups import (
    Member,
    live_members,
    produce,
    setup_topic,
    wait_consumed,
)

SETTINGS = {**KIP848, "group.initial.rebalance.delay.ms": "0"}
pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def mbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    why = "needs a short consumer session timeout on a kafkad subprocess"
    yield from module_broker(tmp_path_factory, "migration", SETTINGS, why)


@pytest.fixture
def members() -> Iterator[list[Member]]:
    yield from live_members()


def group_view(bs: str, group: str) -> tuple[str, str, list[set[int]]]:
    """The group's type, state and each member's partitions, as the admin client sees them
    (ConsumerGroupDescribe, DescribeGroups for a classic group)."""
    admin = AdminClient({"bootstrap.servers": bs})
    (fut,) = admin.describe_consumer_groups([group]).values()
    d = fut.result(10)
    return (
        d.type.name,
        d.state.name,
        [{tp.partition for tp in m.assignment.topic_partitions} for m in d.members],
    )


def wait_view(bs: str, group: str, kind: str, sizes: list[int], timeout: float = 60) -> None:
    """The group is of type ``kind``, Stable, its members owning ``sizes`` partitions."""

    def check() -> bool | None:
        gtype, state, owned = group_view(bs, group)
        if gtype == "CONSUMER":  # a classic group's assignments are opaque to this check
            seen: set[int] = set()
            for parts in owned:
                assert not parts & seen, f"a partition assigned twice: {owned}"
                seen |= parts
        return (
            gtype == kind and state == "STABLE" and sorted(len(p) for p in owned) == sizes
        ) or None

    wait_for(check, timeout, f"a stable {kind} group split {sizes}")


def consume_round(ms: list[Member], bs: str, topic: str, tag: str) -> None:
    marks = [len(m.records) for m in ms]
    values = produce(bs, topic, tag)
    wait_consumed(ms, values, timeout=60)
    split = [m.partitions_since(k) for m, k in zip(ms, marks, strict=True)]
    busy = [s for s in split if s]
    for i, s in enumerate(busy):  # each partition read by one member in this round
        assert not any(s & o for o in busy[i + 1 :]), f"a partition read twice: {split}"


def test_mixed_group(mbroker: BrokerProcess, members: list[Member]) -> None:
    bs, group = mbroker.bootstrap, topic_name("mixed")
    topic = setup_topic(bs)
    members.append(Member("confluent-consumer", bs, topic, group, None))
    wait_view(bs, group, "CONSUMER", [6])
    members.append(Member("kafka-python", bs, topic, group, None))
    wait_view(bs, group, "CONSUMER", [3, 3])
    consume_round(members, bs, topic, "a")
    members.append(Member("confluent", bs, topic, group, None))  # group.protocol=classic
    wait_view(bs, group, "CONSUMER", [2, 2, 2])
    consume_round(members, bs, topic, "b")
    members[1].stop()  # the classic member leaves (LeaveGroup)
    wait_view(bs, group, "CONSUMER", [3, 3])
    consume_round([members[0], members[2]], bs, topic, "c")
    no_duplicates(members)


def test_mixed_group_with_a_cooperative_classic_member(
    mbroker: BrokerProcess, members: list[Member]
) -> None:
    """A cooperative-sticky classic group upgraded by a consumer-protocol member: the classic
    member revokes incrementally (SyncGroup leaves out what it must give up, it rejoins owning
    the rest), and only then does a partition move."""
    bs, group = mbroker.bootstrap, topic_name("coop")
    topic = setup_topic(bs)
    members.append(Member("confluent-cooperative", bs, topic, group, None))
    members.append(Member("confluent-consumer", bs, topic, group, None))
    wait_view(bs, group, "CONSUMER", [3, 3])
    consume_round(members, bs, topic, "a")
    members.append(Member("confluent-consumer", bs, topic, group, None))
    wait_view(bs, group, "CONSUMER", [2, 2, 2])
    consume_round(members, bs, topic, "b")
    no_duplicates(members)


def test_upgrade_and_downgrade(mbroker: BrokerProcess, members: list[Member]) -> None:
    bs, group = mbroker.bootstrap, topic_name("migrate")
    topic = setup_topic(bs)
    for _ in range(2):
        members.append(Member("kafka-python", bs, topic, group, None))
    wait_view(bs, group, "CLASSIC", [3, 3])
    consume_round(members, bs, topic, "a")
    # a consumer-protocol member joins the running classic group: it becomes a consumer group
    members.append(Member("confluent-consumer", bs, topic, group, None))
    wait_view(bs, group, "CONSUMER", [2, 2, 2])
    consume_round(members, bs, topic, "b")
    # it leaves: the group goes back to classic, its two classic members keep consuming
    members[2].stop()
    wait_view(bs, group, "CLASSIC", [3, 3])
    values = produce(bs, topic, "c")
    wait_consumed(members[:2], values, timeout=60)
    no_duplicates(members)
