"""Online migration between classic and consumer groups (coordinator/group/migration.py,
classic_members.py): each conversion and the classic members inside a consumer group, as
decisions under a fake clock (milliseconds passed in)."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest
from kio.schema.errors import ErrorCode

from coordinator.consumer_group import records
from coordinator.consumer_group.consumer_protocol import (
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from coordinator.consumer_group.heartbeat import (
    ConsumerGroupConfig,
    Heartbeat,
    expire,
    heartbeat,
)
from coordinator.consumer_group.model import (
    ConsumerGroup,
    ConsumerGroupState,
    MemberState,
    TopicInfo,
)
from coordinator.consumer_group.offsets import validate_offset_commit
from coordinator.group import classic_members
from coordinator.group.classic import ClassicGroup
from coordinator.group.members import GroupConfig, JoinRequest, Member
from coordinator.group.migration import (
    MigrationPolicy,
    can_upgrade,
    from_classic,
    should_downgrade,
    to_classic,
)
from coordinator.group.state import GroupState

E = ErrorCode
T = uuid.UUID(int=1)
TOPICS = {"t": TopicInfo("t", T, 4)}
NAMES = {T: "t"}
CFG = ConsumerGroupConfig()
P = MigrationPolicy


def protocols(
    owned: dict[str, list[int]] | None = None, version: int = 1
) -> tuple[tuple[str, bytes], ...]:
    return (("range", encode_subscription(["t"], owned, version=version)),)


def classic_join(
    member: str = "", owned: dict[str, list[int]] | None = None, **kw: object
) -> JoinRequest:
    return JoinRequest(
        member_id=member,
        group_instance_id=kw.pop("instance_id", None),  # type: ignore[arg-type]
        client_id="c",
        client_host="/h",
        session_timeout_ms=kw.pop("session_timeout_ms", 10_000),  # type: ignore[arg-type]
        rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", 20_000),  # type: ignore[arg-type]
        protocol_type=kw.pop("protocol_type", "consumer"),  # type: ignore[arg-type]
        protocols=kw.pop("protocols", protocols(owned)),  # type: ignore[arg-type]
        require_known_member_id=kw.pop("require_known_member_id", False),  # type: ignore[arg-type]
    )


def consumer_join(mid: str) -> Heartbeat:
    return Heartbeat(
        "g", mid, 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), owned=()
    )


def stable_classic(generation: int = 3) -> ClassicGroup:
    """A Stable classic group of two eager members, a: t-0,1 and b: t-2,3."""
    g = ClassicGroup("g", GroupConfig(), state=GroupState.STABLE, generation=generation)
    for mid, parts in (("a", [0, 1]), ("b", [2, 3])):
        m = Member(mid, None, "c", "/h", 20_000, 10_000, "consumer", protocols())
        m.assignment = encode_assignment({"t": parts}, 1)
        g.add_member(m, 0)
    g.protocol_name = "range"
    return g


def assigned_names(sync_assignment: bytes) -> dict[str, tuple[int, ...]]:
    return dict(decode_assignment(sync_assignment))


# -- the embedded consumer protocol ------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_round_trip(version: int) -> None:
    data = encode_subscription(["b", "a"], {"a": [1, 0]}, version, 7, "r1")
    sub = decode_subscription(data)
    assert sub.topics == ("a", "b")
    assert sub.owned_partitions == ((("a", (0, 1)),) if version >= 1 else ())
    assert sub.generation_id == (7 if version >= 2 else -1)
    assert sub.rack_id == ("r1" if version >= 3 else None)
    assert decode_subscription(encode_subscription([], None, 0)) == Subscription(())


def test_assignment_capped_at_the_highest_version() -> None:
    data = encode_assignment({"t": [3, 1]}, 9)
    assert data[:2] == b"\x00\x03" and decode_assignment(data) == (("t", (1, 3)),)


# -- upgrade -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "protocol_type", "max_size", "ok"),
    [
        (P.BIDIRECTIONAL, "consumer", 10, True),
        (P.UPGRADE, "consumer", 10, True),
        (P.DOWNGRADE, "consumer", 10, False),
        (P.DISABLED, "consumer", 10, False),
        (P.BIDIRECTIONAL, "connect", 10, False),
        (P.BIDIRECTIONAL, "consumer", 1, False),
    ],
)
def test_can_upgrade(policy: P, protocol_type: str, max_size: int, ok: bool) -> None:
    g = stable_classic()
    g.protocol_type = protocol_type
    assert can_upgrade(g, policy, max_size) is ok


def test_policy_parses_case_insensitively() -> None:
    assert MigrationPolicy.parse("BiDirectional") is P.BIDIRECTIONAL


def test_upgrade_keeps_assignments_then_a_consumer_member_takes_its_share() -> None:
    g = from_classic(stable_classic(3), TOPICS, 100)
    assert g is not None
    assert (g.group_epoch, g.assignment_epoch) == (3, 3)
    a = g.members["a"]
    assert (a.member_epoch, a.state, dict(a.assigned)) == (3, MemberState.STABLE, {T: {0, 1}})
    assert a.classic is not None and a.classic.session_timeout_ms == 10_000
    assert dict(g.target["b"]) == {T: {2, 3}} and g.session_deadlines == {"a": 10_100, "b": 10_100}
    # the upgrading consumer member: a new target, but nothing free until a and b revoke
    r = heartbeat(g, consumer_join("c"), TOPICS, CFG, 200)
    assert r.error is E.none and g.group_epoch == 4
    assert dict(r.assignment or {}) == {}
    # classic members learn it from their Heartbeat and rejoin (eager: owning nothing)
    assert classic_members.heartbeat(g, "a", None, 3, 300) is E.rebalance_in_progress
    assert g.join_deadlines["a"] == 300 + 20_000
    for mid in ("a", "b"):
        j = classic_members.join(g, classic_join(mid), TOPICS, CFG, 400)
        assert (j.error, j.generation, j.protocol_name, j.leader) == (E.none, 4, "range", "")
        s = classic_members.sync(g, mid, None, 4, "consumer", "range", NAMES, 500)
        assert s.error is E.none
    owners: dict[int, str] = {}
    r = heartbeat(g, Heartbeat("g", "c", 4, owned=()), TOPICS, CFG, 600)
    for mid, m in g.members.items():
        for p in m.assigned.get(T, ()):
            assert p not in owners
            owners[p] = mid
    assert sorted(owners) == [0, 1, 2, 3] and set(owners.values()) == {"a", "b", "c"}
    assert g.state is ConsumerGroupState.STABLE


def test_upgrade_of_malformed_metadata_is_refused() -> None:
    c = stable_classic()
    c.members["a"].protocols = (("range", b"\x00"),)
    assert from_classic(c, TOPICS, 0) is None


# -- classic members inside a consumer group ---------------------------------------------------


def mixed() -> ConsumerGroup:
    """A consumer group of the consumer member "c" (t-0..3), then classic "k" joined."""
    g = ConsumerGroup("g")
    heartbeat(g, consumer_join("c"), TOPICS, CFG, 0)
    return g


JOIN_ERRORS = [
    (classic_join("", require_known_member_id=True), E.member_id_required),
    (classic_join("k", protocol_type="connect"), E.inconsistent_group_protocol),
    (classic_join("k", protocols=()), E.inconsistent_group_protocol),
    (classic_join("k", instance_id="i"), E.unknown_member_id),  # a static member's own id
]


@pytest.mark.parametrize(("req", "code"), JOIN_ERRORS)
def test_classic_join_errors(req: JoinRequest, code: ErrorCode) -> None:
    g = mixed()
    before = records.snapshot(g)
    r = classic_members.join(g, req, TOPICS, CFG, 0, make_member_id=lambda: "new")
    assert r.error is code
    if code is E.member_id_required:
        assert r.member_id == "new"
    assert records.changes(before, g) == []


def test_classic_join_refuses_a_protocol_other_classic_members_lack() -> None:
    g = mixed()
    classic_members.join(g, classic_join("k"), TOPICS, CFG, 0)
    other = (("roundrobin", encode_subscription(["t"])),)
    r = classic_members.join(g, classic_join("x", protocols=other), TOPICS, CFG, 0)
    assert r.error is E.inconsistent_group_protocol


def test_classic_join_group_max_size() -> None:
    g = mixed()
    small = ConsumerGroupConfig(max_size=1)
    assert classic_members.join(g, classic_join("k"), TOPICS, small, 0).error is (
        E.group_max_size_reached
    )


def test_classic_member_waits_for_the_consumer_member_to_revoke() -> None:
    g = mixed()
    j = classic_members.join(g, classic_join("k"), TOPICS, CFG, 0)
    assert (j.error, j.generation) == (E.none, 2)
    k = g.members["k"]
    assert k.state is MemberState.UNRELEASED_PARTITIONS and dict(k.assigned) == {}
    assert g.sync_deadlines["k"] == 20_000 and g.session_deadlines["k"] == 10_000
    s = classic_members.sync(g, "k", None, 2, "consumer", "range", NAMES, 10)
    assert s.error is E.none and assigned_names(s.assignment) == {}
    assert "k" not in g.sync_deadlines
    # "c" still owns them: waiting on unreleased partitions, no rejoin asked
    assert classic_members.heartbeat(g, "k", None, 2, 20) is E.none
    r = heartbeat(g, Heartbeat("g", "c", 1, owned=((T, (0, 1, 2, 3)),)), TOPICS, CFG, 30)
    kept = set(r.assignment[T]) if r.assignment else set()
    heartbeat(g, Heartbeat("g", "c", 1, owned=((T, tuple(sorted(kept))),)), TOPICS, CFG, 40)
    # released now: the classic member is told to rejoin, and gets them
    assert classic_members.heartbeat(g, "k", None, 2, 50) is E.rebalance_in_progress
    j = classic_members.join(g, classic_join("k"), TOPICS, CFG, 60)
    s = classic_members.sync(g, "k", None, j.generation, "consumer", "range", NAMES, 70)
    got = set(assigned_names(s.assignment)["t"])
    assert got and not got & kept and got | kept == {0, 1, 2, 3}


SYNC_ERRORS = [
    ("k", None, 9, "consumer", "range", E.illegal_generation),
    ("k", None, 2, "connect", "range", E.inconsistent_group_protocol),
    ("k", None, 2, "consumer", "roundrobin", E.inconsistent_group_protocol),
    ("c", None, 1, "consumer", "range", E.unknown_member_id),  # uses the consumer protocol
    ("zz", None, 2, "consumer", "range", E.unknown_member_id),
    ("zz", "i", 2, "consumer", "range", E.unknown_member_id),
]


@pytest.mark.parametrize(("mid", "iid", "gen", "ptype", "pname", "code"), SYNC_ERRORS)
def test_classic_sync_errors(
    mid: str, iid: str | None, gen: int, ptype: str, pname: str, code: ErrorCode
) -> None:
    g = mixed()
    classic_members.join(g, classic_join("k"), TOPICS, CFG, 0)
    assert classic_members.sync(g, mid, iid, gen, ptype, pname, NAMES, 1).error is code


def test_static_classic_member_fenced_instance_and_rebalance_in_progress() -> None:
    g = mixed()
    classic_members.join(g, classic_join("", instance_id="i"), TOPICS, CFG, 0, lambda: "k")
    assert classic_members.heartbeat(g, "other", "i", 2, 1) is E.fenced_instance_id
    assert classic_members.heartbeat(g, "k", None, 1, 1) is E.illegal_generation
    heartbeat(g, consumer_join("d"), TOPICS, CFG, 2)  # bumps the group epoch
    assert classic_members.sync(g, "k", "i", 2, None, None, NAMES, 3).error is (
        E.rebalance_in_progress
    )
    assert "k" in g.join_deadlines


def test_classic_leave() -> None:
    g = mixed()
    classic_members.join(g, classic_join("", instance_id="i"), TOPICS, CFG, 0, lambda: "k")
    epoch = g.group_epoch
    out = classic_members.leave(g, [("zz", None), ("", "i"), ("x", "i")], TOPICS)
    # the member id echoed as asked ("" for an admin's removal by instance id)
    assert out == [("zz", E.unknown_member_id), ("", E.none), ("x", E.fenced_instance_id)]
    assert set(g.members) == {"c"} and g.group_epoch == epoch + 1


def test_classic_leave_removes_a_consumer_protocol_member() -> None:
    """Kafka's classicGroupLeaveToConsumerGroup removes any member, whichever protocol it uses
    (the admin's removeMembersFromConsumerGroup sends LeaveGroup by instance id); the same
    member named twice is removed once, both answered NONE."""
    g = ConsumerGroup("g")
    heartbeat(g, replace(consumer_join("c"), instance_id="ic"), TOPICS, CFG, 0)
    heartbeat(g, consumer_join("d"), TOPICS, CFG, 0)
    epoch = g.group_epoch
    out = classic_members.leave(g, [("", "ic"), ("c", "ic"), ("d", None)], TOPICS)
    assert out == [("", E.none), ("c", E.none), ("d", E.none)]
    assert not g.members and g.group_epoch == epoch + 1


@pytest.mark.parametrize("timer", ["session", "sync", "join"])
def test_classic_timers_fence(timer: str) -> None:
    g = mixed()
    classic_members.join(g, classic_join("k", session_timeout_ms=50_000), TOPICS, CFG, 0)
    if timer != "sync":
        classic_members.sync(g, "k", None, 2, None, None, NAMES, 0)
    if timer == "join":
        heartbeat(g, consumer_join("d"), TOPICS, CFG, 0)
        assert classic_members.heartbeat(g, "k", None, 2, 1000) is E.rebalance_in_progress
        at = 21_000
    else:
        at = 50_000 if timer == "session" else 20_000
    heartbeat(g, Heartbeat("g", "c", g.members["c"].member_epoch, owned=None), TOPICS, CFG, at - 1)
    assert expire(g, TOPICS, at - 1) == []
    assert expire(g, TOPICS, at) == ["k"]


def test_classic_member_commits_with_its_generation() -> None:
    g = mixed()
    classic_members.join(g, classic_join("k"), TOPICS, CFG, 0)
    assert validate_offset_commit(g, "k", 2, False, 2) is E.none  # below v9 is fine
    assert validate_offset_commit(g, "k", 1, False, 8) is E.illegal_generation
    assert validate_offset_commit(g, "c", 0, False, 9) is E.stale_member_epoch


def test_classic_member_metadata_is_stored_and_replayed() -> None:
    g = mixed()
    classic_members.join(g, classic_join("", instance_id="i"), TOPICS, CFG, 0, lambda: "k")
    replayed = records.replay_all(records.changes(None, g))["g"]
    assert replayed.members == g.members
    assert replayed.members["k"].classic == g.members["k"].classic
    assert replayed.members["c"].classic is None


# -- downgrade ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "leaving", "max_size", "ok"),
    [
        (P.BIDIRECTIONAL, "c", 10, True),
        (P.DOWNGRADE, "c", 10, True),
        (P.UPGRADE, "c", 10, False),
        (P.DISABLED, "c", 10, False),
        (P.BIDIRECTIONAL, "k", 10, False),  # a classic member leaving
        (P.BIDIRECTIONAL, "c", 0, False),  # over group.max.size
    ],
)
def test_should_downgrade(policy: P, leaving: str, max_size: int, ok: bool) -> None:
    g = mixed()
    classic_members.join(g, classic_join("k"), TOPICS, CFG, 0)
    assert should_downgrade(g, {leaving}, policy, max_size) is ok


def test_a_lone_consumer_member_leaving_is_no_downgrade() -> None:
    assert not should_downgrade(mixed(), {"c"}, P.BIDIRECTIONAL, 10)


def test_should_downgrade_as_kafkas_fenced_members_check() -> None:
    """Kafka 4.2's validateOnlineDowngradeWithFencedMembers: what matters is that the members
    left all use the classic protocol, whichever protocol the leaving ones use."""
    g = mixed()
    heartbeat(g, consumer_join("d"), TOPICS, CFG, 0)
    classic_members.join(g, classic_join("k"), TOPICS, CFG, 0)
    assert not should_downgrade(g, {"c"}, P.BIDIRECTIONAL, 10)  # "d" stays
    assert should_downgrade(g, {"c", "d"}, P.BIDIRECTIONAL, 10)  # one LeaveGroup, both
    assert not should_downgrade(g, {"c", "d", "k"}, P.BIDIRECTIONAL, 10)  # none stays
    # a consumer group left with classic members only (its downgrade refused then, say over
    # group.max.size) downgrades when one of them leaves
    classic_members.join(g, classic_join("l"), TOPICS, CFG, 0)
    assert not should_downgrade(g, {"c", "d"}, P.BIDIRECTIONAL, 1)
    classic_members.leave(g, [("c", None), ("d", None)], TOPICS)
    assert should_downgrade(g, {"k"}, P.BIDIRECTIONAL, 1)


def test_downgrade_builds_a_stable_classic_group_with_the_target_assignments() -> None:
    g = mixed()
    classic_members.join(g, classic_join("k"), TOPICS, CFG, 0)
    heartbeat(g, Heartbeat("g", "c", 1, owned=((T, (0, 1, 2, 3)),)), TOPICS, CFG, 1)
    c = to_classic(g, {"c"}, NAMES, GroupConfig(), 5)
    assert c is not None
    assert (c.state, c.generation, c.protocol_type, c.protocol_name) == (
        GroupState.STABLE,
        g.group_epoch,
        "consumer",
        "range",
    )
    assert list(c.members) == ["k"] and c.leader_id == "k"
    assert assigned_names(c.members["k"].assignment) == {"t": tuple(sorted(g.target["k"][T]))}
    c.prepare_rebalance(6)
    assert c.state is GroupState.PREPARING_REBALANCE


def test_a_consumer_member_takes_over_a_classic_static_members_instance() -> None:
    """A rolling upgrade of a static member: its consumer-protocol instance replaces its
    classic one at once (no UNRELEASED_INSTANCE_ID), keeping its partitions."""
    g = ConsumerGroup("g")
    classic_members.join(g, classic_join("", instance_id="i"), TOPICS, CFG, 0, lambda: "k")
    k = g.members["k"]
    r = heartbeat(
        g,
        Heartbeat(
            "g",
            "n",
            0,
            instance_id="i",
            rebalance_timeout_ms=1000,
            subscribed_topic_names=("t",),
            owned=(),
        ),
        TOPICS,
        CFG,
        1,
    )
    assert r.error is E.none and set(g.members) == {"n"}
    assert g.members["n"].classic is None and dict(r.assignment or {}) == dict(k.assigned)


def test_classic_member_metadata_is_a_nullable_tagged_struct_as_kafka_writes_it() -> None:
    """ConsumerGroupMemberMetadataValue's tagged field 0 is a nullable struct: Kafka's
    generated code writes its size + 1, then a presence varint (1), then the struct (and
    reads a null when that varint is 0), so a record is readable by Kafka's tools."""
    from coordinator.consumer_group.model import ClassicMemberMetadata, ConsumerGroupMember

    classic = ClassicMemberMetadata(45000, (("range", b"\x00\x01"),))
    m = ConsumerGroupMember("m", classic=classic)
    struct = (
        (45000).to_bytes(4, "big")
        + b"\x02"  # one protocol (compact array)
        + b"\x06range"
        + b"\x03\x00\x01"  # compact bytes
        + b"\x00"  # the protocol's tagged fields
        + b"\x00"  # the struct's tagged fields
    )
    tagged = b"\x01" + b"\x00" + bytes([len(struct) + 1]) + b"\x01" + struct
    value = records.member_value(m)
    assert value.endswith(tagged)
    assert value[: -len(tagged)] + b"\x00" == records.member_value(ConsumerGroupMember("m"))
    replayed = records.replay_all([(records.key(records.MEMBER, "g", "m"), value)])
    assert replayed["g"].members["m"].classic == classic
