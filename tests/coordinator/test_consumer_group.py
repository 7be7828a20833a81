"""The KIP-848 consumer group decisions (coordinator/consumer_group/), under a fake clock."""

from __future__ import annotations

import random
import uuid
from dataclasses import replace

import pytest
from kio.schema.errors import ErrorCode

from coordinator.consumer_group.assignors import range_assignor, uniform
from coordinator.consumer_group.heartbeat import (
    ConsumerGroupConfig,
    Heartbeat,
    expire,
    heartbeat,
    leave,
    refresh_metadata,
    validate_request,
)
from coordinator.consumer_group.model import (
    Assignment,
    ConsumerGroup,
    ConsumerGroupState,
    MemberState,
    TopicInfo,
)
from coordinator.consumer_group.offsets import validate_offset_commit, validate_offset_fetch

E = ErrorCode
T = uuid.UUID(int=1)
U = uuid.UUID(int=2)
TOPICS = {"t": TopicInfo("t", T, 6)}
CFG = ConsumerGroupConfig()


def owned(a: Assignment | None) -> tuple[tuple[uuid.UUID, tuple[int, ...]], ...]:
    return tuple((t, tuple(sorted(ps))) for t, ps in (a or {}).items())


def join(mid: str, topics: tuple[str, ...] = ("t",), **kw: object) -> Heartbeat:
    return Heartbeat(
        "g",
        mid,
        0,
        rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", 30000),  # type: ignore[arg-type]
        subscribed_topic_names=topics,
        owned=(),
        **kw,  # type: ignore[arg-type]
    )


def beat(mid: str, epoch: int, have: Assignment | None, **kw: object) -> Heartbeat:
    return Heartbeat("g", mid, epoch, owned=owned(have), **kw)  # type: ignore[arg-type]


# -- request validation ------------------------------------------------------------------------

INVALID = [
    (
        Heartbeat("g", "", 0, rebalance_timeout_ms=1, subscribed_topic_names=(), owned=()),
        1,
        E.invalid_request,
        "MemberId can't be empty.",
    ),
    (Heartbeat("g", "", 3), 0, E.invalid_request, "MemberId can't be empty."),
    (Heartbeat(" ", "m", 3), 1, E.invalid_request, "GroupId can't be empty."),
    (Heartbeat("g", "m", 3, instance_id=""), 1, E.invalid_request, "InstanceId can't be empty."),
    (Heartbeat("g", "m", 3, rack_id=""), 1, E.invalid_request, "RackId can't be empty."),
    (
        Heartbeat("g", "m", 0, owned=()),
        1,
        E.invalid_request,
        "RebalanceTimeoutMs must be provided in first request.",
    ),
    (
        Heartbeat("g", "m", 0, rebalance_timeout_ms=1),
        1,
        E.invalid_request,
        "TopicPartitions must be empty when (re-)joining.",
    ),
    (
        Heartbeat("g", "m", 0, rebalance_timeout_ms=1, owned=()),
        1,
        E.invalid_request,
        "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
    ),
    (Heartbeat("g", "m", -2), 1, E.invalid_request, "InstanceId can't be null."),
    (Heartbeat("g", "m", -3), 1, E.invalid_request, "MemberEpoch is invalid."),
    (
        Heartbeat("g", "m", 1, server_assignor="sticky"),
        1,
        E.unsupported_assignor,
        "ServerAssignor sticky is not supported. Supported assignors: uniform, range.",
    ),
]


@pytest.mark.parametrize(("hb", "version", "code", "message"), INVALID)
def test_invalid_requests(hb: Heartbeat, version: int, code: ErrorCode, message: str) -> None:
    result = validate_request(hb, version, CFG)
    assert result is not None and (result.error, result.message) == (code, message)


def test_v0_join_may_leave_the_member_id_to_the_coordinator() -> None:
    hb = join("")
    assert validate_request(hb, 0, CFG) is None
    g = ConsumerGroup("g")
    r = heartbeat(g, hb, TOPICS, CFG, 0, make_member_id=lambda: "gen")
    assert (r.member_id, r.member_epoch) == ("gen", 1)


# -- joining, incremental reassignment ---------------------------------------------------------


def test_first_member_gets_every_partition() -> None:
    g = ConsumerGroup("g")
    r = heartbeat(g, join("a"), TOPICS, CFG, 0)
    assert r.error is E.none and r.member_epoch == 1 and r.heartbeat_interval_ms == 5000
    assert r.assignment == {T: frozenset(range(6))}
    assert g.state is ConsumerGroupState.STABLE


def test_second_member_waits_for_revocation() -> None:
    g = ConsumerGroup("g")
    a = heartbeat(g, join("a"), TOPICS, CFG, 0).assignment
    b = heartbeat(g, join("b"), TOPICS, CFG, 10)
    # b is at the new epoch but its partitions are still a's: nothing yet
    assert (b.member_epoch, b.assignment) == (2, {})
    assert g.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    assert g.state is ConsumerGroupState.RECONCILING
    ra = heartbeat(g, beat("a", 1, a), TOPICS, CFG, 20)
    keep = g.target["a"][T]
    assert ra.member_epoch == 1 and ra.assignment == {T: keep}  # revoke the rest first
    assert g.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    # b still gets nothing while a owns them
    assert heartbeat(g, beat("b", 2, {}), TOPICS, CFG, 30).assignment is None
    ra = heartbeat(g, beat("a", 1, {T: keep}), TOPICS, CFG, 40)
    assert ra.member_epoch == 2 and ra.assignment is None
    rb = heartbeat(g, beat("b", 2, {}), TOPICS, CFG, 50)
    assert rb.assignment == {T: frozenset(range(6)) - keep}
    assert len(keep) == 3 and g.state is ConsumerGroupState.STABLE


def test_lost_response_previous_epoch_with_a_subset_is_accepted() -> None:
    g = ConsumerGroup("g")
    heartbeat(g, join("a"), TOPICS, CFG, 0)
    heartbeat(g, join("b"), TOPICS, CFG, 0)
    heartbeat(g, beat("a", 1, {T: frozenset(range(6))}), TOPICS, CFG, 0)
    heartbeat(g, beat("a", 1, g.members["a"].assigned), TOPICS, CFG, 0)
    assert g.members["a"].member_epoch == 2
    # a heartbeat at epoch 1 owning a subset: accepted (the epoch-2 answer was lost)
    r = heartbeat(g, beat("a", 1, g.members["a"].assigned), TOPICS, CFG, 0)
    assert r.error is E.none and r.member_epoch == 2
    # at epoch 1 owning more than its assignment: fenced
    r = heartbeat(g, beat("a", 1, {T: frozenset(range(6))}), TOPICS, CFG, 0)
    assert r.error is E.fenced_member_epoch
    assert heartbeat(g, beat("a", 3, {}), TOPICS, CFG, 0).error is E.fenced_member_epoch


def test_unknown_member() -> None:
    g = ConsumerGroup("g")
    heartbeat(g, join("a"), TOPICS, CFG, 0)
    r = heartbeat(g, beat("zz", 1, {}), TOPICS, CFG, 0)
    assert (r.error, r.message) == (E.unknown_member_id, "Member zz is not a member of group g.")
    assert leave(g, Heartbeat("g", "zz", -1), TOPICS).error is E.unknown_member_id


def test_no_partition_is_owned_twice_under_random_heartbeats() -> None:
    """Members join, heartbeat (reporting what they own, sometimes revoking late) and leave in
    random order; at every step no partition is owned by two members' clients."""
    topics = {"t": TopicInfo("t", T, 7), "u": TopicInfo("u", U, 5)}
    for seed in range(15):
        rng = random.Random(seed)
        g = ConsumerGroup("g")
        clients: dict[str, tuple[int, Assignment]] = {}  # what each client believes it owns
        for step in range(200):
            now = step * 100
            alive = sorted(clients)
            choice = rng.random()
            if choice < 0.15 and len(clients) < 5:
                mid = f"m{step}"
                subscription = rng.choice([("t", "u"), ("t", "u"), ("t",), ("u",)])
                r = heartbeat(g, join(mid, subscription), topics, CFG, now)
                assert r.error is E.none
                clients[mid] = (r.member_epoch, r.assignment or {})
            elif choice < 0.22 and alive:
                mid = rng.choice(alive)
                assert leave(g, Heartbeat("g", mid, -1), topics).error is E.none
                del clients[mid]
            elif alive:
                mid = rng.choice(alive)
                epoch, have = clients[mid]
                r = heartbeat(g, beat(mid, epoch, have), topics, CFG, now)
                assert r.error is E.none, r
                if r.assignment is not None:
                    # the client adopts it: revokes at once, adds what it was given
                    have = r.assignment
                clients[mid] = (r.member_epoch, have)
            seen: set[tuple[uuid.UUID, int]] = set()
            for _, (_, have) in clients.items():
                for t, ps in have.items():
                    for p in ps:
                        assert (t, p) not in seen, (seed, step)
                        seen.add((t, p))
        # with everyone heartbeating, the group converges
        for _ in range(4):
            for mid in sorted(clients):
                epoch, have = clients[mid]
                r = heartbeat(g, beat(mid, epoch, have), topics, CFG, 10**6)
                clients[mid] = (r.member_epoch, r.assignment if r.assignment is not None else have)
        if clients:
            assert g.state is ConsumerGroupState.STABLE
            total = sum(len(ps) for _, have in clients.values() for ps in have.values())
            wanted = {t for m in g.members.values() for t in m.subscribed_topic_names}
            assert total == sum(topics[t].partitions for t in wanted)


# -- leaving, timeouts -------------------------------------------------------------------------


def test_leave_bumps_the_group_epoch_and_frees_partitions() -> None:
    g = ConsumerGroup("g")
    heartbeat(g, join("a"), TOPICS, CFG, 0)
    heartbeat(g, join("b"), TOPICS, CFG, 0)
    r = leave(g, Heartbeat("g", "a", -1), TOPICS)
    assert (r.error, r.member_id, r.member_epoch) == (E.none, "a", -1)
    assert g.group_epoch == 3 and g.state is ConsumerGroupState.ASSIGNING
    rb = heartbeat(g, beat("b", 2, {}), TOPICS, CFG, 0)
    assert rb.member_epoch == 3 and rb.assignment == {T: frozenset(range(6))}


def test_session_timeout_fences_a_silent_member() -> None:
    g = ConsumerGroup("g")
    heartbeat(g, join("a"), TOPICS, CFG, 0)
    heartbeat(g, join("b"), TOPICS, CFG, 40_000)
    assert g.next_deadline() == 45_000
    assert expire(g, TOPICS, 44_999) == []
    assert expire(g, TOPICS, 45_000) == ["a"]
    assert set(g.members) == {"b"}


def test_rebalance_timeout_fences_a_slow_revoker() -> None:
    g = ConsumerGroup("g")
    a = heartbeat(g, join("a", rebalance_timeout_ms=1000), TOPICS, CFG, 0).assignment
    heartbeat(g, join("b"), TOPICS, CFG, 0)
    heartbeat(g, beat("a", 1, a), TOPICS, CFG, 100)  # asked to revoke
    assert g.rebalance_deadlines["a"] == (1, 1100)
    heartbeat(g, beat("a", 1, a), TOPICS, CFG, 600)  # still owns them
    assert expire(g, TOPICS, 1100) == ["a"]
    rb = heartbeat(g, beat("b", 2, {}), TOPICS, CFG, 1200)
    assert rb.assignment == {T: frozenset(range(6))}


@pytest.mark.parametrize("static_leave", [False, True])
def test_session_and_rebalance_timeouts_due_together_fence_once(static_leave: bool) -> None:
    """Kafka's two timers of a member (session, rebalance) both fence through
    consumerGroupFenceMember, and each cancels the other: whichever fires first, the member is
    fenced once and the group epoch bumped once. A rebalance timer whose member left its epoch
    (a static leave, epoch -2) does nothing; the session timer still fences it."""
    g = ConsumerGroup("g")
    iid = "i" if static_leave else None
    a = heartbeat(g, join("a", rebalance_timeout_ms=45_000, instance_id=iid), TOPICS, CFG, 0)
    heartbeat(g, join("b"), TOPICS, CFG, 0)
    heartbeat(g, beat("a", 1, a.assignment, instance_id=iid), TOPICS, CFG, 100)  # to revoke
    assert g.rebalance_deadlines["a"] == (1, 45_100) and g.session_deadlines["a"] == 45_100
    if static_leave:
        assert leave(g, Heartbeat("g", "a", -2, instance_id="i"), TOPICS).error is E.none
    heartbeat(g, beat("b", 2, {}), TOPICS, CFG, 45_000)  # b keeps its session
    epoch = g.group_epoch
    assert expire(g, TOPICS, 45_100) == ["a"]
    assert set(g.members) == {"b"} and g.group_epoch == epoch + 1
    assert "a" not in g.rebalance_deadlines and "a" not in g.session_deadlines
    assert expire(g, TOPICS, 200_000) == ["b"]


# -- static membership -------------------------------------------------------------------------


def test_static_member_leaves_and_comes_back_with_its_partitions() -> None:
    g = ConsumerGroup("g")
    heartbeat(g, join("a", instance_id="i"), TOPICS, CFG, 0)
    heartbeat(g, join("b"), TOPICS, CFG, 0)
    a = g.members["a"]
    heartbeat(g, beat("a", 1, a.assigned, instance_id="i"), TOPICS, CFG, 0)
    heartbeat(g, beat("a", 1, g.members["a"].assigned, instance_id="i"), TOPICS, CFG, 0)
    kept = g.members["a"].assigned
    epoch = g.group_epoch
    # another process with the same instance id while a is there: refused
    r = heartbeat(g, join("c", instance_id="i"), TOPICS, CFG, 0)
    assert r.error is E.unreleased_instance_id
    assert r.message == (
        "Static member c with instance id i cannot join the group because the instance id is "
        "owned by a member."
    )
    r = leave(g, Heartbeat("g", "a", -2, instance_id="i"), TOPICS)
    assert (r.error, r.member_epoch) == (E.none, -2)
    assert g.group_epoch == epoch  # no rebalance
    r = heartbeat(g, join("c", instance_id="i"), TOPICS, CFG, 0)
    assert r.error is E.none and r.assignment == kept and set(g.members) == {"b", "c"}
    assert g.group_epoch == epoch
    # the old id is fenced
    r = heartbeat(g, beat("a", 2, kept, instance_id="i"), TOPICS, CFG, 0)
    assert r.error is E.fenced_instance_id
    r = heartbeat(g, beat("x", 2, kept, instance_id="nope"), TOPICS, CFG, 0)
    assert (r.error, r.message) == (E.unknown_member_id, "Instance id nope is unknown.")


# -- group size, assignors, regex, metadata ----------------------------------------------------


def test_group_max_size() -> None:
    cfg = replace(CFG, max_size=1)
    g = ConsumerGroup("g")
    heartbeat(g, join("a"), TOPICS, cfg, 0)
    r = heartbeat(g, join("b"), TOPICS, cfg, 0)
    assert (r.error, r.message) == (
        E.group_max_size_reached,
        "The consumer group has reached its maximum capacity of 1 members.",
    )
    assert heartbeat(g, beat("a", 1, g.members["a"].assigned), TOPICS, cfg, 0).error is E.none


def test_client_chosen_assignor() -> None:
    g = ConsumerGroup("g")
    heartbeat(g, join("a", server_assignor="range"), TOPICS, CFG, 0)
    heartbeat(g, join("b", server_assignor="range"), TOPICS, CFG, 0)
    assert g.target == {"a": {T: frozenset({0, 1, 2})}, "b": {T: frozenset({3, 4, 5})}}


def test_uniform_is_balanced_and_sticky() -> None:
    topics = {"t": TopicInfo("t", T, 12)}
    subs = {m: frozenset({"t"}) for m in ("a", "b", "c")}
    first = uniform(subs, topics, {})
    assert sorted(len(a[T]) for a in first.values()) == [4, 4, 4]
    subs["d"] = frozenset({"t"})
    second = uniform(subs, topics, first)
    assert sorted(len(a.get(T, ())) for a in second.values()) == [3, 3, 3, 3]
    for m in ("a", "b", "c"):
        assert second[m][T] <= first[m][T]  # nobody loses a partition it did not have to


def test_uniform_heterogeneous_is_balanced_per_eligibility() -> None:
    topics = {"t": TopicInfo("t", T, 6), "u": TopicInfo("u", U, 2)}
    subs = {"a": frozenset({"t", "u"}), "b": frozenset({"t"}), "c": frozenset({"u"})}
    out = uniform(subs, topics, {})
    sizes = {m: sum(len(p) for p in a.values()) for m, a in out.items()}
    assert sum(sizes.values()) == 8 and max(sizes.values()) - min(sizes.values()) <= 2
    assert U not in out["b"] and T not in out["c"]


def test_range_assignor() -> None:
    topics = {"t": TopicInfo("t", T, 5)}
    out = range_assignor({"b": frozenset({"t"}), "a": frozenset({"t"})}, topics, {})
    assert out == {"a": {T: frozenset({0, 1, 2})}, "b": {T: frozenset({3, 4})}}


def test_regex_subscription_and_new_topic() -> None:
    g = ConsumerGroup("g")
    hb = Heartbeat("g", "a", 0, rebalance_timeout_ms=1, subscribed_topic_regex="t.*", owned=())
    r = heartbeat(g, hb, {"t1": TopicInfo("t1", T, 2), "x": TopicInfo("x", U, 2)}, CFG, 0)
    assert r.assignment == {T: frozenset({0, 1})}
    assert g.resolved_regexes["t.*"].topics == {"t1"}
    more = {"t1": TopicInfo("t1", T, 2), "t2": TopicInfo("t2", U, 1)}
    # a topic created later: picked up by the first heartbeat once the resolutions are more than
    # 10 s old (Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS: `now <= last + 10 s` waits)
    r = heartbeat(g, beat("a", 1, r.assignment), more, CFG, 10_000)
    assert r.member_epoch == 1 and g.resolved_regexes["t.*"].topics == {"t1"}
    r = heartbeat(g, beat("a", 1, {T: frozenset({0, 1})}), more, CFG, 10_001)
    assert r.member_epoch == 2 and r.assignment == {T: frozenset({0, 1}), U: frozenset({0})}
    assert g.resolved_regexes["t.*"].topics == {"t1", "t2"}
    # a deleted topic leaves the assignment at once; the resolution keeps it until the refresh
    r = heartbeat(g, beat("a", 2, r.assignment), {"t2": more["t2"]}, CFG, 10_002)
    assert g.group_epoch == 3 and r.assignment == {U: frozenset({0})}  # t1's to revoke
    assert g.resolved_regexes["t.*"].topics == {"t1", "t2"}


def test_regex_resolution_is_refreshed_after_the_interval_for_describe_acls() -> None:
    """A topic the member's principal may not DESCRIBE is left out of the resolution; once
    DESCRIBE is granted (the topics unchanged) it is picked up by the first heartbeat after
    group.consumer.regex.refresh.interval.ms (Kafka's condition 3.3), not after 10 s."""
    topics = {"t1": TopicInfo("t1", T, 1), "t2": TopicInfo("t2", U, 1)}
    cfg = ConsumerGroupConfig(regex_refresh_interval_ms=60_000)
    allowed = {"t1"}
    g = ConsumerGroup("g")
    hb = Heartbeat(
        "g",
        "a",
        0,
        rebalance_timeout_ms=1,
        subscribed_topic_regex="t.*",
        owned=(),
        describable=lambda t: t in allowed,
    )
    r = heartbeat(g, hb, topics, cfg, 0)
    assert r.assignment == {T: frozenset({0})} and g.resolved_regexes["t.*"].topics == {"t1"}
    allowed.add("t2")
    again = replace(hb, member_epoch=1, rebalance_timeout_ms=-1, subscribed_topic_regex=None)
    r = heartbeat(g, replace(again, owned=owned(r.assignment)), topics, cfg, 60_000)
    assert r.member_epoch == 1 and g.resolved_regexes["t.*"].topics == {"t1"}
    r = heartbeat(g, replace(again, owned=owned({T: frozenset({0})})), topics, cfg, 60_001)
    assert g.resolved_regexes["t.*"].topics == {"t1", "t2"}
    assert r.member_epoch == 2 and r.assignment == {T: frozenset({0}), U: frozenset({0})}


def test_regexes_are_refused_where_re2_refuses_them() -> None:
    from coordinator.consumer_group.regexes import regex_error

    oks = ("t.*", "(?i)orders-[0-9]+", "a|b", "(?P<n>x)y", "x{2}", "[(?=]", "[[a]", "[[:alpha:]]")
    for ok in oks:
        assert regex_error(ok) is None, ok
    for refused, why in (
        # in RE2/J's words (PatternSyntaxException.getDescription)
        (r"(a)\1", "invalid escape sequence"),
        ("(?P<n>a)(?P=n)", "invalid or unsupported Perl syntax"),
        ("a(?=b)", "invalid or unsupported Perl syntax"),
        ("a(?!b)", "invalid or unsupported Perl syntax"),
        ("(?<=a)b", "invalid named capture"),
        ("(?<!a)b", "invalid named capture"),
        ("(?>a)", "invalid or unsupported Perl syntax"),
        ("a*+", "invalid nested repetition operator"),
        ("a{2}+", "invalid nested repetition operator"),
        ("(a)?(?(1)b|c)", "invalid or unsupported Perl syntax"),
        (r"a\Z", "invalid escape sequence"),
        ("t(", "missing closing )"),
        ("t)", "regexp/syntax: internal error"),
        (r"[\1]", "invalid escape sequence"),
    ):
        prefix = f"SubscribedTopicRegex `{refused}` is not a valid regular expression"
        assert regex_error(refused) == f"{prefix}: {why}."


def test_regex_resolutions_are_stored_and_forgotten() -> None:
    from coordinator.consumer_group import records

    topics = {"t1": TopicInfo("t1", T, 1), "x": TopicInfo("x", U, 1)}
    g = ConsumerGroup("g")
    hb = Heartbeat("g", "a", 0, rebalance_timeout_ms=1, subscribed_topic_regex="t.*", owned=())
    heartbeat(g, hb, topics, CFG, 5, wall_ms=1_700_000_000_000)
    written = records.changes(None, g)
    kinds = [records.record_type(k) for k, _ in written]
    assert kinds.index(records.REGEX) < kinds.index(records.GROUP_EPOCH)
    (k, v) = next(kv for kv in written if records.record_type(kv[0]) == records.REGEX)
    assert k == b"\x00\x10\x00\x01g\x00\x03t.*"
    resolved = g.resolved_regexes["t.*"]
    assert v == (
        b"\x00\x00"  # value version 0
        + b"\x02\x03t1"  # Topics: one compact string
        + resolved.version.to_bytes(8, "big")
        + (1_700_000_000_000).to_bytes(8, "big")
        + b"\x00"
    )
    replayed = records.replay_all(written)["g"]
    assert replayed.resolved_regexes == g.resolved_regexes
    stored = records.snapshot(g)
    leave(g, Heartbeat("g", "a", -1), topics)
    gone = records.changes(stored, g)
    assert (records.key(records.REGEX, "g", "t.*"), None) in gone
    assert records.replay_all(written + gone)["g"].resolved_regexes == {}


@pytest.mark.parametrize(
    "regex",
    ["t(", "a{4294967296}", r"(t)\1", "t(?=x)", "t{1001}"],
    ids=[
        "re.error",
        "huge repeat (OverflowError)",
        "back-reference (RE2/J has none)",
        "look-ahead (RE2/J has none)",
        "repeat above RE2's 1000",
    ],
)
def test_invalid_regex(regex: str) -> None:
    g = ConsumerGroup("g")
    hb = Heartbeat("g", "a", 0, rebalance_timeout_ms=1, subscribed_topic_regex=regex, owned=())
    r = heartbeat(g, hb, TOPICS, CFG, 0)
    assert r.error is E.invalid_regular_expression
    assert r.message is not None and r.message.startswith(f"SubscribedTopicRegex `{regex}` is not")
    assert not g.members and g.group_epoch == 0


def test_new_partitions_and_deleted_topics_make_a_new_target() -> None:
    g = ConsumerGroup("g")
    heartbeat(g, join("a", ("t", "u")), TOPICS, CFG, 0)
    grown = {"t": TopicInfo("t", T, 8), "u": TopicInfo("u", U, 1)}
    assert refresh_metadata(g, grown, CFG)
    assert g.target["a"] == {T: frozenset(range(8)), U: frozenset({0})}
    assert refresh_metadata(g, {"u": TopicInfo("u", U, 1)}, CFG)
    assert g.target["a"] == {U: frozenset({0})}
    assert not refresh_metadata(g, {"u": TopicInfo("u", U, 1)}, CFG)


# -- offsets -----------------------------------------------------------------------------------


def test_offset_commit_and_fetch_validation() -> None:
    g = ConsumerGroup("g")
    assert validate_offset_commit(g, "", -1, False, 9) is E.none  # empty group, admin commit
    heartbeat(g, join("a"), TOPICS, CFG, 0)
    assert validate_offset_commit(g, "", -1, False, 9) is E.unknown_member_id
    assert validate_offset_commit(g, "a", 1, False, 9) is E.none
    assert validate_offset_commit(g, "a", 0, False, 9) is E.stale_member_epoch
    assert validate_offset_commit(g, "a", 1, False, 8) is E.unsupported_version
    assert validate_offset_commit(g, "a", 1, True, 3) is E.none
    assert validate_offset_commit(g, "a", 2, True, 3) is E.stale_member_epoch
    assert validate_offset_fetch(g, None, -1) is E.none
    assert validate_offset_fetch(g, "a", 1) is E.none
    assert validate_offset_fetch(g, "a", 2) is E.stale_member_epoch
    assert validate_offset_fetch(g, "b", 1) is E.unknown_member_id


# -- records: replay equals live ---------------------------------------------------------------


def _stored(g: ConsumerGroup) -> tuple[object, ...]:
    return (
        g.group_epoch,
        g.assignment_epoch,
        g.members,
        {m: dict(a) for m, a in g.target.items()},
        g.subscription_metadata,
        g.partition_epochs,
        g.static_members,
        g.resolved_regexes,
    )


def test_records_replayed_rebuild_the_live_groups() -> None:
    from coordinator.consumer_group import records

    topics = {"t": TopicInfo("t", T, 7), "u": TopicInfo("u", U, 5)}
    for seed in range(4):
        rng = random.Random(seed)
        g = ConsumerGroup("g")
        log: list[records.Record] = []
        stored: ConsumerGroup | None = None
        clients: dict[str, tuple[int, Assignment]] = {}
        for step in range(100):
            alive = sorted(clients)
            choice = rng.random()
            if choice < 0.15 and len(clients) < 5:
                mid = f"m{step}"
                inst = f"i{step}" if rng.random() < 0.3 else None
                regex = rng.choice([None, None, "t|u", "u"])  # some by server-side regex
                r = heartbeat(
                    g,
                    join(mid, ("t", "u"), instance_id=inst, subscribed_topic_regex=regex),
                    topics,
                    CFG,
                    step,
                )
                clients[mid] = (r.member_epoch, r.assignment or {})
            elif choice < 0.22 and alive:
                mid = rng.choice(alive)
                leave(g, Heartbeat("g", mid, -1), topics)
                del clients[mid]
            elif choice < 0.25:
                expire(g, topics, step + CFG.session_timeout_ms)
                clients = {m: c for m, c in clients.items() if m in g.members}
            elif alive:
                mid = rng.choice(alive)
                epoch, have = clients[mid]
                r = heartbeat(g, beat(mid, epoch, have), topics, CFG, step)
                clients[mid] = (r.member_epoch, r.assignment if r.assignment is not None else have)
            log += records.changes(stored, g)
            stored = records.snapshot(g)
            replayed = records.replay_all(log).get("g", ConsumerGroup("g"))
            assert _stored(replayed) == _stored(g), (seed, step)
    assert records.replay_all(log + records.changes(stored, None)) == {}


def test_record_formats_are_kafkas() -> None:
    from coordinator.consumer_group import records

    assert records.key(records.GROUP_EPOCH, "g") == b"\x00\x03\x00\x01g"
    assert records.key(records.CURRENT, "g", "m") == b"\x00\x08\x00\x01g\x00\x01m"
    assert records.epoch_value(5) == b"\x00\x00\x00\x00\x00\x05\x00"
    g = ConsumerGroup("g")
    heartbeat(g, join("m", instance_id="i"), TOPICS, CFG, 0)
    m = g.members["m"]
    # version 0; epoch 1, previous 0, STABLE (0); one topic of 6 partitions; none pending
    assert records.current_value(m) == (
        b"\x00\x00"
        + b"\x00\x00\x00\x01"
        + b"\x00\x00\x00\x00"
        + b"\x00"
        + b"\x02"
        + T.bytes
        + b"\x07"
        + b"".join(i.to_bytes(4, "big") for i in range(6))
        + b"\x00"
        + b"\x01"
        + b"\x00"
    )


def test_a_group_of_200_members_converges() -> None:
    """The largest group the unit tests run: 200 members join one by one (each heartbeating
    as the others join), then every member heartbeats until the group is Stable."""
    topics = {"t": TopicInfo("t", T, 400)}
    g = ConsumerGroup("g")
    clients: dict[str, tuple[int, Assignment]] = {}
    for i in range(200):
        r = heartbeat(g, join(f"m{i:03}"), topics, CFG, i)
        clients[f"m{i:03}"] = (r.member_epoch, r.assignment or {})
    for _ in range(3):
        for mid, (epoch, have) in list(clients.items()):
            r = heartbeat(g, beat(mid, epoch, have), topics, CFG, 1000)
            assert r.error is E.none
            clients[mid] = (r.member_epoch, r.assignment if r.assignment is not None else have)
    assert g.state is ConsumerGroupState.STABLE
    assert sorted({len(a.get(T, ())) for _, a in clients.values()}) == [2]


# -- rejoining with epoch 0 while still known (Kafka's throwIfConsumerGroupMemberEpochIsInvalid,
# throwIfInstanceIdIsUnreleased) ---------------------------------------------------------------


def test_a_known_member_may_rejoin_with_epoch_0() -> None:
    """KAFKA-19233: a fenced member rejoins under its id with epoch 0 and empty owned
    partitions; it keeps its epoch, and a member that was revoking has revoked."""
    g = ConsumerGroup("g")
    heartbeat(g, join("a"), TOPICS, CFG, 0)
    heartbeat(g, join("b"), TOPICS, CFG, 0)
    heartbeat(g, beat("a", 1, {T: frozenset(range(6))}), TOPICS, CFG, 0)
    assert g.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    kept = g.members["a"].assigned
    r = heartbeat(g, join("a"), TOPICS, CFG, 0)
    assert (r.error, r.member_epoch, r.assignment) == (E.none, 2, kept)
    assert g.members["a"].state is MemberState.STABLE
    r = heartbeat(g, join("a"), TOPICS, CFG, 0)  # again, now STABLE
    assert (r.error, r.member_epoch, r.assignment) == (E.none, 2, kept)


def test_a_static_member_rejoining_with_epoch_0_under_its_own_id_is_unreleased() -> None:
    g = ConsumerGroup("g")
    heartbeat(g, join("a", instance_id="i"), TOPICS, CFG, 0)
    r = heartbeat(g, join("a", instance_id="i"), TOPICS, CFG, 0)
    assert (r.error, r.message) == (
        E.unreleased_instance_id,
        "Static member a with instance id i cannot join the group because the instance id is "
        "owned by a member.",
    )
    # after a temporary leave (-2) the same id rejoins from epoch 0 with its partitions
    leave(g, Heartbeat("g", "a", -2, instance_id="i"), TOPICS)
    r = heartbeat(g, join("a", instance_id="i"), TOPICS, CFG, 0)
    assert (r.error, r.member_epoch, r.assignment) == (E.none, 1, {T: frozenset(range(6))})


def test_range_orders_static_members_by_instance_id_first() -> None:
    """Kafka's RangeAssignor.sortMemberIds: members with an instance id first, by instance id,
    then the others by member id; so a static member's range follows its instance id."""
    g = ConsumerGroup("g")
    heartbeat(g, join("z", instance_id="i1", server_assignor="range"), TOPICS, CFG, 0)
    heartbeat(g, join("a", instance_id="i2", server_assignor="range"), TOPICS, CFG, 0)
    heartbeat(g, join("0", server_assignor="range"), TOPICS, CFG, 0)
    assert g.target == {
        "z": {T: frozenset({0, 1})},
        "a": {T: frozenset({2, 3})},
        "0": {T: frozenset({4, 5})},
    }


def test_regexes_past_python_limits_are_answered_not_raised() -> None:
    """A repeat count over sys.maxsize (Python's parser raises OverflowError) is
    INVALID_REGULAR_EXPRESSION; parentheses nested 5000 deep (Python's parser raises
    RecursionError) are a regex like another. The heartbeat answers both."""
    from coordinator.consumer_group.regexes import regex_error

    deep = "(" * 5000 + "t" + ")" * 5000
    for regex, error in (
        ("a{4294967296}", E.invalid_regular_expression),
        ("a{1,99999999999999999999}", E.invalid_regular_expression),
        (deep, E.none),
    ):
        assert (regex_error(regex) is None) is (error is E.none)
        g = ConsumerGroup("g")
        hb = Heartbeat("g", "a", 0, rebalance_timeout_ms=1, subscribed_topic_regex=regex)
        r = heartbeat(g, replace(hb, owned=()), TOPICS, CFG, 0)
        assert r.error is error and len(g.members) == (error is E.none)


def test_repeat_counts_over_1000_are_refused_as_re2_does() -> None:
    """RE2/J's parser refuses a repeat count above 1000 (ERR_INVALID_REPEAT_SIZE)."""
    from coordinator.consumer_group.regexes import regex_error

    for ok in ("a{1000}", "a{0,1000}", "a{1000,}", "[{]1001}", r"a\{1001}"):
        assert regex_error(ok) is None, ok
    for refused in ("a{1001}", "a{2,1001}", "a{1001,}", "(ab){5000}"):
        message = regex_error(refused)
        assert message is not None and "invalid repeat count" in message, (refused, message)


def test_regex_matching_takes_linear_time_as_re2() -> None:
    """Kafka matches with RE2/J, in time linear in the topic name: ``(a+)+b`` against a long
    run of ``a`` is answered at once (a backtracking engine would take ages, the broker's one
    event loop with it)."""
    import time

    from coordinator.consumer_group.regexes import matching

    start = time.monotonic()
    assert matching("(a+)+b", ["a" * 27, "a" * 200 + "b"]) == {"a" * 200 + "b"}
    assert time.monotonic() - start < 1


def test_re2_syntax_python_lacks_is_taken() -> None:
    """RE2's own syntax, which Kafka accepts, matches as in Kafka."""
    from coordinator.consumer_group.regexes import matching, regex_error

    topics = ["orders", "Orders2", "x_1", "end"]
    for rx, found in (
        ("(?<n>ord)ers", {"orders"}),
        ("[[:alpha:]]+", {"orders", "end"}),
        (r"\pL+", {"orders", "end"}),
        (r"end\z|x_\d", {"end", "x_1"}),
    ):
        assert regex_error(rx) is None, rx
        assert matching(rx, topics) == found, rx


def test_a_group_without_regexes_skips_the_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The topics' digest (regexes.version, O(topics)) is only for groups with regexes: a
    heartbeat of a group subscribed by names does not compute it."""
    from coordinator.consumer_group import regexes

    def digest(topics: object) -> int:
        raise AssertionError("digested the topics")

    monkeypatch.setattr(regexes, "version", digest)
    g = ConsumerGroup("g")
    assert heartbeat(g, join("a"), TOPICS, CFG, 0).error is E.none
    assert heartbeat(g, beat("a", 1, g.members["a"].assigned), TOPICS, CFG, 20_000).error is E.none


def test_a_revoking_member_unsubscribing_gives_up_that_topic_at_once() -> None:
    """Kafka 4.2's CurrentAssignmentBuilder.withHasSubscriptionChanged: a member waiting to
    revoke partitions (UNREVOKED_PARTITIONS) that unsubscribes from a topic has that topic's
    partitions taken from its assignment (pending revocation) in the same heartbeat, not once
    it revoked the earlier ones."""
    topics = {"t": TopicInfo("t", T, 4), "u": TopicInfo("u", U, 4)}
    g = ConsumerGroup("g")
    a = heartbeat(g, join("a", ("t", "u")), topics, CFG, 0).assignment
    assert a == {T: frozenset(range(4)), U: frozenset(range(4))}
    heartbeat(g, join("b", ("t", "u")), topics, CFG, 10)
    ra = heartbeat(g, beat("a", 1, a), topics, CFG, 20)
    assert ra.assignment == {T: frozenset(range(4))}  # u goes to "b" once "a" revoked it
    assert g.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    # still owning everything, "a" now subscribes to u only: t is taken from it at once
    ra = heartbeat(g, beat("a", 1, a, subscribed_topic_names=("u",)), topics, CFG, 30)
    assert ra.member_epoch == 1 and ra.assignment == {}
    m = g.members["a"]
    assert m.state is MemberState.UNREVOKED_PARTITIONS and not m.assigned
    assert dict(m.pending_revocation) == {T: frozenset(range(4)), U: frozenset(range(4))}
    # once it revoked everything, it moves on to its new target
    ra = heartbeat(g, beat("a", 1, {}), topics, CFG, 40)
    assert ra.member_epoch == g.group_epoch and set(dict(g.members["a"].assigned)) <= {U}


def test_a_partition_being_revoked_by_the_member_itself_is_not_unreleased() -> None:
    """KAFKA-19449 (Kafka 4.2): a partition the target gives back to the member revoking it
    counts as free (its owner is updated after the reconciliation), so the member gets it
    in the same heartbeat instead of waiting in UNRELEASED_PARTITIONS."""
    g = ConsumerGroup("g")
    a = heartbeat(g, join("a"), TOPICS, CFG, 0).assignment
    heartbeat(g, join("b"), TOPICS, CFG, 10)
    keep = heartbeat(g, beat("a", 1, a), TOPICS, CFG, 20).assignment
    assert keep is not None and g.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    leave(g, Heartbeat("g", "b", -1), TOPICS)  # b leaves: a's target is all again
    ra = heartbeat(g, beat("a", 1, keep), TOPICS, CFG, 40)  # a revoked the rest
    assert ra.member_epoch == g.group_epoch and ra.assignment == {T: frozenset(range(6))}
    assert g.members["a"].state is MemberState.STABLE


def test_the_same_topic_names_in_another_order_are_no_subscription_change() -> None:
    """Kafka keeps a member's SubscribedTopicNames as a set: the same names reordered (or
    repeated) change nothing, so no new group epoch and no rebalance."""
    topics = {"t": TopicInfo("t", T, 2), "u": TopicInfo("u", U, 2)}
    g = ConsumerGroup("g")
    heartbeat(g, join("a", ("t", "u")), topics, CFG, 0)
    epoch, member = g.group_epoch, g.members["a"]
    have = g.members["a"].assigned
    r = heartbeat(g, beat("a", 1, have, subscribed_topic_names=("u", "t", "u")), topics, CFG, 1)
    assert r.error is E.none and r.member_epoch == 1
    assert g.group_epoch == epoch and g.members["a"] == member


def test_a_tie_between_server_assignors_goes_as_in_kafkas_map_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kafka's computePreferredServerAssignor keeps the first maximum of a HashMap copied from
    its TimelineHashMap of counts: "uniform" before "range", a name first named at this
    heartbeat last."""
    from coordinator.consumer_group import heartbeat as hb

    used: list[str | None] = []
    real = hb.preferred_assignor

    def spy(g: ConsumerGroup, config: ConsumerGroupConfig, added: str | None = None) -> str:
        used.append(chosen := real(g, config, added))
        return chosen

    monkeypatch.setattr(hb, "preferred_assignor", spy)
    g = ConsumerGroup("g")
    heartbeat(g, join("a", server_assignor="uniform"), TOPICS, CFG, 0)
    heartbeat(g, join("b", server_assignor="range"), TOPICS, CFG, 0)  # range is new: last
    assert used == ["uniform", "uniform"]
    g = ConsumerGroup("g")
    heartbeat(g, join("a", server_assignor="range"), TOPICS, CFG, 0)
    heartbeat(g, join("b", server_assignor="uniform"), TOPICS, CFG, 0)  # uniform is new: last
    assert used[2:] == ["range", "range"]
    heartbeat(g, join("c"), TOPICS, CFG, 0)  # both named before: uniform first
    assert used[4:] == ["uniform"]
    assert real(g, CFG) == "uniform"  # as ConsumerGroupDescribe's AssignorName
