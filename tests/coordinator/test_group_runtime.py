"""The group runtime under trio's MockClock: timers, parked requests, the offsets topic, and a
replay-equals-live check (a fresh coordinator loading ``__consumer_offsets`` rebuilds what the
live one holds)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode

from coordinator.group.classic import JoinRequest, JoinResult
from coordinator.group.group_record import group_value
from coordinator.group.offsets import CommitRequest
from coordinator.group.offsets_log import OFFSETS_TOPIC
from coordinator.group.records import (
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from coordinator.group.runtime import GroupCoordinator
from coordinator.group.state import GroupState
from coordinator.placement import java_string_hash, partition_for
from storage.api import LogConfig, TopicPartition
from storage.backends import open_store
from storage.topics import TopicManager

E = ErrorCode
VALUES: dict[str, Any] = {
    "offsets.topic.num.partitions": 5,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 100,
    "group.max.session.timeout.ms": 100_000,
    "group.max.size": 100,
    "num.partitions": 1,
    "default.replication.factor": 1,
    "log.message.timestamp.type": "CreateTime",
}


def jreq(member_id: str = "", instance: str | None = None) -> JoinRequest:
    return JoinRequest(
        member_id, instance, "c", "/h", 1000, 3000, "consumer", (("range", b"m"),), True
    )


async def join(coord: GroupCoordinator, group: str, instance: str | None = None) -> JoinResult:
    first = await coord.join(group, jreq("", instance))
    if first.error is E.member_id_required:
        return await coord.join(group, jreq(first.member_id, instance))
    return first


@pytest.fixture
async def topics():
    # a memory store: no I/O threads, so the autojump clock jumps only when the coordinator
    # idles (a thread in flight lets it jump to the next timer, such as offsets retention)
    async with open_store("memory://") as store:
        tm = TopicManager(store, LogConfig(), VALUES)
        await tm.create("t", 6, {})
        yield tm


def test_partition_for_matches_java() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # Utils.abs maps it to 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50


def test_record_round_trip() -> None:
    key = encode_offset_commit_key(OffsetCommitKey("g", "t", 3))
    assert key[:2] == b"\x00\x01" and decode_key(key) == OffsetCommitKey("g", "t", 3)
    v = OffsetCommitValue(42, 7, "meta", 1234)
    assert decode_offset_commit_value(encode_offset_commit_value(v)) == v
    gv = GroupMetadataValue(
        "consumer", 3, "range", "m1", 99, (MemberMetadata("m1", "i", "c", "/h", 5, 6, b"s", b"a"),)
    )
    assert decode_group_metadata_value(encode_group_metadata_value(gv)) == gv


async def test_offsets_topic_created_lazily_and_replay_equals_live(topics, autojump_clock) -> None:
    coord = GroupCoordinator(topics, VALUES, lambda: 1000)
    await coord.load()
    assert topics.get(OFFSETS_TOPIC) is None  # startup creates nothing
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        r = await join(coord, "g1")
        assert r.error is E.none and r.generation == 1
        s = await coord.sync("g1", r.member_id, None, 1, None, None, {r.member_id: b"A"})
        assert s.error is E.none and s.assignment == b"A"
        tp = TopicPartition("t", 0)
        ok = await coord.commit_offsets("g1", r.member_id, None, 1, [CommitRequest(tp, 5, 0, "x")])
        assert ok == {tp: E.none}
        simple = [CommitRequest(TopicPartition("t", i), 10 + i, -1, None) for i in range(3)]
        assert await coord.commit_offsets("simple", "", None, -1, simple) == {
            c.tp: E.none for c in simple
        }
        assert await coord.delete_offsets("simple", [TopicPartition("t", 1)])
        n.cancel_scope.cancel()
    assert topics.get(OFFSETS_TOPIC) is not None
    fresh = GroupCoordinator(topics, VALUES, lambda: 1000)
    await fresh.load()
    assert fresh.offsets.committed == coord.offsets.committed
    assert fresh.offsets.fetch("simple", None) == coord.offsets.fetch("simple", None)
    assert [f.offset for f in fresh.offsets.fetch("simple", None)] == [10, 12]
    assert group_value(fresh.groups["g1"], 1) == group_value(coord.groups["g1"], 1)
    assert fresh.groups["g1"].state is GroupState.STABLE


async def test_dead_member_moves_out_within_session_timeout(topics, autojump_clock) -> None:
    coord = GroupCoordinator(topics, VALUES, lambda: 0)
    await coord.load()
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        a = await join(coord, "g")
        await coord.sync("g", a.member_id, None, a.generation, None, None, {a.member_id: b"a"})
        results: list[JoinResult] = []

        async def second() -> None:
            results.append(await join(coord, "g"))

        n.start_soon(second)
        await trio.sleep(0.01)
        # a's heartbeat now says rebalance; it rejoins, and both get generation 2
        assert await coord.heartbeat("g", a.member_id, None, 1) is E.rebalance_in_progress
        a2 = await coord.join("g", jreq(a.member_id))
        await trio.sleep(0.01)
        assert a2.generation == 2 and results[0].generation == 2
        b_id = results[0].member_id
        assert a2.leader == a.member_id and len(a2.members) == 2

        async def b_syncs() -> None:
            await coord.sync("g", b_id, None, 2, None, None, {})

        n.start_soon(b_syncs)
        await coord.sync("g", a.member_id, None, 2, None, None, {a.member_id: b"", b_id: b""})
        # b dies: no more heartbeats. a keeps heartbeating.
        start = trio.current_time()
        while coord.groups["g"].state is GroupState.STABLE:
            await trio.sleep(0.2)
            await coord.heartbeat("g", a.member_id, None, 2)
        assert trio.current_time() - start <= 1.2  # the 1000 ms session timeout
        a3 = await coord.join("g", jreq(a.member_id))
        assert a3.generation == 3 and [m[0] for m in a3.members] == [a.member_id]
        n.cancel_scope.cancel()


async def test_static_member_restart_keeps_assignment(topics, autojump_clock) -> None:
    coord = GroupCoordinator(topics, VALUES, lambda: 0)
    await coord.load()
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        a = await join(coord, "g", "inst-a")
        await coord.sync("g", a.member_id, "inst-a", 1, None, None, {a.member_id: b"P0"})
        await trio.sleep(0.5)  # "restart" inside the session timeout, no LeaveGroup
        again = await join(coord, "g", "inst-a")
        assert again.error is E.none and again.generation == 1
        s = await coord.sync("g", again.member_id, "inst-a", 1, None, None, {})
        assert s.assignment == b"P0"
        assert await coord.heartbeat("g", a.member_id, "inst-a", 1) is E.fenced_instance_id
        n.cancel_scope.cancel()
    fresh = GroupCoordinator(topics, VALUES, lambda: 0)
    await fresh.load()  # the replacement was persisted
    assert list(fresh.groups["g"].members) == [again.member_id]


async def test_delete_group_writes_tombstones(topics, autojump_clock) -> None:
    coord = GroupCoordinator(topics, VALUES, lambda: 0)
    await coord.load()
    tp = TopicPartition("t", 2)
    await coord.commit_offsets("s", "", None, -1, [CommitRequest(tp, 1, -1, None)])
    assert await coord.delete_group("s") is E.none
    assert await coord.delete_group("s") is E.group_id_not_found
    fresh = GroupCoordinator(topics, VALUES, lambda: 0)
    await fresh.load()
    assert "s" not in fresh.groups and not fresh.offsets.has_offsets("s")


async def test_commit_checks(topics, autojump_clock) -> None:
    coord = GroupCoordinator(topics, VALUES, lambda: 0)
    await coord.load()
    c = [CommitRequest(TopicPartition("t", 0), 1, -1, "x" * 5000)]
    assert await coord.commit_offsets("nogroup", "m", None, 2, c) is E.group_id_not_found
    res = await coord.commit_offsets("simple", "", None, -1, c)
    assert res == {c[0].tp: E.offset_metadata_too_large}
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        a = await join(coord, "g")
        ok = [CommitRequest(TopicPartition("t", 0), 1, -1, "")]
        # CompletingRebalance: no commits
        assert await coord.commit_offsets("g", a.member_id, None, 1, ok) is E.rebalance_in_progress
        await coord.sync("g", a.member_id, None, 1, None, None, {})
        assert await coord.commit_offsets("g", a.member_id, None, 0, ok) is E.illegal_generation
        assert await coord.commit_offsets("g", "who", None, 1, ok) is E.unknown_member_id
        assert await coord.commit_offsets("g", "", None, -1, ok) is E.unknown_member_id
        assert await coord.commit_offsets("g", a.member_id, None, 1, ok) == {ok[0].tp: E.none}
        n.cancel_scope.cancel()
