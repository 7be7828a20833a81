"""Classic-protocol members inside a consumer group (KIP-848 online migration): Kafka 4.2's
``classicGroupJoinToConsumerGroup``, ``classicGroupSyncToConsumerGroup``,
``classicGroupHeartbeatToConsumerGroup`` and ``classicGroupLeaveToConsumerGroup``, as pure
functions of a ``ConsumerGroup``, the topics and ``now_ms``.

Theory of operation
-------------------
A classic consumer (JoinGroup/SyncGroup/Heartbeat/LeaveGroup, protocol type ``consumer``) may
join a consumer group. It is a ``ConsumerGroupMember`` like the others, with
``ClassicMemberMetadata`` (its session timeout and JoinGroup protocols); the group's
server-side assignor assigns it partitions, and its generation is its member epoch.

* JoinGroup does what a consumer heartbeat does (coordinator.consumer_group.heartbeat): the
  member is created or updated from its embedded subscription (topics, rack, owned partitions),
  the group epoch is bumped when its subscription or the subscribed topics changed, a new
  target assignment is computed, and the member reconciles towards it; partitions another
  member still owns are not given. It is answered at once (after the records are written)
  with its member epoch as the generation, the first of its protocols, and no leader among the
  members, so the client syncs as a follower. It must send SyncGroup within its rebalance
  timeout (the sync timer), and its session times out after its own session timeout. A member
  must support a protocol every classic member of the group supports (else
  INCONSISTENT_GROUP_PROTOCOL); a new dynamic member of JoinGroup v4+ first gets
  MEMBER_ID_REQUIRED (no pending member is kept, as in Kafka).
* SyncGroup answers the member's current assignment (serialized in its metadata's version),
  unless the group epoch moved past its epoch (REBALANCE_IN_PROGRESS: rejoin; not while it
  is revoking, UNREVOKED_PARTITIONS).
* Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin: the group epoch moved
  past its epoch, it must revoke partitions, or partitions it waited for were released. Then
  it must rejoin within its rebalance timeout (the join timer).
* LeaveGroup removes the members (dynamic ones by id, static ones by instance id), whichever
  protocol they use, and bumps the group epoch.

A JoinGroup, SyncGroup or Heartbeat from a member using the consumer protocol is
UNKNOWN_MEMBER_ID ("does not use the classic protocol"). Nothing changes before every check passed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from kio.schema.errors import ErrorCode

from coordinator.consumer_group import heartbeat as hb
from coordinator.consumer_group import regexes
from coordinator.consumer_group.consumer_protocol import (
    ConsumerProtocolError,
    decode_subscription,
    encode_assignment,
    version_of,
)
from coordinator.consumer_group.model import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    TopicInfo,
)
from coordinator.consumer_group.reconcile import FencedMember, next_member
from coordinator.group.members import JoinRequest, JoinResult, SyncResult

E = ErrorCode
CONSUMER_PROTOCOL_TYPE = "consumer"


def _find(
    g: ConsumerGroup, member_id: str, instance_id: str | None
) -> ConsumerGroupMember | ErrorCode:
    """Kafka's validateConsumerGroupMember then throwIfMemberDoesNotUseClassicProtocol."""
    if instance_id is None:
        m = g.members.get(member_id)
        if m is None:
            return E.unknown_member_id
    else:
        m = g.static_member(instance_id)
        if m is None:
            return E.unknown_member_id
        if m.member_id != member_id:
            return E.fenced_instance_id
    if m.classic is None:
        return E.unknown_member_id
    return m


def join(
    g: ConsumerGroup,
    req: JoinRequest,
    topics: Mapping[str, TopicInfo],
    config: hb.ConsumerGroupConfig,
    now_ms: int,
    make_member_id: Callable[[], str] = hb.new_member_id,
) -> JoinResult:
    member_id = req.member_id or make_member_id()
    if member_id not in g.members and len(g.members) >= config.max_size:
        return JoinResult(E.group_max_size_reached, member_id)
    names = {n for n, _ in req.protocols}
    if not g.supports_classic_protocols(req.protocol_type, names):
        return JoinResult(E.inconsistent_group_protocol, member_id)
    if not req.member_id and req.group_instance_id is None and req.require_known_member_id:
        return JoinResult(E.member_id_required, member_id)
    try:
        sub = decode_subscription(req.protocols[0][1])
    except ConsumerProtocolError:
        return JoinResult(E.unknown_server_error, member_id)  # Kafka: IllegalStateException
    # -- the member (Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember) ----------
    existing = g.static_member(req.group_instance_id)
    member: ConsumerGroupMember
    if req.group_instance_id is None:
        member = g.members.get(member_id) or ConsumerGroupMember(member_id)
    elif not req.member_id:  # a static member (re)joining with no member id
        if existing is None:
            member = ConsumerGroupMember(member_id)
        else:
            member = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
    else:
        if existing is None:
            return JoinResult(E.unknown_member_id, member_id)
        if existing.member_id != member_id:
            return JoinResult(E.fenced_instance_id, member_id)
        member = existing
    owned = tuple((topics[t].topic_id, parts) for t, parts in sub.owned_partitions if t in topics)
    # -- 1. the member and the group epoch -------------------------------------------------
    if existing is not None and existing.member_id != member_id:  # replaced static member
        old_target = g.target.get(existing.member_id, {})
        g.remove_member(existing.member_id)
        g.target[member_id] = old_target
    updated = replace(
        member,
        instance_id=req.group_instance_id or member.instance_id,
        rack_id=sub.rack_id if sub.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(
            req.rebalance_timeout_ms
            if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms
        ),
        # a set in Kafka: the same names in another order change nothing
        subscribed_topic_names=(
            sub.topics
            if set(sub.topics) != set(member.subscribed_topic_names)
            else member.subscribed_topic_names
        ),
        client_id=req.client_id,
        client_host=req.client_host,
        classic=ClassicMemberMetadata(req.session_timeout_ms, req.protocols),
    )
    subscription_changed = updated.subscribed_topic_names != member.subscribed_topic_names
    bump = subscription_changed
    g.update_member(updated)
    metadata = hb.subscription_metadata(g, topics)
    if metadata != g.subscription_metadata:
        g.subscription_metadata = metadata
        bump = True
    if bump:
        g.group_epoch += 1
    # -- 2. the target assignment ----------------------------------------------------------
    if g.group_epoch > g.assignment_epoch:
        hb.compute_target(g, topics, config)
    # -- 3. reconciliation -----------------------------------------------------------------
    reconciled = updated
    # a changed subscription is checked at once (Kafka 4.2: hasMemberSubscriptionChanged)
    if subscription_changed or not updated.is_reconciled_to(g.assignment_epoch):
        try:
            reconciled = next_member(
                updated,
                g.assignment_epoch,
                g.target.get(member_id, {}),
                g.partition_epoch,
                owned,
                hb.subscribed_ids(updated, topics, g),
                subscription_changed,
            )
        except FencedMember:
            return JoinResult(E.fenced_member_epoch, member_id)
        g.update_member(reconciled)
    g.join_deadlines.pop(member_id, None)
    g.session_deadlines[member_id] = now_ms + req.session_timeout_ms
    g.sync_deadlines[member_id] = now_ms + max(req.rebalance_timeout_ms, 0)
    return JoinResult(
        E.none,
        member_id,
        reconciled.member_epoch,
        CONSUMER_PROTOCOL_TYPE,
        req.protocols[0][0],
        leader="",
    )


def _schedule_join(g: ConsumerGroup, m: ConsumerGroupMember, now_ms: int) -> None:
    """Kafka's scheduleConsumerGroupJoinTimeoutIfAbsent."""
    g.join_deadlines.setdefault(m.member_id, now_ms + max(m.rebalance_timeout_ms, 0))


def sync(
    g: ConsumerGroup,
    member_id: str,
    instance_id: str | None,
    generation: int,
    protocol_type: str | None,
    protocol_name: str | None,
    topic_names: Mapping[uuid.UUID, str],
    now_ms: int,
) -> SyncResult:
    found = _find(g, member_id, instance_id)
    if isinstance(found, ErrorCode):
        return SyncResult(found)
    m = found
    assert m.classic is not None
    if generation != m.member_epoch:
        return SyncResult(E.illegal_generation)
    name = m.classic.supported_protocols[0][0] if m.classic.supported_protocols else ""
    if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
        protocol_name is not None and protocol_name != name
    ):
        return SyncResult(E.inconsistent_group_protocol)
    if g.group_epoch > m.member_epoch and m.state is not MemberState.UNREVOKED_PARTITIONS:
        _schedule_join(g, m, now_ms)
        return SyncResult(E.rebalance_in_progress)
    g.sync_deadlines.pop(m.member_id, None)
    g.session_deadlines[m.member_id] = now_ms + m.classic.session_timeout_ms
    parts = {topic_names[t]: ps for t, ps in m.assigned.items() if t in topic_names and ps}
    try:
        version = version_of(m.classic.supported_protocols[0][1])
    except (ConsumerProtocolError, IndexError):
        return SyncResult(E.unknown_server_error)
    return SyncResult(E.none, protocol_type, protocol_name, encode_assignment(parts, version))


def heartbeat(
    g: ConsumerGroup, member_id: str, instance_id: str | None, generation: int, now_ms: int
) -> ErrorCode:
    found = _find(g, member_id, instance_id)
    if isinstance(found, ErrorCode):
        return found
    m = found
    assert m.classic is not None
    if generation != m.member_epoch:
        return E.illegal_generation
    g.session_deadlines[m.member_id] = now_ms + m.classic.session_timeout_ms
    if (
        m.member_epoch < g.group_epoch
        or m.state is MemberState.UNREVOKED_PARTITIONS
        or (
            m.state is MemberState.UNRELEASED_PARTITIONS
            and not g.waiting_on_unreleased_partition(m)
        )
    ):
        _schedule_join(g, m, now_ms)
        return E.rebalance_in_progress
    return E.none


def leaving(
    g: ConsumerGroup, members: Iterable[tuple[str, str | None]]
) -> list[tuple[ErrorCode, str | None]]:
    """Per (member id, instance id) of a LeaveGroup: its code and the id of the member it
    removes (None when refused). Any member leaves, whichever protocol it uses: Kafka's
    classicGroupLeaveToConsumerGroup checks none (an admin removes a consumer-protocol static
    member by instance id with the member id "")."""
    out: list[tuple[ErrorCode, str | None]] = []
    for member_id, instance_id in members:
        if instance_id is None:
            m = g.members.get(member_id)
            if m is None:
                out.append((E.unknown_member_id, None))
                continue
        else:
            m = g.static_member(instance_id)
            if m is None:
                out.append((E.unknown_member_id, None))
                continue
            if member_id and m.member_id != member_id:
                out.append((E.fenced_instance_id, None))
                continue
        out.append((E.none, m.member_id))
    return out


def leave(
    g: ConsumerGroup,
    members: Iterable[tuple[str, str | None]],
    topics: Mapping[str, TopicInfo],
) -> list[tuple[str, ErrorCode]]:
    """One (member id, code) per (member id, instance id) of the LeaveGroup, the member id as
    the request gave it (Kafka echoes it, "" for an admin's removal by instance id); the
    removed members' group epoch bump is one, and a regex none of the others uses is
    forgotten (Kafka's consumerGroupFenceMembers)."""
    members = list(members)
    decided = leaving(g, members)
    removed = {mid for _, mid in decided if mid is not None}
    for mid in removed:
        g.remove_member(mid)
    if removed:
        for regex in set(g.resolved_regexes) - regexes.used(g):
            del g.resolved_regexes[regex]
        g.subscription_metadata = hb.subscription_metadata(g, topics)
        g.group_epoch += 1
    return [(member_id, code) for (member_id, _), (code, _) in zip(members, decided, strict=True)]
