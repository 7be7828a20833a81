"""ConsumerGroupHeartbeat's decisions (KIP-848): Kafka's GroupMetadataManager
``consumerGroupHeartbeat`` / ``consumerGroupLeave`` / ``consumerGroupFenceMember`` and the
timers, as pure functions of a ``ConsumerGroup``, the topics and ``now_ms``.

Theory of operation
-------------------
One heartbeat does three things, in Kafka's order:

1. *Member and group epoch.* The member is created (epoch 0) or found and checked: a static
   member (instance id) may only replace a previous instance that left with epoch -2
   (UNRELEASED_INSTANCE_ID otherwise); a heartbeat's epoch must be the member's, or its
   previous epoch with owned partitions that are a subset of its assignment (the answer
   bumping it was lost); anything else is FENCED_MEMBER_EPOCH. The member's subscription
   (topic names, or a server-side regex) is updated. The group epoch is bumped when a
   subscription changed or when the subscribed topics' metadata (ids, partition counts,
   topics created, matched or deleted) differs from what the last target assignment used.
2. *Target assignment.* When the group epoch is ahead of the target assignment epoch, the
   group's preferred assignor (the one most members name, else the first of
   ``group.consumer.assignors``) computes a new target for every member.
3. *Reconciliation* of this member towards its target (``reconcile.next_member``): partitions
   are revoked before they are given to anyone else. A member whose subscription changed is
   reconciled even when it was reconciled to the target epoch: it gives up the partitions
   of the topics it left at once.

Every check happens before anything changes, so a refused heartbeat leaves the group as it was.
Leaving (epoch -1) removes the member and bumps the group epoch; a static member's leave with
-2 keeps it (epoch -2, its partitions still owned) until its session times out or its instance
rejoins. The session timeout fences a member that stops heartbeating; the rebalance timeout
fences one that does not revoke within its rebalance timeout.

Regular expressions: resolved per group and stored as Kafka stores them, refreshed at most every
10 s when the topics changed; RE2 (google-re2) standing for RE2/J
(``coordinator.consumer_group.regexes``).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode

from coordinator.consumer_group import regexes
from coordinator.consumer_group.assignors import ASSIGNORS
from coordinator.consumer_group.model import (
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    TopicInfo,
)
from coordinator.consumer_group.reconcile import FencedMember, Owned, next_member

E = ErrorCode
LEAVE = -1
STATIC_LEAVE = -2
CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    assignors: tuple[str, ...] = ("uniform", "range")
    max_size: int = 2**31 - 1
    regex_refresh_interval_ms: int = regexes.REFRESH_INTERVAL_MS


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A ConsumerGroupHeartbeat request, as the decisions take it."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Owned = None
    client_id: str = ""
    client_host: str = ""
    # whether the member may DESCRIBE a topic (None: no authorizer); a regex resolved at this
    # heartbeat keeps only those (Kafka's filterTopicDescribeAuthorizedTopics)
    describable: Callable[[str], bool] | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode = E.none
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


def failed(code: ErrorCode, message: str | None = None) -> HeartbeatResult:
    return HeartbeatResult(error=code, message=message)


def new_member_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def validate_request(
    hb: Heartbeat, version: int, config: ConsumerGroupConfig
) -> HeartbeatResult | None:
    """Kafka's GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid."""
    if (
        version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION
        or hb.member_epoch > 0
        or hb.member_epoch == LEAVE
    ) and not hb.member_id.strip():
        return failed(E.invalid_request, "MemberId can't be empty.")
    if not hb.group_id.strip():
        return failed(E.invalid_request, "GroupId can't be empty.")
    if hb.instance_id is not None and not hb.instance_id.strip():
        return failed(E.invalid_request, "InstanceId can't be empty.")
    if hb.rack_id is not None and not hb.rack_id.strip():
        return failed(E.invalid_request, "RackId can't be empty.")
    if hb.member_epoch == 0:
        if hb.rebalance_timeout_ms == -1:
            return failed(
                E.invalid_request, "RebalanceTimeoutMs must be provided in first request."
            )
        if hb.owned is None or len(hb.owned) > 0:
            return failed(E.invalid_request, "TopicPartitions must be empty when (re-)joining.")
        if hb.subscribed_topic_names is None and hb.subscribed_topic_regex is None:
            return failed(
                E.invalid_request,
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                "(re-)joining.",
            )
    elif hb.member_epoch == STATIC_LEAVE:
        if hb.instance_id is None:
            return failed(E.invalid_request, "InstanceId can't be null.")
    elif hb.member_epoch < STATIC_LEAVE:
        return failed(E.invalid_request, "MemberEpoch is invalid.")
    if hb.server_assignor is not None and hb.server_assignor not in config.assignors:
        return failed(
            E.unsupported_assignor,
            f"ServerAssignor {hb.server_assignor} is not supported. Supported assignors: "
            f"{', '.join(config.assignors)}.",
        )
    return None


def subscribed(
    m: ConsumerGroupMember, topics: Mapping[str, TopicInfo], g: ConsumerGroup
) -> frozenset[str]:
    """The topic names a member subscribes to: its names plus what its regex resolved to in
    ``g`` (those of them that still exist)."""
    names = set(m.subscribed_topic_names)
    if m.subscribed_topic_regex:
        resolved = g.resolved_regexes.get(m.subscribed_topic_regex)
        if resolved is not None:
            names.update(t for t in resolved.topics if t in topics)
    return frozenset(names)


def subscribed_ids(
    m: ConsumerGroupMember, topics: Mapping[str, TopicInfo], g: ConsumerGroup
) -> frozenset[uuid.UUID]:
    """The ids of the existing topics the member subscribes to (Kafka's subscribedTopicIds)."""
    return frozenset(topics[n].topic_id for n in subscribed(m, topics, g) if n in topics)


def _metadata(g: ConsumerGroup, topics: Mapping[str, TopicInfo]) -> dict[str, TopicInfo]:
    names: set[str] = set()
    for m in g.members.values():
        names |= subscribed(m, topics, g)
    return {n: topics[n] for n in sorted(names) if n in topics}


def _is_subset(owned: Owned, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(p in assigned.get(t, ()) for t, parts in owned for p in parts)


def _check_epoch(m: ConsumerGroupMember, epoch: int, owned: Owned) -> HeartbeatResult | None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid."""
    if epoch > m.member_epoch:
        return failed(
            E.fenced_member_epoch,
            f"The consumer group member has a greater member epoch ({epoch}) than the one known "
            f"by the group coordinator ({m.member_epoch}). The member must abandon all its "
            "partitions and rejoin.",
        )
    if epoch < m.member_epoch and (
        epoch != m.previous_member_epoch or not _is_subset(owned, m.assigned)
    ):
        return failed(
            E.fenced_member_epoch,
            f"The consumer group member has a smaller member epoch ({epoch}) than the one known "
            f"by the group coordinator ({m.member_epoch}). The member must abandon all its "
            "partitions and rejoin.",
        )
    return None


def _find_member(
    g: ConsumerGroup, hb: Heartbeat, member_id: str
) -> ConsumerGroupMember | HeartbeatResult:
    """The member the heartbeat is from (a new one when joining), or the refusal."""
    joining = hb.member_epoch == 0
    if hb.instance_id is None:
        m = g.members.get(member_id)
        if m is None:
            if joining:
                return ConsumerGroupMember(member_id)
            return failed(
                E.unknown_member_id,
                f"Member {member_id} is not a member of group {g.group_id}.",
            )
        if joining:
            # a known member rejoining (after FENCED_MEMBER_EPOCH, say) keeps its epoch and
            # assignment and reconciles on from there: KAFKA-19233 (Kafka before it fenced
            # it again until its session expired)
            return m
        return _check_epoch(m, hb.member_epoch, hb.owned) or m
    existing = g.static_member(hb.instance_id)
    if joining:
        if existing is None:  # a new static member (Kafka checks no epoch here)
            return g.members.get(member_id) or ConsumerGroupMember(member_id)
        # the instance id is free only after a leave with -2, even for the same member id;
        # a static member using the classic protocol is replaced at once (online migration)
        if existing.member_epoch != STATIC_LEAVE and existing.classic is None:
            return failed(
                E.unreleased_instance_id,
                f"Static member {member_id} with instance id {hb.instance_id} cannot join the "
                f"group because the instance id is owned by {existing.member_id} member.",
            )
        return replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
    if existing is None:
        return failed(E.unknown_member_id, f"Instance id {hb.instance_id} is unknown.")
    if existing.member_id != member_id:
        return failed(
            E.fenced_instance_id,
            f"Static member {member_id} with instance id {hb.instance_id} was fenced by member "
            f"{existing.member_id}.",
        )
    return _check_epoch(existing, hb.member_epoch, hb.owned) or existing


# the order Kafka's serverAssignors TimelineHashMap iterates the assignor names in (its
# Fibonacci hash puts "uniform" in slot 0, "range" after it at any table size)
_KAFKA_ORDER = ("uniform", "range")


def preferred_assignor(
    g: ConsumerGroup, config: ConsumerGroupConfig, added: str | None = None
) -> str:
    """Kafka's computePreferredServerAssignor: the assignor most members name, else the
    first of ``group.consumer.assignors``. A tie goes to the first in Kafka's map order (it
    copies the counts into a HashMap, where both names share a bucket, and keeps the first
    maximum): "uniform" before "range", except that a name first named at this heartbeat
    (``added``) comes after those named before."""
    votes: dict[str, int] = {}
    for m in g.members.values():
        if m.server_assignor is not None:
            votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
    if not votes:
        return config.assignors[0]
    best = max(votes.values())

    def order(name: str) -> tuple[bool, int, str]:
        rank = _KAFKA_ORDER.index(name) if name in _KAFKA_ORDER else len(_KAFKA_ORDER)
        return (name == added, rank, name)

    return min((a for a, n in votes.items() if n == best), key=order)


def compute_target(
    g: ConsumerGroup,
    topics: Mapping[str, TopicInfo],
    config: ConsumerGroupConfig,
    added_assignor: str | None = None,
) -> None:
    """A new target assignment for the group's epoch (Kafka's TargetAssignmentBuilder);
    ``added_assignor``: a server assignor no member named before this heartbeat."""
    subs = {mid: subscribed(m, topics, g) for mid, m in g.members.items()}
    assignor = ASSIGNORS[preferred_assignor(g, config, added_assignor)]
    instance_ids = {mid: m.instance_id for mid, m in g.members.items()}
    g.target = assignor(subs, g.subscription_metadata, g.target, instance_ids)
    g.assignment_epoch = g.group_epoch


def heartbeat(
    g: ConsumerGroup,
    hb: Heartbeat,
    topics: Mapping[str, TopicInfo],
    config: ConsumerGroupConfig,
    now_ms: int,
    make_member_id: Callable[[], str] = new_member_id,
    wall_ms: int | None = None,
) -> HeartbeatResult:
    """A heartbeat with epoch >= 0 to group ``g`` (created empty by the caller when joining).
    ``wall_ms`` stamps regex resolutions (``now_ms`` when not given)."""
    if len(g.members) >= config.max_size and (not hb.member_id or hb.member_id not in g.members):
        return failed(
            E.group_max_size_reached,
            f"The consumer group has reached its maximum capacity of {config.max_size} members.",
        )
    member_id = hb.member_id or make_member_id()
    found = _find_member(g, hb, member_id)
    if isinstance(found, HeartbeatResult):
        return found
    member = found
    regex = hb.subscribed_topic_regex
    if (
        regex
        and regex != member.subscribed_topic_regex
        and (message := regexes.regex_error(regex)) is not None
    ):
        return failed(E.invalid_regular_expression, message)
    # -- 1. the member and the group epoch (nothing was changed before this point) ------------
    replaced = g.static_member(hb.instance_id)
    if replaced is not None and replaced.member_id != member_id:  # a static member's new id
        old_target = g.target.get(replaced.member_id, {})
        g.remove_member(replaced.member_id)
        g.target[member_id] = old_target
    updated = replace(
        member,
        instance_id=hb.instance_id if hb.instance_id is not None else member.instance_id,
        rack_id=hb.rack_id if hb.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(
            hb.rebalance_timeout_ms
            if hb.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms
        ),
        server_assignor=hb.server_assignor
        if hb.server_assignor is not None
        else member.server_assignor,
        # a set in Kafka: the same names in another order (or repeated) change nothing
        subscribed_topic_names=(
            tuple(hb.subscribed_topic_names)
            if hb.subscribed_topic_names is not None
            and set(hb.subscribed_topic_names) != set(member.subscribed_topic_names)
            else member.subscribed_topic_names
        ),
        subscribed_topic_regex=(
            (regex or None) if regex is not None else member.subscribed_topic_regex
        ),
        client_id=hb.client_id,
        client_host=hb.client_host,
        classic=None,  # it uses the consumer protocol now (Kafka: setClassicMemberMetadata(null))
    )
    subscription_changed = (
        updated.subscribed_topic_names != member.subscribed_topic_names
        or updated.subscribed_topic_regex != member.subscribed_topic_regex
    )
    bump = subscription_changed
    # a server assignor no member named before this heartbeat (Kafka's count map lacked it)
    added = updated.server_assignor
    if added is not None and any(m.server_assignor == added for m in g.members.values()):
        added = None
    g.update_member(updated)
    wall = now_ms if wall_ms is None else wall_ms
    if regexes.update(g, topics, now_ms, wall, hb.describable, config.regex_refresh_interval_ms):
        bump = True
    metadata = _metadata(g, topics)
    if metadata != g.subscription_metadata:
        g.subscription_metadata = metadata
        bump = True
    if bump:
        g.group_epoch += 1
    # -- 2. the target assignment ---------------------------------------------------------------
    if g.group_epoch > g.assignment_epoch:
        compute_target(g, topics, config, added)
    # -- 3. reconciliation ---------------------------------------------------------------------
    reconciled = updated
    # a changed subscription is checked at once, reconciled or not (Kafka 4.2, KAFKA-19431)
    if subscription_changed or not updated.is_reconciled_to(g.assignment_epoch):
        try:
            reconciled = next_member(
                updated,
                g.assignment_epoch,
                g.target.get(member_id, {}),
                g.partition_epoch,
                hb.owned,
                subscribed_ids(updated, topics, g),
                subscription_changed,
            )
        except FencedMember as exc:
            return failed(E.fenced_member_epoch, str(exc))
        if reconciled != updated:
            g.update_member(reconciled)
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                g.rebalance_deadlines[member_id] = (
                    reconciled.member_epoch,
                    now_ms + max(reconciled.rebalance_timeout_ms, 0),
                )
            else:
                g.rebalance_deadlines.pop(member_id, None)
    g.session_deadlines[member_id] = now_ms + config.session_timeout_ms
    full = hb.member_epoch == 0 or (
        hb.rebalance_timeout_ms != -1
        and (hb.subscribed_topic_names is not None or hb.subscribed_topic_regex is not None)
        and hb.owned is not None
    )
    changed = dict(reconciled.assigned) != dict(member.assigned)
    return HeartbeatResult(
        member_id=member_id,
        member_epoch=reconciled.member_epoch,
        heartbeat_interval_ms=config.heartbeat_interval_ms,
        assignment=reconciled.assigned if full or changed else None,
    )


subscription_metadata = _metadata


def fence(g: ConsumerGroup, member_id: str, topics: Mapping[str, TopicInfo]) -> None:
    """Kafka's consumerGroupFenceMember: remove the member and bump the group epoch."""
    g.remove_member(member_id)
    for regex in set(g.resolved_regexes) - regexes.used(g):  # tombstoned with the member
        del g.resolved_regexes[regex]
    g.subscription_metadata = _metadata(g, topics)
    g.group_epoch += 1


def leave(g: ConsumerGroup, hb: Heartbeat, topics: Mapping[str, TopicInfo]) -> HeartbeatResult:
    """A heartbeat with epoch -1 (leave) or -2 (a static member leaving for now)."""
    if hb.instance_id is None:
        if hb.member_id not in g.members:
            return failed(
                E.unknown_member_id,
                f"Member {hb.member_id} is not a member of group {g.group_id}.",
            )
        fence(g, hb.member_id, topics)
        return HeartbeatResult(member_id=hb.member_id, member_epoch=hb.member_epoch)
    m = g.static_member(hb.instance_id)
    if m is None:
        return failed(E.unknown_member_id, f"Instance id {hb.instance_id} is unknown.")
    if m.member_id != hb.member_id:
        return failed(
            E.fenced_instance_id,
            f"Static member {hb.member_id} with instance id {hb.instance_id} was fenced by "
            f"member {m.member_id}.",
        )
    if hb.member_epoch == STATIC_LEAVE:
        g.update_member(replace(m, member_epoch=STATIC_LEAVE, pending_revocation={}))
        g.rebalance_deadlines.pop(m.member_id, None)
        return HeartbeatResult(member_id=m.member_id, member_epoch=STATIC_LEAVE)
    fence(g, m.member_id, topics)
    return HeartbeatResult(member_id=hb.member_id, member_epoch=hb.member_epoch)


def expire(g: ConsumerGroup, topics: Mapping[str, TopicInfo], now_ms: int) -> list[str]:
    """Fence the members whose session or rebalance timeout ran out; returns their ids."""
    fenced: list[str] = []
    for member_id, at in list(g.session_deadlines.items()):
        if at <= now_ms and member_id in g.members:
            fence(g, member_id, topics)
            fenced.append(member_id)
    for deadlines in (g.join_deadlines, g.sync_deadlines):  # classic members (migration)
        for member_id, at in list(deadlines.items()):
            if at <= now_ms and member_id in g.members:
                fence(g, member_id, topics)
                fenced.append(member_id)
    for member_id, (epoch, at) in list(g.rebalance_deadlines.items()):
        if at > now_ms:
            continue
        m = g.members.get(member_id)
        g.rebalance_deadlines.pop(member_id, None)
        if (
            m is not None
            and m.state is MemberState.UNREVOKED_PARTITIONS
            and m.member_epoch == epoch
        ):
            fence(g, member_id, topics)
            fenced.append(member_id)
    return fenced


def refresh_metadata(
    g: ConsumerGroup, topics: Mapping[str, TopicInfo], config: ConsumerGroupConfig
) -> bool:
    """The subscribed topics changed (created, deleted, partitions added): bump the group
    epoch and compute a new target. Returns whether anything changed."""
    metadata = _metadata(g, topics)
    if metadata == g.subscription_metadata:
        return False
    g.subscription_metadata = metadata
    g.group_epoch += 1
    compute_target(g, topics, config)
    return True
