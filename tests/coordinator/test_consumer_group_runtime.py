"""The consumer group protocol in the group coordinator's runtime, under trio's MockClock: the
session timeout fences a silent member, offsets retention of a consumer group, a failed append
leaves the group as it was, and the records written rebuild the group at load."""

from __future__ import annotations

import itertools
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from coordinator.consumer_group.heartbeat import Heartbeat
from coordinator.consumer_group.model import TopicInfo
from coordinator.group.offsets import CommitRequest
from coordinator.group.runtime import GroupCoordinator
from storage.api import StorageError, TopicPartition
from storage.topics import TopicManager
from tests.coordinator.test_group_runtime import VALUES, topics

E = ErrorCode
__all__ = ["topics"]  # the fixture


def coordinator(tm: TopicManager, **values: Any) -> GroupCoordinator:
    coord = GroupCoordinator(tm, {**VALUES, **values}, lambda: int(trio.current_time() * 1000))
    coord.topic_view = lambda: {
        t.name: TopicInfo(t.name, t.topic_id, len(t.partitions)) for t in tm if not t.internal
    }
    return coord


def join(member: str, topics: tuple[str, ...] = ("t",)) -> Heartbeat:
    return Heartbeat(
        "g", member, 0, rebalance_timeout_ms=1000, subscribed_topic_names=topics, owned=()
    )


async def test_session_timeout_fences_through_the_timer_task(
    topics: TopicManager, autojump_clock: Any
) -> None:
    coord = coordinator(topics, **{"group.consumer.session.timeout.ms": 3000})
    await coord.load()
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        assert (await coord.consumer_heartbeat(join("a"), 1)).member_epoch == 1
        assert (await coord.consumer_heartbeat(join("b"), 1)).member_epoch == 2
        for _ in range(4):  # b keeps heartbeating, a is silent
            await trio.sleep(1)
            r = await coord.consumer_heartbeat(Heartbeat("g", "b", 2, owned=()), 1)
            assert r.error is E.none
        g = coord.consumer_groups["g"]
        assert set(g.members) == {"b"} and g.group_epoch == 3
        n.cancel_scope.cancel()


async def test_offsets_retention_of_a_consumer_group(
    topics: TopicManager, autojump_clock: Any
) -> None:
    await topics.create("u", 1, {})
    coord = coordinator(
        topics,
        **{"offsets.retention.minutes": 1, "offsets.retention.check.interval.ms": 1000},
    )
    await coord.load()
    t0, u0 = TopicPartition("t", 0), TopicPartition("u", 0)

    def offsets() -> dict[TopicPartition, int]:
        return {f.tp: f.offset for f in coord.offsets.fetch("g", None)}

    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        assert (await coord.consumer_heartbeat(join("a"), 1)).member_epoch == 1
        commits = [CommitRequest(t0, 5, -1, None), CommitRequest(u0, 7, -1, None)]
        assert await coord.commit_offsets("g", "a", None, 1, commits) == {t0: E.none, u0: E.none}
        for _ in range(7):  # keep the member alive past the retention of u's offset
            await trio.sleep(10)
            await coord.consumer_heartbeat(Heartbeat("g", "a", 1, owned=None), 1)
        assert offsets() == {t0: 5}  # "u" is not subscribed: expired; "t" is kept
        r = await coord.consumer_heartbeat(Heartbeat("g", "a", -1), 1)
        assert r.error is E.none
        await trio.sleep(70)
        assert offsets() == {} and "g" not in coord.consumer_groups  # Empty, nothing left
        n.cancel_scope.cancel()


async def test_a_failed_append_changes_nothing(topics: TopicManager, autojump_clock: Any) -> None:
    coord = coordinator(topics)
    await coord.load()
    assert (await coord.consumer_heartbeat(join("a"), 1)).member_epoch == 1
    before = (coord.consumer_groups["g"].group_epoch, dict(coord.consumer_groups["g"].members))

    async def broken(group_id: str, records: object) -> int:
        raise StorageError("disk full")

    coord._append = broken  # type: ignore[method-assign]
    r = await coord.consumer_heartbeat(join("b"), 1)
    assert r.error is E.coordinator_not_available
    g = coord.consumer_groups["g"]
    assert (g.group_epoch, dict(g.members)) == before


async def test_load_rebuilds_the_groups(topics: TopicManager, autojump_clock: Any) -> None:
    coord = coordinator(topics)
    await coord.load()
    await coord.consumer_heartbeat(join("a"), 1)
    await coord.consumer_heartbeat(join("b"), 1)
    live = coord.consumer_groups["g"]
    again = coordinator(topics)
    await again.load()
    loaded = again.consumer_groups["g"]
    assert (loaded.group_epoch, loaded.assignment_epoch, loaded.members, loaded.target) == (
        live.group_epoch,
        live.assignment_epoch,
        live.members,
        live.target,
    )
    assert set(loaded.session_deadlines) == {"a", "b"}
    assert "g" not in again.groups


async def test_offset_delete_spares_subscribed_topics(
    topics: TopicManager, autojump_clock: Any
) -> None:
    await topics.create("u", 1, {})
    coord = coordinator(topics)
    await coord.load()
    await coord.consumer_heartbeat(join("a"), 1)
    t0, u0 = TopicPartition("t", 0), TopicPartition("u", 0)
    commits = [CommitRequest(t0, 5, -1, None), CommitRequest(u0, 7, -1, None)]
    await coord.commit_offsets("g", "a", None, 1, commits)
    assert await coord.delete_offsets("g", [t0, u0]) == {
        t0: E.group_subscribed_to_topic,
        u0: E.none,
    }
    assert {f.tp for f in coord.offsets.fetch("g", None)} == {t0}
    assert await coord.delete_group("g") is E.non_empty_group


async def test_a_failed_fencing_write_is_retried_after_a_backoff(
    topics: TopicManager, autojump_clock: Any
) -> None:
    """The timer task does not spin on a failing log: a fencing whose records cannot be
    written is tried again every TIMER_RETRY_BACKOFF_MS, and succeeds once the log heals."""
    from coordinator.group.consumer_api import TIMER_RETRY_BACKOFF_MS

    coord = coordinator(topics, **{"group.consumer.session.timeout.ms": 3000})
    await coord.load()
    append = coord._append
    attempts: list[float] = []

    async def broken(group_id: str, records: object) -> int:
        attempts.append(trio.current_time())
        raise StorageError("disk full")

    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        assert (await coord.consumer_heartbeat(join("a"), 1)).member_epoch == 1
        coord._append = broken  # type: ignore[method-assign]
        await trio.sleep(3 + 5)  # the session runs out at 3 s; 5 s of failing writes follow
        assert "a" in coord.consumer_groups["g"].members  # kept: the fencing is not written
        gaps = [b - a for a, b in itertools.pairwise(attempts)]
        assert 9 <= len(attempts) <= 11
        assert all(gap >= TIMER_RETRY_BACKOFF_MS / 1000 for gap in gaps)
        coord._append = append  # type: ignore[method-assign]
        await trio.sleep(1)
        g = coord.consumer_groups["g"]
        assert g.members == {} and g.retry_at == 0 and g.group_epoch == 2
        n.cancel_scope.cancel()


async def test_regex_resolutions_survive_a_restart(
    topics: TopicManager, autojump_clock: Any
) -> None:
    """ConsumerGroupRegularExpression records (type 16) are written with the heartbeat and
    replayed at load; the last member using a regex leaving tombstones it."""
    coord = coordinator(topics)
    await coord.load()
    hb = Heartbeat("g", "a", 0, rebalance_timeout_ms=1000, subscribed_topic_regex="t|x", owned=())
    assert (await coord.consumer_heartbeat(hb, 1)).member_epoch == 1
    live = coord.consumer_groups["g"].resolved_regexes
    assert live["t|x"].topics == {"t"}
    again = coordinator(topics)
    await again.load()
    assert again.consumer_groups["g"].resolved_regexes == live
    assert (await coord.consumer_heartbeat(Heartbeat("g", "a", -1), 1)).error is E.none
    third = coordinator(topics)
    await third.load()
    assert third.consumer_groups["g"].resolved_regexes == {}
