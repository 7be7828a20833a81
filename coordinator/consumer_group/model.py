"""The values a consumer group (KIP-848) is made of: members, assignments, the group's epochs.

Plain data plus the bookkeeping Kafka's ``ConsumerGroup`` keeps in step with its members
(static members by instance id, the epoch of each partition's current owner, the group state).
Decisions are in ``coordinator.consumer_group.heartbeat`` and ``reconcile``.

An ``Assignment`` maps a topic id to the partitions of that topic; it is never mutated in
place (new ones are built), so members can share them.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

Assignment = Mapping[uuid.UUID, frozenset[int]]
EMPTY: Assignment = {}

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
NEVER = 2**62


class MemberState(enum.Enum):
    """Kafka's MemberState: where a member is in reconciling towards its target assignment."""

    STABLE = "stable"  # reconciled to the target assignment epoch, or waiting for a new one
    UNREVOKED_PARTITIONS = "unrevoked_partitions"  # must revoke partitions before progressing
    UNRELEASED_PARTITIONS = "unreleased_partitions"  # waits for partitions others still own
    UNKNOWN = "unknown"


class ConsumerGroupState(enum.Enum):
    """Kafka's ConsumerGroupState, derived from the members and the epochs (never set)."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"  # the group epoch is ahead of the target assignment epoch
    RECONCILING = "Reconciling"  # some member is not reconciled to the target assignment
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """What the coordinator knows of a topic: its id and partition count."""

    name: str
    topic_id: uuid.UUID
    partitions: int


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    """Kafka's ResolvedRegularExpression: what a regex matched, against which topics (a digest
    standing for Kafka's metadata image version, see regexes.py) and when (wall clock, ms)."""

    topics: frozenset[str]
    version: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    state: MemberState = MemberState.STABLE
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch


def owned_partitions(a: Assignment) -> Iterable[tuple[uuid.UUID, int]]:
    for topic_id, parts in a.items():
        for p in parts:
            yield topic_id, p


def count(a: Assignment) -> int:
    return sum(len(p) for p in a.values())


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0  # the target assignment's epoch
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> target
    # (topic id, partition) -> the epoch of the member that owns it (assigned or pending
    # revocation); a partition absent here is free (Kafka's currentPartitionEpoch -1)
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    # topic name -> what it was when the target assignment was last computed
    subscription_metadata: dict[str, TopicInfo] = field(default_factory=dict)
    # resolved server-side regexes (ConsumerGroupRegularExpression records, regexes.py)
    resolved_regexes: dict[str, ResolvedRegex] = field(default_factory=dict)
    regex_version: int = 0  # the topics' version at the last refresh (in memory)
    regex_refreshed_at: int = 0  # when the resolutions were last refreshed (ms, in memory)
    session_deadlines: dict[str, int] = field(default_factory=dict)  # member id -> ms
    # member id -> (member epoch it was scheduled for, deadline ms)
    rebalance_deadlines: dict[str, tuple[int, int]] = field(default_factory=dict)
    # a timer whose fencing records failed to be written is tried again no sooner than this
    # (ms; Kafka's CoordinatorTimer reschedules a failed timeout operation after a backoff)
    retry_at: int = 0
    dead: bool = False

    @property
    def state(self) -> ConsumerGroupState:
        """Kafka's ConsumerGroup.maybeUpdateGroupState."""
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def update_member(self, new: ConsumerGroupMember) -> None:
        """Kafka's ConsumerGroup.updateMember: the member replaces its old self, and the
        partition epochs follow its assigned and pending-revocation partitions."""
        old = self.members.get(new.member_id)
        if old is not None:
            self._drop_partition_epochs(old)
        self.members[new.member_id] = new
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id
        for tp in owned_partitions(new.assigned):
            self.partition_epochs[tp] = new.member_epoch
        for tp in owned_partitions(new.pending_revocation):
            self.partition_epochs[tp] = new.member_epoch

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        old = self.members.pop(member_id, None)
        if old is None:
            return None
        self._drop_partition_epochs(old)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
        self.target.pop(member_id, None)
        self.session_deadlines.pop(member_id, None)
        self.rebalance_deadlines.pop(member_id, None)
        return old

    def _drop_partition_epochs(self, m: ConsumerGroupMember) -> None:
        for tp in (*owned_partitions(m.assigned), *owned_partitions(m.pending_revocation)):
            if self.partition_epochs.get(tp) == m.member_epoch:
                del self.partition_epochs[tp]

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        if instance_id is None:
            return None
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def next_deadline(self) -> int:
        """When a timer of the group is next due (never before ``retry_at``)."""
        due = min(
            (
                *self.session_deadlines.values(),
                *(at for _, at in self.rebalance_deadlines.values()),
            ),
            default=NEVER,
        )
        return max(due, self.retry_at)
