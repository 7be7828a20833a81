"""The classic group coordinator against Kafka 4.x (issue 23, points 1-9), under trio's
MockClock where time matters: static members kept at join completion, static leader rejoins,
session timers after a parked SyncGroup, expired pending members, OffsetCommit's check order,
offsets of deleted topics and partitions, offsets retention, refused JoinGroups."""

from __future__ import annotations

import struct
from dataclasses import replace
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from coordinator.group.classic import ClassicGroup, GroupConfig, JoinRequest, JoinResult
from coordinator.group.offsets import CommitRequest
from coordinator.group.runtime import GroupCoordinator
from coordinator.group.state import Act, GroupState
from storage.api import TopicPartition
from storage.topics import TopicManager
from tests.coordinator.test_group_runtime import VALUES, join, jreq, topics

E, S = ErrorCode, GroupState
__all__ = ["topics"]  # the fixture


async def test_offset_commit_checks_member_then_generation_then_rebalance(
    topics, autojump_clock
) -> None:
    coord = GroupCoordinator(topics, VALUES, lambda: 0)
    await coord.load()
    ok = [CommitRequest(TopicPartition("t", 0), 1, -1, "")]
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        a = await join(coord, "g")  # CompletingRebalance, generation 1
        assert await coord.commit_offsets("g", "who", None, 1, ok) is E.unknown_member_id
        assert await coord.commit_offsets("g", a.member_id, None, 0, ok) is E.illegal_generation
        assert await coord.commit_offsets("g", "", None, -1, ok) is E.unknown_member_id
        assert await coord.commit_offsets("g", a.member_id, None, 1, ok) is E.rebalance_in_progress
        n.cancel_scope.cancel()


# -- the classic group, pure (every call takes now_ms) ---------------------------------------

CFG = GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=100)
PROTOS = (("range", b"r"),)


def jr(
    member_id: str = "",
    instance: str | None = None,
    *,
    session: int = 1000,
    rebalance: int = 5000,
    known_id: bool = False,
    v9: bool = True,
    protos: tuple[tuple[str, bytes], ...] = PROTOS,
) -> JoinRequest:
    return JoinRequest(
        member_id, instance, "cli", "/h", session, rebalance, "consumer", protos, known_id, v9
    )


def parked(out: object) -> str:
    assert isinstance(out, tuple) and out[0] is Act.AWAIT_JOIN, out
    return out[1]


def stabilise(g: ClassicGroup, now: int) -> None:
    """Every member syncs; the leader's assignment is persisted."""
    assert g.state is S.COMPLETING_REBALANCE
    for mid in list(g.members):
        if g.sync(mid, g.members[mid].group_instance_id, g.generation, None, None, now) is (
            Act.PERSIST_ASSIGNMENT
        ):
            g.complete_assignment(g.generation, {m: m.encode() for m in g.members}, now)
    assert g.state is S.STABLE
    g.outbox.clear()


def leader_and_static(
    session: int = 10_000, leader_instance: str | None = None, cfg: GroupConfig = CFG
) -> tuple[ClassicGroup, str, str]:
    """A STABLE group: a leader and a static member "s"."""
    g = ClassicGroup("g", cfg)
    leader = parked(g.join(jr(instance=leader_instance, session=session), 0))
    static = parked(g.join(jr(instance="s", session=session), 0))
    parked(g.join(jr(leader, leader_instance, session=session), 0))
    stabilise(g, 0)
    return g, leader, static


def test_silent_static_member_stays_in_the_group_at_join_completion() -> None:
    g, leader, static = leader_and_static()
    gen = g.generation
    parked(g.join(jr(leader, session=10_000), 100))  # the leader rejoins, "s" stays silent
    g.expire(5100)  # the rebalance timeout
    assert g.state is S.COMPLETING_REBALANCE and g.generation == gen + 1
    assert set(g.members) == {leader, static}
    [(to, answer)] = g.outbox
    assert to == leader and isinstance(answer, JoinResult)
    assert {m[0] for m in answer.members} == {leader, static}
    # its next heartbeat says "rejoin", not "you are gone"
    assert g.heartbeat(static, "s", gen, 5200) is E.illegal_generation
    again = g.join(jr(static, "s", session=10_000), 5300)
    assert isinstance(again, JoinResult) and again.generation == gen + 1


def test_silent_static_leader_hands_over_to_a_member_that_rejoined() -> None:
    g, leader, static = leader_and_static(leader_instance="l")
    parked(g.join(jr(static, "s", session=10_000, protos=(("range", b"x"),)), 100))
    g.expire(5100)
    assert g.state is S.COMPLETING_REBALANCE and g.leader_id == static
    assert set(g.members) == {leader, static}


def test_static_leader_rejoining_a_stable_group_v9_and_older() -> None:
    g, leader, _ = leader_and_static(leader_instance="l")
    new = g.join(jr(instance="l", session=10_000), 10)
    assert isinstance(new, JoinResult) and new.error is E.none and new.member_id != leader
    assert new.leader == new.member_id and new.skip_assignment
    assert len(new.members) == 2 and g.state is S.STABLE

    g, leader, _ = leader_and_static(leader_instance="l")
    old = g.join(jr(instance="l", session=10_000, v9=False), 10)
    assert isinstance(old, JoinResult) and old.error is E.none
    assert old.leader == leader and old.members == () and not old.skip_assignment
    assert g.leader_id == old.member_id and g.state is S.STABLE


def test_session_restarts_when_a_parked_sync_is_answered() -> None:
    g = ClassicGroup("g", CFG)
    leader = parked(g.join(jr(), 0))
    follower = parked(g.join(jr(), 0))
    parked(g.join(jr(leader), 0))
    assert g.state is S.COMPLETING_REBALANCE
    assert g.sync(follower, None, g.generation, None, None, 10) is Act.AWAIT_SYNC
    # the leader takes 3 s (session timeout 1 s) to send its assignment
    assert g.sync(leader, None, g.generation, None, None, 3000) is Act.PERSIST_ASSIGNMENT
    g.complete_assignment(g.generation, {follower: b"A"}, 3000)
    assert g.members[follower].session_deadline == 4000
    assert g.expire(3500) == []
    assert g.heartbeat(follower, None, g.generation, 3500) is E.none


def test_expired_pending_member_completes_the_join_phase() -> None:
    g = ClassicGroup("g", CFG)
    leader = parked(g.join(jr(), 0))
    stabilise(g, 0)
    required = g.join(jr(known_id=True), 100)  # KIP-394: never comes back
    assert isinstance(required, JoinResult) and required.error is E.member_id_required
    parked(g.join(jr(leader, protos=(("range", b"new"),)), 200))  # a rebalance starts
    assert g.state is S.PREPARING_REBALANCE
    assert g.next_deadline() == 1100  # the pending member's session, not the rebalance timeout
    g.expire(1100)
    assert g.state is S.COMPLETING_REBALANCE and list(g.members) == [leader]
    assert [to for to, _ in g.outbox] == [leader]


def test_group_max_size_counts_as_kafka_accept_joining_member() -> None:
    cfg = replace(CFG, max_size=2)
    g = ClassicGroup("g", cfg)
    leader = parked(g.join(jr(), 0))
    stabilise(g, 0)
    # a pending member (MEMBER_ID_REQUIRED) does not count: Stable counts members
    first = g.join(jr(known_id=True), 10)
    assert isinstance(first, JoinResult) and first.error is E.member_id_required
    second = g.join(jr(known_id=True), 10)
    assert isinstance(second, JoinResult) and second.error is E.member_id_required
    # PreparingRebalance counts the members parked in JoinGroup
    b = parked(g.join(jr(first.member_id, known_id=True), 20))
    assert g.state is S.PREPARING_REBALANCE and len(g.members) == 2  # leader not parked yet
    c = g.join(jr(second.member_id, known_id=True), 20)
    assert isinstance(c, tuple)  # 1 parked < 2: accepted
    assert len(g.members) == 3
    # now 2 are parked: the leader's rejoin is refused and it is removed
    refused = g.join(jr(leader, known_id=True), 30)
    assert isinstance(refused, JoinResult) and refused.error is E.group_max_size_reached
    assert leader not in g.members and set(g.members) == {b, c[1]}
    assert g.join(jr(known_id=True), 30) == JoinResult(E.group_max_size_reached, "")


async def test_refused_join_creates_no_group(topics, autojump_clock) -> None:
    coord = GroupCoordinator(topics, VALUES, lambda: 0)
    await coord.load()
    bad = replace(jreq(), session_timeout_ms=50)  # below group.min.session.timeout.ms
    got = await coord.join("fresh", bad)
    assert got.error is E.invalid_session_timeout
    assert coord.list_groups() == [] and "fresh" not in coord.groups


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


async def test_offsets_retention(topics: TopicManager, autojump_clock: Any) -> None:
    values = {
        **VALUES,
        "offsets.retention.minutes": 1,
        "offsets.retention.check.interval.ms": 1000,
    }
    epoch = 1_700_000_000_000
    coord = GroupCoordinator(topics, values, lambda: epoch + int(trio.current_time() * 1000))
    await coord.load()
    t0 = TopicPartition("t", 0)
    t1 = TopicPartition("t", 1)

    def offsets(group: str) -> dict[TopicPartition, int]:
        return {f.tp: f.offset for f in coord.offsets.fetch(group, None)}

    def listed() -> set[str]:
        groups = coord.list_groups()
        assert not isinstance(groups, ErrorCode)
        return {g.group_id for g in groups}

    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        start = trio.current_time()
        await coord.commit_offsets("simple", "", None, -1, [CommitRequest(t0, 1, -1, None)])
        await coord.commit_offsets("old", "", None, -1, [CommitRequest(t0, 2, -1, None)])
        # a Stable consumer group subscribed to "t" keeps its offsets however old
        member = replace(
            jreq(),
            protocols=(("range", subscription("t")),),
            require_known_member_id=False,
            session_timeout_ms=60_000,
        )
        first = await coord.join("live", member)
        await coord.sync("live", first.member_id, None, 1, None, None, {})
        assert await coord.commit_offsets(
            "live", first.member_id, None, 1, [CommitRequest(t0, 3, -1, None)]
        ) == {t0: E.none}
        # a consumer group that becomes Empty at 30 s: its offsets run from then
        other = await coord.join("left", member)
        await coord.sync("left", other.member_id, None, 1, None, None, {})
        await coord.commit_offsets(
            "left", other.member_id, None, 1, [CommitRequest(t0, 4, -1, None)]
        )
        await trio.sleep(20)
        # a commit 20 s in keeps "old" partly alive: t-1 is 40 s younger than t-0
        await coord.commit_offsets("old", "", None, -1, [CommitRequest(t1, 5, -1, None)])
        await trio.sleep(10)
        assert await coord.leave("left", [(other.member_id, None)]) == [E.none]
        while trio.current_time() - start < 58:  # "live" heartbeats
            await trio.sleep(1)
            assert await coord.heartbeat("live", first.member_id, None, 1) is E.none
        assert offsets("simple") == {t0: 1} and offsets("old") == {t0: 2, t1: 5}
        await trio.sleep(3)  # 61 s: the commits of 0 s expired
        assert offsets("simple") == {} and "simple" not in listed()
        assert offsets("old") == {t1: 5} and "old" in listed()
        assert offsets("left") == {t0: 4}  # Empty for 31 s only
        assert offsets("live") == {t0: 3}
        await trio.sleep(30)  # 91 s
        assert offsets("old") == {} and offsets("left") == {}
        assert listed() == {"live"}
        n.cancel_scope.cancel()
    fresh = GroupCoordinator(topics, values, lambda: 0)
    await fresh.load()  # the tombstones are in the log
    assert set(fresh.groups) == {"live"}
    assert {g: fresh.offsets.fetch(g, None) for g in ("simple", "old", "left")} == {
        "simple": [],
        "old": [],
        "left": [],
    }


async def test_offset_delete_of_a_group_with_members(topics, autojump_clock) -> None:
    """Only topics nobody subscribes to; a subscription that does not parse covers them all."""
    coord = GroupCoordinator(topics, VALUES, lambda: 0)
    await coord.load()
    t0, u0 = TopicPartition("t", 0), TopicPartition("u", 0)
    for group, metadata in (("parsed", subscription("t")), ("opaque", b"m")):
        member = replace(jreq(), protocols=(("range", metadata),), require_known_member_id=False)
        first = await coord.join(group, member)
        await coord.sync(group, first.member_id, None, 1, None, None, {})
        assert await coord.delete_offsets(group, [t0, u0]) == {
            t0: E.group_subscribed_to_topic,
            u0: E.none if group == "parsed" else E.group_subscribed_to_topic,
        }


async def test_join_during_a_group_deletion_starts_a_new_group(topics, autojump_clock) -> None:
    """DeleteGroups writes while a JoinGroup arrives: the joiner gets a new group, and the
    deletion removes only the old one."""
    coord = GroupCoordinator(topics, VALUES, lambda: 0)
    await coord.load()
    t0 = TopicPartition("t", 0)
    await coord.commit_offsets("g", "", None, -1, [CommitRequest(t0, 1, -1, None)])
    append = coord._append

    async def slow_append(group_id: str, records: list[Any]) -> int:
        await trio.sleep(1)  # storage that takes its time
        return await append(group_id, records)

    coord._append = slow_append  # type: ignore[method-assign]
    joined: list[Any] = []
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)

        async def joiner() -> None:
            await trio.sleep(0.5)  # while the deletion is being written
            joined.append(await join(coord, "g"))

        n.start_soon(joiner)
        assert await coord.delete_group("g") is E.none
        assert joined[0].error is E.none and joined[0].generation == 1
        assert list(coord.groups["g"].members) == [joined[0].member_id]
        assert coord.offsets.fetch("g", None) == []
        n.cancel_scope.cancel()


async def test_offsets_retention_waits_for_pending_transactional_offsets(
    topics: TopicManager, autojump_clock: Any
) -> None:
    """An offset with a pending transactional offset for its partition does not expire, and a
    group with pending offsets is not deleted (Kafka's hasPendingTransactionalOffsets and open
    transactions check; kafkad also keeps a group whose only offsets are pending)."""
    values = {
        **VALUES,
        "offsets.retention.minutes": 1,
        "offsets.retention.check.interval.ms": 1000,
    }
    coord = GroupCoordinator(topics, values, lambda: int(trio.current_time() * 1000))
    await coord.load()
    t0 = TopicPartition("t", 0)

    def verified(*_: Any) -> ErrorCode:
        return E.none

    def listed() -> set[str]:
        groups = coord.list_groups()
        assert not isinstance(groups, ErrorCode)
        return {g.group_id for g in groups}

    async def txn_commit(group: str, pid: int, offset: int) -> None:
        got = await coord.txn_commit_offsets(
            "tx", group, pid, 0, "", None, -1, [CommitRequest(t0, offset, -1, None)], verified
        )
        assert got == {t0: E.none}

    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        await coord.commit_offsets("mixed", "", None, -1, [CommitRequest(t0, 1, -1, None)])
        await trio.sleep(30)
        await txn_commit("mixed", 7, 2)  # pending on t-0 from 30 s
        await txn_commit("pending", 8, 3)  # a group with only a pending offset
        await trio.sleep(100)  # both well past retention
        assert [f.offset for f in coord.offsets.fetch("mixed", None)] == [1]
        assert {"mixed", "pending"} <= listed()
        for group, pid in (("mixed", 7), ("pending", 8)):
            p = await coord._offsets_partition(group)
            written = await coord.write_txn_marker(p, pid, 0, False, 0)  # aborted
            assert not isinstance(written, ErrorCode)
        await trio.sleep(2)  # the next pass
        assert coord.offsets.fetch("mixed", None) == []
        assert "mixed" not in listed() and "pending" not in listed()
        n.cancel_scope.cancel()
