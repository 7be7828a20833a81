"""The classic group coordinator against Kafka 4.x (issue 23, points 1-9), under trio's
MockClock where time matters: static members kept at join completion, static leader rejoins,
session timers after a parked SyncGroup, expired pending members, OffsetCommit's check order,
offsets of deleted topics and partitions, offsets retention, refused JoinGroups."""

from __future__ import annotations

import trio
from kio.schema.errors import ErrorCode

from coordinator.group.offsets import CommitRequest
from coordinator.group.runtime import GroupCoordinator
from storage.api import TopicPartition
from tests.coordinator.test_group_runtime import VALUES, join, topics

E = ErrorCode
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
