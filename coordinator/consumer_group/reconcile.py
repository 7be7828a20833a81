"""Incremental reconciliation of one member towards its target assignment: Kafka's
``CurrentAssignmentBuilder``, line for line.

Theory of operation
-------------------
A member moves through three states (``MemberState``):

STABLE: the member owns exactly what it was given at its epoch. A newer target assignment
  epoch starts the next step.
UNREVOKED_PARTITIONS: the member must give up ``pending_revocation`` first. It keeps its
  epoch until its heartbeat no longer lists any of them as owned (a heartbeat without the
  owned list counts as still owning them); then it moves to epoch + 1 and on towards the
  target. The runtime bounds this state by the member's rebalance timeout.
UNRELEASED_PARTITIONS: the member is at the target epoch but some of its target partitions
  are still owned (assigned or pending revocation) by another member; each heartbeat assigns
  those that have been released since.

A partition is never given to a member while another member owns it: that is the invariant
that keeps a partition from being consumed twice.

A member is never given (and keeps no) partitions of a topic it does not subscribe to
(``subscribed``, its topic ids): when its subscription changed in this heartbeat, a STABLE
member at the target epoch or an UNREVOKED_PARTITIONS member still owning partitions to
revoke gives up those topics at once (Kafka 4.2's ``withHasSubscriptionChanged``,
``updateCurrentAssignment``); they join its partitions pending revocation.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

from coordinator.consumer_group.model import Assignment, ConsumerGroupMember, MemberState

Owned = Sequence[tuple[uuid.UUID, Sequence[int]]] | None  # as the heartbeat lists them
PartitionEpoch = Callable[[uuid.UUID, int], int]


class FencedMember(Exception):
    """The member is in an unknown state and must rejoin (FENCED_MEMBER_EPOCH)."""


def owns_any(owned: Owned, partitions: Assignment) -> bool:
    """Kafka's ownsRevokedPartitions: a null owned list owns everything."""
    if owned is None:
        return True
    return any(p in partitions.get(t, ()) for t, parts in owned for p in parts)


def next_member(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: Owned,
    subscribed: Collection[uuid.UUID],
    subscription_changed: bool = False,
) -> ConsumerGroupMember:
    """The member's next state (or ``member`` itself when it cannot progress)."""
    if member.state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _compute(
                member,
                member.member_epoch,
                target_epoch,
                target,
                partition_epoch,
                owned,
                subscribed,
            )
        if subscription_changed:
            return _unsubscribed_revoked(member, owned, subscribed)
        return member
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.pending_revocation):
            if subscription_changed:
                return _unsubscribed_revoked(member, owned, subscribed)
            return member
        return _compute(
            member,
            member.member_epoch + 1,
            target_epoch,
            target,
            partition_epoch,
            owned,
            subscribed,
        )
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _compute(
            member, member.member_epoch, target_epoch, target, partition_epoch, owned, subscribed
        )
    if owned is None or owned:
        raise FencedMember(
            "The consumer group member is in a unknown state. "
            "The member must abandon all its partitions and rejoin."
        )
    return _compute(member, target_epoch, target_epoch, target, partition_epoch, owned, subscribed)


def _unsubscribed_revoked(
    member: ConsumerGroupMember, owned: Owned, subscribed: Collection[uuid.UUID]
) -> ConsumerGroupMember:
    """Kafka's updateCurrentAssignment: the partitions of topics the member no longer
    subscribes to leave its assignment for its partitions pending revocation (the member
    moves to UNREVOKED_PARTITIONS if it still owns any of those)."""
    gone = {t: ps for t, ps in member.assigned.items() if t not in subscribed}
    if not gone:
        return member
    assigned = {t: ps for t, ps in member.assigned.items() if t in subscribed}
    revoking = dict(member.pending_revocation)
    for topic_id, parts in gone.items():
        revoking[topic_id] = revoking.get(topic_id, frozenset()) | parts
    if owns_any(owned, revoking):
        return replace(
            member,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=assigned,
            pending_revocation=revoking,
        )
    return replace(member, assigned=assigned)


def _with_epoch(m: ConsumerGroupMember, epoch: int, **changes: object) -> ConsumerGroupMember:
    """Kafka's Builder.updateMemberEpoch: the previous epoch becomes the current one."""
    return replace(m, previous_member_epoch=m.member_epoch, member_epoch=epoch, **changes)  # type: ignore[arg-type]


def _compute(
    member: ConsumerGroupMember,
    member_epoch: int,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: Owned,
    subscribed: Collection[uuid.UUID],
) -> ConsumerGroupMember:
    has_unreleased = False
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    pending: dict[uuid.UUID, frozenset[int]] = {}
    for topic_id in {*target, *member.assigned}:
        # a topic the member no longer subscribes to: its target there counts as empty
        want = target.get(topic_id, frozenset()) if topic_id in subscribed else frozenset()
        have = member.assigned.get(topic_id, frozenset())
        keep = have & want
        revoke = have - keep
        to_assign = want - keep
        # free: nobody owns it, or this member only as a partition it is revoking (its owner
        # is updated after the reconciliation; KAFKA-19449)
        mine = member.pending_revocation.get(topic_id, frozenset())
        free = frozenset(p for p in to_assign if partition_epoch(topic_id, p) == -1 or p in mine)
        has_unreleased = has_unreleased or free != to_assign
        if keep:
            assigned[topic_id] = keep
        if revoke:
            revoking[topic_id] = revoke
        if free:
            pending[topic_id] = free
    if revoking and owns_any(owned, revoking):
        return _with_epoch(
            member,
            member_epoch,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=assigned,
            pending_revocation=revoking,
        )
    if pending:
        for topic_id, parts in pending.items():
            assigned[topic_id] = assigned.get(topic_id, frozenset()) | parts
        state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
        return _with_epoch(
            member, target_epoch, state=state, assigned=assigned, pending_revocation={}
        )
    state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
    return _with_epoch(member, target_epoch, state=state, assigned=assigned, pending_revocation={})
