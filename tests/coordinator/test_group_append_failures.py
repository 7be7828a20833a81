"""A group's record that cannot be appended to ``__consumer_offsets``: nothing is answered as if
it were durable. Kafka (GroupMetadataManager's append callbacks, mapped by
``appendGroupMetadataErrorToResponseError``: KAFKA_STORAGE_ERROR -> NOT_COORDINATOR):

* the leader's SyncGroup: every member's assignment is reset, the leader and the parked
  followers are answered the error, and the group rebalances;
* a static member's rejoin while STABLE: the member's old id and settings come back and the
  JoinGroup is answered the error with no member id.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode

from coordinator.group.classic import JoinRequest, JoinResult, SyncResult
from coordinator.group.runtime import GroupCoordinator
from coordinator.group.state import GroupState
from storage.api import LogConfig, StorageError
from storage.backends import open_store
from storage.topics import TopicManager
from tests.coordinator.test_group_runtime import VALUES, join

E = ErrorCode


def jreq(member_id: str = "", instance: str | None = None) -> JoinRequest:
    return JoinRequest(
        member_id, instance, "c", "/h", 1000, 3000, "consumer", (("range", b"m"),), True
    )


@pytest.fixture
async def coord() -> AsyncIterator[GroupCoordinator]:
    async with open_store("memory://") as store:
        tm = TopicManager(store, LogConfig(), VALUES)
        await tm.create("t", 1, {})
        c = GroupCoordinator(tm, VALUES, lambda: 1000)
        await c.load()
        yield c


def fail_appends(coord: GroupCoordinator, plan: list[bool]) -> None:
    """Each next append to ``__consumer_offsets`` fails while ``plan`` says so, then succeed."""
    real = coord._append

    async def appending(*args: Any, **kwargs: Any) -> Any:
        if plan and plan.pop(0):
            raise StorageError("disk full")
        return await real(*args, **kwargs)

    coord._append = appending  # type: ignore[method-assign]


async def test_failed_assignment_append_answers_everyone_and_keeps_no_assignment(
    coord: GroupCoordinator, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        leader = await join(coord, "g")
        follower_box: list[JoinResult] = []

        async def follower_joins() -> None:
            follower_box.append(await join(coord, "g"))

        n.start_soon(follower_joins)
        await trio.sleep(0.01)
        # the follower's join started a rebalance: the leader rejoins, both get generation 2
        leader = await coord.join("g", jreq(leader.member_id))
        await trio.sleep(0.01)
        follower = follower_box[0]
        assert leader.error is E.none and follower.error is E.none
        gen = leader.generation
        synced: list[SyncResult] = []

        async def follower_syncs() -> None:
            synced.append(await coord.sync("g", follower.member_id, None, gen, None, None, {}))

        n.start_soon(follower_syncs)
        await trio.sleep(0.01)
        assert not synced  # parked until the leader's assignment is durable
        fail_appends(coord, [True])
        plan = {leader.member_id: b"L", follower.member_id: b"F"}
        answer = await coord.sync("g", leader.member_id, None, gen, None, None, plan)
        await trio.sleep(0.01)
        assert answer.error is E.not_coordinator and answer.assignment == b""
        assert [s.error for s in synced] == [E.not_coordinator]
        g = coord.groups["g"]
        assert g.state is GroupState.PREPARING_REBALANCE
        assert all(m.assignment == b"" for m in g.members.values())
        n.cancel_scope.cancel()


async def test_failed_static_rejoin_append_reverts_the_member_id(
    coord: GroupCoordinator, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        first = await coord.join("g", jreq("", "inst"))
        assert first.error is E.none
        gen = first.generation
        ok = await coord.sync(
            "g", first.member_id, "inst", gen, None, None, {first.member_id: b"A"}
        )
        assert ok.error is E.none
        fail_appends(coord, [True])
        again = await coord.join("g", jreq("", "inst"))
        assert again.error is E.not_coordinator and again.member_id == ""
        g = coord.groups["g"]
        assert g.state is GroupState.STABLE and list(g.members) == [first.member_id]
        assert g.static_members["inst"] == first.member_id
        # the old id still works; a retry (the append now succeeds) replaces it for good
        assert await coord.heartbeat("g", first.member_id, "inst", gen) is E.none
        retry = await coord.join("g", jreq("", "inst"))
        assert retry.error is E.none and retry.member_id != first.member_id
        assert await coord.heartbeat("g", first.member_id, "inst", gen) is E.fenced_instance_id
        n.cancel_scope.cancel()
