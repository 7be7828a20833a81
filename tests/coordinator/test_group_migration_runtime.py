"""Online migration in the group coordinator's runtime, under trio's MockClock: a running
classic group upgraded by a consumer-protocol member (parked requests answered, records
written and replayed), downgraded back when that member leaves, and the policy honoured."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from coordinator.consumer_group.consumer_protocol import (
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from coordinator.consumer_group.heartbeat import Heartbeat
from coordinator.group.classic import JoinRequest
from coordinator.group.runtime import GroupCoordinator
from coordinator.group.state import GroupState
from storage.api import StorageError
from storage.topics import TopicManager
from tests.coordinator.test_consumer_group_runtime import coordinator
from tests.coordinator.test_group_runtime import topics

E = ErrorCode
__all__ = ["topics"]  # the fixture
PROTOCOLS = (("range", encode_subscription(["t"], {}, version=1)),)


def jreq(member_id: str = "") -> JoinRequest:
    return JoinRequest(member_id, None, "c", "/h", 6000, 3000, "consumer", PROTOCOLS, True)


def cjoin(member: str) -> Heartbeat:
    return Heartbeat(
        "g", member, 0, rebalance_timeout_ms=3000, subscribed_topic_names=("t",), owned=()
    )


async def classic_member(coord: GroupCoordinator, n: trio.Nursery, out: dict[str, int]) -> None:
    """Join and sync one classic member (rejoining while the group rebalances); record its
    generation in ``out``. A leader gives the members the partitions round-robin."""
    member_id = (await coord.join("g", jreq())).member_id
    while True:
        r = await coord.join("g", jreq(member_id))
        assert r.error is E.none
        plan = {}
        if r.leader == r.member_id:
            ids = sorted(m for m, _, _ in r.members)
            plan = {
                mid: encode_assignment({"t": [i for i in range(6) if i % len(ids) == k]}, 1)
                for k, mid in enumerate(ids)
            }
        s = await coord.sync("g", r.member_id, None, r.generation, "consumer", "range", plan)
        if s.error is E.none:
            out[r.member_id] = r.generation
            return
        assert s.error is E.rebalance_in_progress


async def test_upgrade_then_downgrade(topics: TopicManager, autojump_clock: Any) -> None:
    coord = coordinator(topics)
    await coord.load()
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        gens: dict[str, int] = {}
        async with trio.open_nursery() as joins:
            joins.start_soon(classic_member, coord, n, gens)
            joins.start_soon(classic_member, coord, n, gens)
        classic = coord.groups["g"]
        assert classic.state is GroupState.STABLE and len(gens) == 2
        gen = classic.generation
        # a consumer-protocol member joins: the group becomes a consumer group
        r = await coord.consumer_heartbeat(cjoin("c"), 1)
        assert r.error is E.none
        assert "g" not in coord.groups
        g = coord.consumer_groups["g"]
        assert g.group_epoch == gen + 1 and set(g.members) == {*gens, "c"}
        a, b = sorted(gens)
        assert g.members[a].classic is not None and g.members[a].member_epoch == gen
        # the classic members hear of the rebalance and rejoin (eager: owning nothing)
        assert await coord.heartbeat("g", a, None, gen) is E.rebalance_in_progress
        owners: dict[int, str] = {}
        for mid in (a, b):
            j = await coord.join("g", jreq(mid))
            assert j.error is E.none and j.generation == gen + 1
            s = await coord.sync("g", mid, None, j.generation, "consumer", "range", {})
            for _, parts in decode_assignment(s.assignment):
                owners.update({p: mid for p in parts})
        r = await coord.consumer_heartbeat(Heartbeat("g", "c", r.member_epoch, owned=()), 1)
        for t_parts in (r.assignment or {}).values():
            assert not set(t_parts) & set(owners)
            owners.update({p: "c" for p in t_parts})
        assert sorted(owners) == list(range(6)) and set(owners.values()) == {a, b, "c"}
        # the records rebuild the mixed group
        again = coordinator(topics)
        await again.load()
        loaded = again.consumer_groups["g"]
        assert loaded.members == g.members and "g" not in again.groups
        # the consumer-protocol member leaves: back to a classic group, rebalancing
        epoch = g.group_epoch
        left = await coord.consumer_heartbeat(Heartbeat("g", "c", -1), 1)
        assert (left.error, left.member_epoch) == (E.none, -1)
        assert "g" not in coord.consumer_groups
        back = coord.groups["g"]
        assert back.state is GroupState.PREPARING_REBALANCE and set(back.members) == {a, b}
        assert back.generation == epoch
        assert await coord.heartbeat("g", a, None, epoch) is E.rebalance_in_progress
        again = coordinator(topics)
        await again.load()
        assert "g" not in again.consumer_groups and set(again.groups["g"].members) == {a, b}
        n.cancel_scope.cancel()


async def test_policy_disabled_refuses_the_upgrade(
    topics: TopicManager, autojump_clock: Any
) -> None:
    coord = coordinator(topics, **{"group.consumer.migration.policy": "disabled"})
    await coord.load()
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        await classic_member(coord, n, {})
        r = await coord.consumer_heartbeat(cjoin("c"), 1)
        assert (r.error, r.message) == (E.group_id_not_found, "Group g is not a consumer group.")
        assert coord.groups["g"].state is GroupState.STABLE
        n.cancel_scope.cancel()


async def test_upgrade_only_policy_keeps_the_consumer_group(
    topics: TopicManager, autojump_clock: Any
) -> None:
    coord = coordinator(topics, **{"group.consumer.migration.policy": "upgrade"})
    await coord.load()
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        await classic_member(coord, n, {})
        r = await coord.consumer_heartbeat(cjoin("c"), 1)
        assert r.error is E.none
        await coord.consumer_heartbeat(Heartbeat("g", "c", -1), 1)
        assert "g" not in coord.groups and len(coord.consumer_groups["g"].members) == 1
        n.cancel_scope.cancel()


async def test_downgrade_when_the_consumer_member_times_out(
    topics: TopicManager, autojump_clock: Any
) -> None:
    coord = coordinator(topics, **{"group.consumer.session.timeout.ms": 45000})
    await coord.load()
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        g = coord.consumer_groups
        assert (await coord.consumer_heartbeat(cjoin("c"), 1)).error is E.none
        j = await coord.join("g", jreq("k"))
        assert j.error is E.none
        for _ in range(60):  # the classic member keeps its session; "c" goes silent
            await trio.sleep(1)
            code = await coord.heartbeat("g", "k", None, j.generation)
            assert code in (E.none, E.rebalance_in_progress)
            if "g" not in g:
                break
            if code is E.none and "k" in g["g"].sync_deadlines:
                await coord.sync("g", "k", None, j.generation, None, None, {})
        assert "g" not in g and coord.groups["g"].state is GroupState.PREPARING_REBALANCE
        n.cancel_scope.cancel()


async def test_leave_group_removing_the_last_consumer_member_downgrades(
    topics: TopicManager, autojump_clock: Any
) -> None:
    """An admin's LeaveGroup by instance id removes the static consumer-protocol member (Kafka
    checks no protocol there); it was the last one, so the group becomes a classic group
    (Kafka's consumerGroupFenceMembers), the member id echoed as "" was asked."""
    coord = coordinator(topics)
    await coord.load()
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        r = await coord.consumer_heartbeat(replace(cjoin("c"), instance_id="ic"), 1)
        assert r.error is E.none
        assert (await coord.join("g", jreq("k"))).error is E.none
        assert await coord.leave("g", [("", "ic"), ("zz", None)]) == [
            E.none,
            E.unknown_member_id,
        ]
        assert "g" not in coord.consumer_groups
        assert set(coord.groups["g"].members) == {"k"}
        again = coordinator(topics)
        await again.load()
        assert "g" not in again.consumer_groups and set(again.groups["g"].members) == {"k"}
        n.cancel_scope.cancel()


async def test_leave_group_removing_every_consumer_member_at_once_downgrades(
    topics: TopicManager, autojump_clock: Any
) -> None:
    """One LeaveGroup removing both consumer-protocol members (an admin's removal of two
    instances) leaves only the classic member: the group becomes a classic group (Kafka's
    consumerGroupFenceMembers checks the set of fenced members)."""
    coord = coordinator(topics)
    await coord.load()
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        for mid in ("c", "d"):
            r = await coord.consumer_heartbeat(replace(cjoin(mid), instance_id="i" + mid), 1)
            assert r.error is E.none
        assert (await coord.join("g", jreq("k"))).error is E.none
        assert await coord.leave("g", [("", "ic"), ("", "id")]) == [E.none, E.none]
        assert "g" not in coord.consumer_groups
        assert set(coord.groups["g"].members) == {"k"}
        assert coord.groups["g"].state is GroupState.PREPARING_REBALANCE
        again = coordinator(topics)
        await again.load()
        assert "g" not in again.consumer_groups and set(again.groups["g"].members) == {"k"}
        n.cancel_scope.cancel()


async def test_a_failed_upgrade_write_keeps_the_classic_group(
    topics: TopicManager, autojump_clock: Any
) -> None:
    coord = coordinator(topics)
    await coord.load()
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        await classic_member(coord, n, {})

        async def broken(group_id: str, records: object) -> int:
            raise StorageError("disk full")

        coord._append = broken  # type: ignore[method-assign]
        r = await coord.consumer_heartbeat(cjoin("c"), 1)
        assert r.error is E.coordinator_not_available
        assert coord.groups["g"].state is GroupState.STABLE and "g" not in coord.consumer_groups
        n.cancel_scope.cancel()


async def test_offsets_survive_the_upgrade_and_a_restart(
    topics: TopicManager, autojump_clock: Any
) -> None:
    from coordinator.group.offsets import CommitRequest
    from storage.api import TopicPartition

    coord = coordinator(topics)
    await coord.load()
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        gens: dict[str, int] = {}
        await classic_member(coord, n, gens)
        [(mid, gen)] = gens.items()
        tp = TopicPartition("t", 0)
        assert await coord.commit_offsets(
            "g", mid, None, gen, [CommitRequest(tp, 9, -1, None)]
        ) == {tp: E.none}
        assert (await coord.consumer_heartbeat(cjoin("c"), 1)).error is E.none
        n.cancel_scope.cancel()
    again = coordinator(topics)
    await again.load()
    assert "g" in again.consumer_groups
    assert [f.offset for f in again.offsets.fetch("g", None)] == [9]


async def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades(
    topics: TopicManager, autojump_clock: Any
) -> None:
    coord = coordinator(topics)
    await coord.load()
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        static = Heartbeat(
            "g",
            "c",
            0,
            instance_id="i",
            rebalance_timeout_ms=3000,
            subscribed_topic_names=("t",),
            owned=(),
        )
        assert (await coord.consumer_heartbeat(static, 1)).error is E.none
        assert (await coord.join("g", jreq("k"))).error is E.none
        before = dict(coord.consumer_groups["g"].target["c"])
        req = JoinRequest("", "i", "c", "/h", 6000, 3000, "consumer", PROTOCOLS, True)
        r = await coord.join("g", req)
        assert r.error is E.none and "g" not in coord.consumer_groups
        classic = coord.groups["g"]
        assert classic.state is GroupState.STABLE and set(classic.members) == {"k", r.member_id}
        [(_, parts)] = decode_assignment(classic.members[r.member_id].assignment)
        assert set(parts) == set(next(iter(before.values())))
        n.cancel_scope.cancel()


async def test_a_failed_classic_join_write_changes_nothing(
    topics: TopicManager, autojump_clock: Any
) -> None:
    coord = coordinator(topics)
    await coord.load()
    assert (await coord.consumer_heartbeat(cjoin("c"), 1)).error is E.none
    g = coord.consumer_groups["g"]
    before = (g.group_epoch, dict(g.members), dict(g.target))

    async def broken(group_id: str, records: object) -> int:
        raise StorageError("disk full")

    coord._append = broken  # type: ignore[method-assign]
    assert (await coord.join("g", jreq("k"))).error is E.coordinator_not_available
    assert (g.group_epoch, dict(g.members), dict(g.target)) == before
    assert "k" not in g.session_deadlines and "k" not in g.sync_deadlines


async def test_pending_transactional_offsets_survive_the_upgrade_and_a_restart(
    topics: TopicManager, autojump_clock: Any
) -> None:
    """A classic member's TxnOffsetCommit is pending when a consumer-protocol member upgrades
    the group; the transaction then commits. The group's tombstone (written by the upgrade)
    does not drop the pending offsets at load, as it does not live (Kafka's group tombstone
    leaves the offsets alone; DeleteGroups tombstones the pending offsets themselves)."""
    from coordinator.group.offsets import CommitRequest
    from storage.api import TopicPartition

    coord = coordinator(topics)
    await coord.load()
    tp = TopicPartition("t", 0)

    def verified(*_: Any) -> ErrorCode:
        return E.none

    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        gens: dict[str, int] = {}
        await classic_member(coord, n, gens)
        [(mid, gen)] = gens.items()
        got = await coord.txn_commit_offsets(
            "tx", "g", 7, 0, mid, None, gen, [CommitRequest(tp, 5, -1, None)], verified
        )
        assert got == {tp: E.none}
        assert (await coord.consumer_heartbeat(cjoin("c"), 1)).error is E.none
        p = await coord._offsets_partition("g")
        assert not isinstance(await coord.write_txn_marker(p, 7, 0, True, 0), ErrorCode)
        assert [f.offset for f in coord.offsets.fetch("g", None)] == [5]
        n.cancel_scope.cancel()
    again = coordinator(topics)
    await again.load()
    assert "g" in again.consumer_groups
    assert [f.offset for f in again.offsets.fetch("g", None)] == [5]


async def test_a_classic_sync_during_the_upgrade_write_does_not_revive_the_classic_group(
    topics: TopicManager, autojump_clock: Any
) -> None:
    """The leader's SyncGroup reaches the classic group while the upgrade's records are being
    written: it must not write the classic group's record after its tombstone (the group
    would be both classic and consumer at the next load)."""
    coord = coordinator(topics)
    await coord.load()
    real = coord._append

    async def slow(group_id: str, records: Any) -> int:
        if any(v is None for _, v in records):  # the upgrade: the classic group's tombstone
            await trio.sleep(1)
        return await real(group_id, records)

    coord._append = slow  # type: ignore[method-assign]
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        member_id = (await coord.join("g", jreq())).member_id
        j = await coord.join("g", jreq(member_id))
        assert j.error is E.none and j.leader == member_id
        results: dict[str, Any] = {}

        async def upgrade() -> None:
            results["hb"] = await coord.consumer_heartbeat(cjoin("c"), 1)

        n.start_soon(upgrade)
        await trio.sleep(0.5)  # the upgrade's write is in flight
        plan = {member_id: encode_assignment({"t": range(6)}, 1)}
        s = await coord.sync("g", member_id, None, j.generation, "consumer", "range", plan)
        await trio.sleep(2)
        assert results["hb"].error is E.none
        assert "g" not in coord.groups and "c" in coord.consumer_groups["g"].members
        assert s.error is E.rebalance_in_progress  # rejoin, in the consumer group
        assert member_id in coord.consumer_groups["g"].members
        n.cancel_scope.cancel()
    again = coordinator(topics)
    await again.load()
    assert "g" in again.consumer_groups and "g" not in again.groups


async def test_a_classic_join_during_the_downgrade_write_joins_the_classic_group(
    topics: TopicManager, autojump_clock: Any
) -> None:
    """A classic JoinGroup waits for the write lock while the downgrade's records are being
    written: it must join the classic group the consumer group became, not write member
    records of the consumer group after its tombstones (both groups at the next load)."""
    coord = coordinator(topics)
    await coord.load()
    real = coord._append
    slow_writes = False

    async def slow(group_id: str, records: Any) -> int:
        if slow_writes:
            await trio.sleep(1)
        return await real(group_id, records)

    coord._append = slow  # type: ignore[method-assign]
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        assert (await coord.consumer_heartbeat(cjoin("c"), 1)).error is E.none
        assert (await coord.join("g", jreq("k"))).error is E.none
        slow_writes = True
        joined: list[Any] = []

        async def leave() -> None:
            await coord.consumer_heartbeat(Heartbeat("g", "c", -1), 1)

        async def new_member() -> None:
            req = JoinRequest("", None, "c", "/h", 6000, 3000, "consumer", PROTOCOLS, False)
            joined.append(await coord.join("g", req))

        n.start_soon(leave)
        await trio.sleep(0.5)  # the downgrade's write is in flight
        n.start_soon(new_member)
        await trio.sleep(0.1)
        k = await coord.join("g", jreq("k"))  # "k" rejoins the rebalancing classic group
        await trio.sleep(0.01)
        assert "g" not in coord.consumer_groups
        assert joined and (joined[0].error, joined[0].generation) == (E.none, k.generation)
        assert set(coord.groups["g"].members) == {"k", joined[0].member_id}
        n.cancel_scope.cancel()
    again = coordinator(topics)
    await again.load()
    assert "g" in again.groups and "g" not in again.consumer_groups
