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
class ClassicMemberMetadata:
    """What a member using the classic protocol inside a consumer group keeps (Kafka's
    ConsumerGroupMemberMetadataValue.ClassicMemberMetadata): its session timeout and the
    JoinGroup protocols it supports, (name, metadata) in its order of preference."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]


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
    classic: ClassicMemberMetadata | None = None  # None: the member uses the consumer protocol

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

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
    # classic members: the JoinGroup they owe after REBALANCE_IN_PROGRESS, the SyncGroup they
    # owe after a JoinGroup (member id -> deadline ms; Kafka's join and sync timers)
    join_deadlines: dict[str, int] = field(default_factory=dict)
    sync_deadlines: dict[str, int] = field(default_factory=dict)
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
        self.join_deadlines.pop(member_id, None)
        self.sync_deadlines.pop(member_id, None)
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

    def classic_members(self) -> list[ConsumerGroupMember]:
        return [m for m in self.members.values() if m.classic is not None]

    def supports_classic_protocols(self, protocol_type: str, names: set[str]) -> bool:
        """Kafka's ConsumerGroup.supportsClassicProtocols: a "consumer" protocol type, and a
        protocol every classic member supports (any, when the group is empty)."""
        if protocol_type != "consumer":
            return False
        if not self.members:
            return bool(names)
        classic = [{n for n, _ in m.classic.supported_protocols} for m in self.classic_members()]  # type: ignore[union-attr]
        return any(all(n in s for s in classic) for n in names)

    def all_classic_except(self, member_id: str) -> bool:
        """Kafka's allMembersUseClassicProtocolExcept."""
        m = self.members.get(member_id)
        return (
            m is not None
            and m.classic is None
            and all(x.classic is not None for k, x in self.members.items() if k != member_id)
        )

    def waiting_on_unreleased_partition(self, m: ConsumerGroupMember) -> bool:
        """Kafka's waitingOnUnreleasedPartition: a target partition the member does not own
        yet is still owned by another member."""
        if m.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, parts in self.target.get(m.member_id, {}).items():
            have = m.assigned.get(topic_id, frozenset())
            if any(p not in have and self.partition_epoch(topic_id, p) != -1 for p in parts):
                return True
        return False

    def due_members(self, now_ms: int) -> list[str]:
        """The members some timer of which has run out (``heartbeat.expire`` fences them)."""
        due = {mid for mid, at in self.session_deadlines.items() if at <= now_ms}
        due |= {
            mid
            for d in (self.join_deadlines, self.sync_deadlines)
            for mid, at in d.items()
            if at <= now_ms
        }
        due |= {
            mid
            for mid, (epoch, at) in self.rebalance_deadlines.items()
            if at <= now_ms
            and (m := self.members.get(mid)) is not None
            and m.state is MemberState.UNREVOKED_PARTITIONS
            and m.member_epoch == epoch
        }
        return sorted(mid for mid in due if mid in self.members)

    def next_deadline(self) -> int:
        """When a timer of the group is next due (never before ``retry_at``)."""
        due = min(
            (
                *self.session_deadlines.values(),
                *(at for _, at in self.rebalance_deadlines.values()),
                *self.join_deadlines.values(),
                *self.sync_deadlines.values(),
            ),
            default=NEVER,
        )
        return max(due, self.retry_at)
