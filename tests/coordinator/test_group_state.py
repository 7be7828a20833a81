"""The classic group state machine as tables: (state, event) -> (state, response), with a fake
clock (every call takes ``now_ms``; nothing here reads a clock)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kio.schema.errors import ErrorCode

from coordinator.group.classic import (
    ClassicGroup,
    GroupConfig,
    JoinRequest,
    JoinResult,
    SyncResult,
)
from coordinator.group.group_record import group_from_value, group_value
from coordinator.group.state import VALID_PREVIOUS, Act, GroupState

S, E = GroupState, ErrorCode
CFG = GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=100)
PROTOS = (("range", b"r"), ("roundrobin", b"rr"))


def req(member_id: str = "", instance: str | None = None, protos=PROTOS, v4: bool = False):
    return JoinRequest(member_id, instance, "cli", "/127.0.0.1", 1000, 5000, "consumer", protos, v4)


def stable(n: int = 2, now: int = 0) -> tuple[ClassicGroup, list[str]]:
    """A STABLE group of ``n`` dynamic members (the first is the leader)."""
    g = ClassicGroup("g", CFG)
    ids = []
    for _ in range(n):
        out = g.join(req(), now)
        assert isinstance(out, tuple)
        ids.append(out[1])
    # the first join completed the phase alone; the others started a new one
    for mid in ids:
        if not g.members[mid].awaiting_join:
            g.join(req(mid), now)
    assert g.state is S.COMPLETING_REBALANCE
    for mid in ids:
        out2 = g.sync(mid, None, g.generation, None, None, now)
        if out2 is Act.PERSIST_ASSIGNMENT:
            g.complete_assignment(g.generation, {m: m.encode() for m in ids}, now)
    g.outbox.clear()
    assert g.state is S.STABLE
    return g, ids


def preparing() -> tuple[ClassicGroup, list[str]]:
    g, ids = stable()
    g.join(req(ids[0]), 0)  # the leader rejoins: rebalance, waiting for the follower
    assert g.state is S.PREPARING_REBALANCE
    return g, ids


def completing() -> tuple[ClassicGroup, list[str]]:
    g, ids = preparing()
    g.join(req(ids[1]), 0)
    assert g.state is S.COMPLETING_REBALANCE
    g.outbox.clear()
    return g, ids


def empty() -> tuple[ClassicGroup, list[str]]:
    g, ids = stable()
    for mid in ids:
        g.leave(mid, None, 0)
    assert g.state is S.EMPTY
    return g, ids


def dead() -> tuple[ClassicGroup, list[str]]:
    g, ids = empty()
    g.transition(S.DEAD, 0)
    return g, ids


MAKE: dict[GroupState, Callable[[], tuple[ClassicGroup, list[str]]]] = {
    S.EMPTY: empty,
    S.PREPARING_REBALANCE: preparing,
    S.COMPLETING_REBALANCE: completing,
    S.STABLE: stable,
    S.DEAD: dead,
}


def hb(g: ClassicGroup, ids: list[str]) -> object:
    return g.heartbeat(ids[1], None, g.generation, 1)


def sync_follower(g: ClassicGroup, ids: list[str]) -> object:
    out = g.sync(ids[1], None, g.generation, None, None, 1)
    return out.error if isinstance(out, SyncResult) else out


def sync_leader(g: ClassicGroup, ids: list[str]) -> object:
    out = g.sync(ids[0], None, g.generation, None, None, 1)
    return out.error if isinstance(out, SyncResult) else out


def rejoin_follower(g: ClassicGroup, ids: list[str]) -> object:
    out = g.join(req(ids[1]), 1)
    return out.error if isinstance(out, JoinResult) else out[0]


def rejoin_changed(g: ClassicGroup, ids: list[str]) -> object:
    out = g.join(req(ids[1], protos=(("range", b"changed"),)), 1)
    return out.error if isinstance(out, JoinResult) else out[0]


def leave_follower(g: ClassicGroup, ids: list[str]) -> object:
    return g.leave(ids[1], None, 1)


def new_member(g: ClassicGroup, ids: list[str]) -> object:
    out = g.join(req(), 1)
    return out.error if isinstance(out, JoinResult) else out[0]


def stale_generation_hb(g: ClassicGroup, ids: list[str]) -> object:
    return g.heartbeat(ids[0], None, g.generation - 1, 1)


# (state, event) -> (state after, response)
TABLE = [
    (S.STABLE, hb, S.STABLE, E.none),
    (S.COMPLETING_REBALANCE, hb, S.COMPLETING_REBALANCE, E.none),
    (S.PREPARING_REBALANCE, hb, S.PREPARING_REBALANCE, E.rebalance_in_progress),
    (S.EMPTY, hb, S.EMPTY, E.unknown_member_id),
    (S.DEAD, hb, S.DEAD, E.coordinator_not_available),
    (S.STABLE, stale_generation_hb, S.STABLE, E.illegal_generation),
    (S.STABLE, sync_follower, S.STABLE, E.none),
    (S.COMPLETING_REBALANCE, sync_follower, S.COMPLETING_REBALANCE, Act.AWAIT_SYNC),
    (S.COMPLETING_REBALANCE, sync_leader, S.COMPLETING_REBALANCE, Act.PERSIST_ASSIGNMENT),
    (S.PREPARING_REBALANCE, sync_follower, S.PREPARING_REBALANCE, E.rebalance_in_progress),
    (S.EMPTY, sync_follower, S.EMPTY, E.unknown_member_id),
    (S.STABLE, rejoin_follower, S.STABLE, E.none),
    (S.STABLE, rejoin_changed, S.PREPARING_REBALANCE, Act.AWAIT_JOIN),
    (S.COMPLETING_REBALANCE, rejoin_follower, S.COMPLETING_REBALANCE, E.none),
    (S.COMPLETING_REBALANCE, rejoin_changed, S.PREPARING_REBALANCE, Act.AWAIT_JOIN),
    # the follower was the one member not yet rejoined: the join phase completes
    (S.PREPARING_REBALANCE, rejoin_follower, S.COMPLETING_REBALANCE, Act.AWAIT_JOIN),
    (S.EMPTY, rejoin_follower, S.EMPTY, E.unknown_member_id),
    (S.STABLE, leave_follower, S.PREPARING_REBALANCE, E.none),
    (S.COMPLETING_REBALANCE, leave_follower, S.PREPARING_REBALANCE, E.none),
    (S.PREPARING_REBALANCE, leave_follower, S.COMPLETING_REBALANCE, E.none),
    (S.EMPTY, leave_follower, S.EMPTY, E.unknown_member_id),
    (S.DEAD, leave_follower, S.DEAD, E.coordinator_not_available),
    (S.STABLE, new_member, S.PREPARING_REBALANCE, Act.AWAIT_JOIN),
    (S.EMPTY, new_member, S.COMPLETING_REBALANCE, Act.AWAIT_JOIN),
    (S.DEAD, new_member, S.DEAD, E.coordinator_not_available),
]


@pytest.mark.parametrize(
    ("state", "event", "after", "response"),
    TABLE,
    ids=[f"{s.name}-{ev.__name__}" for s, ev, _, _ in TABLE],
)
def test_transition_table(state, event, after, response) -> None:
    g, ids = MAKE[state]()
    assert g.state is state
    assert event(g, ids) == response
    assert g.state is after


def test_every_transition_taken_is_legal() -> None:
    for target, sources in VALID_PREVIOUS.items():
        assert sources, target
    g = ClassicGroup("g", CFG)
    with pytest.raises(AssertionError):
        g.transition(S.STABLE, 0)  # Empty -> Stable is not an edge


def test_member_id_required_then_join() -> None:
    g = ClassicGroup("g", CFG)
    out = g.join(req(v4=True), 0)
    assert isinstance(out, JoinResult) and out.error is E.member_id_required
    assert g.state is S.EMPTY and out.member_id in g.pending_members
    out2 = g.join(req(out.member_id, v4=True), 0)
    assert out2 == (Act.AWAIT_JOIN, out.member_id)
    assert g.state is S.COMPLETING_REBALANCE
    ((mid, res),) = g.outbox
    assert isinstance(res, JoinResult) and res.leader == mid == out.member_id
    assert res.generation == 1 and res.protocol_name == "range"


def test_pending_member_expires_after_session_timeout() -> None:
    g = ClassicGroup("g", CFG)
    out = g.join(req(v4=True), 0)
    assert isinstance(out, JoinResult)
    assert g.next_deadline() == 1000
    g.expire(1000)
    assert not g.pending_members
    assert g.join(req(out.member_id), 1001) == JoinResult(E.unknown_member_id, out.member_id)


def test_inconsistent_protocol() -> None:
    g, _ids = stable()
    out = g.join(req(protos=(("sticky", b""),)), 1)
    assert isinstance(out, JoinResult) and out.error is E.inconsistent_group_protocol
    other_type = JoinRequest("", None, "c", "", 1000, 5000, "connect", PROTOS, False)
    out = g.join(other_type, 1)
    assert isinstance(out, JoinResult) and out.error is E.inconsistent_group_protocol


def test_protocol_vote() -> None:
    g = ClassicGroup("g", CFG)
    g.join(req(protos=(("roundrobin", b""), ("range", b""))), 0)
    g.join(req(protos=(("range", b""), ("roundrobin", b""))), 0)
    g.join(req(protos=(("roundrobin", b""), ("range", b""))), 0)
    assert g.select_protocol() == "roundrobin"


def test_session_expiry_removes_member_and_rebalances() -> None:
    g, ids = stable(now=0)
    g.heartbeat(ids[0], None, g.generation, 900)
    assert g.next_deadline() == 1000  # the follower's session
    assert g.expire(1000) == [ids[1]]
    assert g.state is S.PREPARING_REBALANCE
    # the leader was not awaiting a join: its rejoin completes the phase
    out = g.join(req(ids[0]), 1001)
    assert out == (Act.AWAIT_JOIN, ids[0])
    assert g.state is S.COMPLETING_REBALANCE and list(g.members) == [ids[0]]


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    g, ids = preparing()
    assert g.join_deadline == 5000
    g.heartbeat(ids[1], None, g.generation, 4000)  # alive, but never rejoins
    g.expire(5000)
    assert g.state is S.COMPLETING_REBALANCE and list(g.members) == [ids[0]]
    assert (ids[1], JoinResult(E.unknown_member_id, ids[1])) not in g.outbox


def test_sync_timeout_removes_members_that_never_sync() -> None:
    g, ids = completing()
    assert g.sync_deadline == 5000
    g.heartbeat(ids[0], None, g.generation, 4000)
    g.heartbeat(ids[1], None, g.generation, 4000)
    g.expire(5000)
    assert not g.members and g.state is S.EMPTY  # both removed: the next phase ends empty


def test_initial_rebalance_delay_extends_while_members_arrive() -> None:
    g = ClassicGroup("g", GroupConfig(initial_rebalance_delay_ms=300, min_session_timeout_ms=100))
    g.join(req(), 0)
    assert g.state is S.PREPARING_REBALANCE and g.initial_delay_deadline == 300
    g.join(req(), 100)
    g.expire(300)  # a member arrived during the delay: wait once more
    assert g.state is S.PREPARING_REBALANCE and g.initial_delay_deadline == 600
    g.expire(600)
    assert g.state is S.COMPLETING_REBALANCE and len(g.members) == 2


def test_static_member_rejoins_without_rebalance_and_fences_the_old_id() -> None:
    g = ClassicGroup("g", CFG)
    out = g.join(req(instance="i1"), 0)
    assert isinstance(out, tuple)
    old = out[1]
    g.sync(old, "i1", g.generation, None, None, 0)
    g.complete_assignment(g.generation, {old: b"A"}, 0)
    gen = g.generation
    again = g.join(req(instance="i1"), 10)
    assert isinstance(again, JoinResult) and again.error is E.none
    assert g.state is S.STABLE and g.generation == gen and again.member_id != old
    assert g.persist_requested
    assert g.heartbeat(old, "i1", gen, 11) is E.fenced_instance_id
    res = g.sync(again.member_id, "i1", gen, None, None, 11)
    assert isinstance(res, SyncResult) and res.assignment == b"A"


def test_leave_by_instance_id() -> None:
    g = ClassicGroup("g", CFG)
    out = g.join(req(instance="i1"), 0)
    assert isinstance(out, tuple)
    assert g.leave("", "other", 1) is E.unknown_member_id
    assert g.leave("wrong-id", "i1", 1) is E.fenced_instance_id
    assert g.leave("", "i1", 1) is E.none
    assert g.state is S.EMPTY and not g.static_members


def test_value_round_trip() -> None:
    g, _ids = stable()
    v = group_value(g, 123)
    back = group_from_value("g", v, CFG, 0)
    assert back.state is S.STABLE and back.generation == g.generation
    assert back.leader_id == g.leader_id and group_value(back, 123) == v
