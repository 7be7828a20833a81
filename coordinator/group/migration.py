"""Online migration between classic and consumer groups (KIP-848): Kafka 4.2's
``GroupMetadataManager`` ``validateOnlineUpgrade`` / ``convertToConsumerGroup`` and
``validateOnlineDowngradeWithFencedMembers`` / ``convertToClassicGroup``, with
``ConsumerGroup.fromClassicGroup`` and ``ClassicGroup.fromConsumerGroup``. Pure: groups in,
groups out; the runtime (consumer_api.py) writes the records and swaps the groups.

Theory of operation
-------------------
``group.consumer.migration.policy`` (Kafka's default: ``bidirectional``) allows:

* *Upgrade* (``upgrade``, ``bidirectional``): a ConsumerGroupHeartbeat joining (epoch 0) a
  non-empty classic group whose protocol type is ``consumer`` (and with no more members than
  ``group.consumer.max.size``) turns it into a consumer group. Every classic member becomes a
  member of it that uses the classic protocol (its session timeout and JoinGroup protocols kept
  in ``ClassicMemberMetadata``), STABLE at the group's generation, its last assignment as both
  its current and target assignment; group epoch = target epoch = the generation. Parked
  JoinGroups and SyncGroups of the classic group are answered REBALANCE_IN_PROGRESS. The
  heartbeat then runs on the new group (its subscription bumps the group epoch, so the classic
  members learn of the rebalance from their next Heartbeat). The records: the classic group's
  tombstone, then the consumer group's records. If a member's embedded protocol does not parse,
  the heartbeat is GROUP_ID_NOT_FOUND (Kafka's message) and the group stays classic.
* *Downgrade* (``downgrade``, ``bidirectional``): when members leave (epoch -1), are fenced
  (session or rebalance timeout) or are removed by a LeaveGroup (several at once) and other
  members remain, all using the classic protocol (no more than ``group.max.size``; the leaving
  ones may use either protocol, as in Kafka 4.2), the group becomes a
  classic group instead: STABLE at generation = group epoch, the remaining members with their
  target assignments serialized in the version of their protocol metadata, protocol selected
  by vote; then a rebalance starts (PreparingRebalance). The records: the consumer group's
  tombstones, then the classic group's metadata record.

  A classic JoinGroup of a static member that replaces the last consumer-protocol member (its
  instance id) downgrades too (``validateOnlineDowngradeWithReplacedMemberId``): the joining
  member takes the replaced one's target assignment, and the group stays STABLE (no
  rebalance); its JoinGroup is answered as inside the consumer group (generation: its member
  epoch), as Kafka answers it.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Collection, Mapping

from kio.schema.errors import ErrorCode

from coordinator.consumer_group.consumer_protocol import (
    ConsumerProtocolError,
    decode_assignment,
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
from coordinator.group.classic import ClassicGroup
from coordinator.group.members import GroupConfig, JoinResult, Member, SyncResult
from coordinator.group.state import GroupState

E = ErrorCode
CONSUMER_PROTOCOL_TYPE = "consumer"


class MigrationPolicy(enum.Enum):
    """Kafka's ConsumerGroupMigrationPolicy."""

    DISABLED = "disabled"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    BIDIRECTIONAL = "bidirectional"

    @classmethod
    def parse(cls, value: str) -> MigrationPolicy:
        return cls(value.strip().lower())

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.UPGRADE, MigrationPolicy.BIDIRECTIONAL)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.DOWNGRADE, MigrationPolicy.BIDIRECTIONAL)


# -- upgrade -----------------------------------------------------------------------------------


def can_upgrade(classic: ClassicGroup, policy: MigrationPolicy, consumer_max_size: int) -> bool:
    """Kafka's validateOnlineUpgrade (the group is known to be non-empty)."""
    return (
        policy.upgrade_enabled
        and classic.protocol_type == CONSUMER_PROTOCOL_TYPE
        and len(classic.members) <= consumer_max_size
    )


def upgrade_refusal(group_id: str) -> str:
    return (
        f"Cannot upgrade the classic group {group_id} to consumer group because the embedded "
        "consumer protocol is malformed."
    )


def from_classic(
    classic: ClassicGroup, topics: Mapping[str, TopicInfo], now_ms: int
) -> ConsumerGroup | None:
    """Kafka's ConsumerGroup.fromClassicGroup; None when some member's embedded protocol
    does not parse. Session deadlines are the classic members' session timeouts."""
    g = ConsumerGroup(classic.group_id)
    g.group_epoch = g.assignment_epoch = classic.generation
    for m in classic.members.values():
        # a group still in its first join phase has no protocol yet: its members' first one
        protocol = classic.protocol_name or (m.protocols[0][0] if m.protocols else "")
        try:
            sub = decode_subscription(m.metadata(protocol))
            owned = decode_assignment(m.assignment) if m.assignment else ()
        except ConsumerProtocolError:
            return None
        assigned: dict[uuid.UUID, frozenset[int]] = {}
        for name, parts in owned:
            if (t := topics.get(name)) is not None and parts:
                assigned[t.topic_id] = assigned.get(t.topic_id, frozenset()) | frozenset(parts)
        member = ConsumerGroupMember(
            m.member_id,
            instance_id=m.group_instance_id,
            rack_id=sub.rack_id,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=sub.topics,
            state=MemberState.STABLE,
            member_epoch=classic.generation,
            previous_member_epoch=classic.generation,
            assigned=assigned,
            classic=ClassicMemberMetadata(m.session_timeout_ms, m.protocols),
        )
        g.target[m.member_id] = assigned
        g.update_member(member)
        g.session_deadlines[m.member_id] = now_ms + m.session_timeout_ms
    return g


def answer_parked(classic: ClassicGroup) -> None:
    """Kafka's completeAllJoinFutures / completeAllSyncFutures(REBALANCE_IN_PROGRESS)."""
    for mid, m in classic.members.items():
        if m.awaiting_join:
            m.awaiting_join = False
            classic.outbox.append((mid, JoinResult(E.rebalance_in_progress, mid)))
        if m.awaiting_sync:
            m.awaiting_sync = False
            classic.outbox.append((mid, SyncResult(E.rebalance_in_progress)))


# -- downgrade ---------------------------------------------------------------------------------


def should_downgrade(
    g: ConsumerGroup, leaving: Collection[str], policy: MigrationPolicy, classic_max_size: int
) -> bool:
    """Kafka 4.2's validateOnlineDowngradeWithFencedMembers: the members left once ``leaving``
    (ids of the group's members) are removed all use the classic protocol, are some, and
    are no more than ``group.max.size``. A leaving member may use either protocol (a group
    whose members all use the classic protocol downgrades when one of them leaves)."""
    remaining = [m for mid, m in g.members.items() if mid not in leaving]
    return (
        bool(remaining)
        and all(m.classic is not None for m in remaining)
        and policy.downgrade_enabled
        and len(remaining) <= classic_max_size
    )


def should_downgrade_replacing(
    g: ConsumerGroup, replaced_member_id: str, policy: MigrationPolicy, classic_max_size: int
) -> bool:
    """Kafka's validateOnlineDowngradeWithReplacedMemberId."""
    return (
        g.all_classic_except(replaced_member_id)
        and policy.downgrade_enabled
        and len(g.members) <= classic_max_size
    )


def to_classic(
    g: ConsumerGroup,
    leaving: Collection[str],
    topic_names: Mapping[uuid.UUID, str],
    config: GroupConfig,
    now_ms: int,
    joining: ConsumerGroupMember | None = None,
) -> ClassicGroup | None:
    """Kafka's ClassicGroup.fromConsumerGroup (STABLE, generation = group epoch, each member's
    target assignment serialized), without the ``leaving`` members (with ``joining``, the one
    member it replaces); None when a member's protocol metadata does not parse. The caller
    writes its record, then starts its rebalance (``prepare_rebalance``)."""
    classic = ClassicGroup(
        g.group_id,
        config,
        state=GroupState.STABLE,
        generation=g.group_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        state_timestamp_ms=now_ms,
    )
    for mid, m in g.members.items():
        if mid in leaving or m.classic is None:
            continue
        classic.add_member(
            Member(
                mid,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.classic.session_timeout_ms,
                CONSUMER_PROTOCOL_TYPE,
                m.classic.supported_protocols,
            ),
            now_ms,
        )
    if joining is not None and joining.classic is not None:
        classic.add_member(
            Member(
                joining.member_id,
                joining.instance_id,
                joining.client_id,
                joining.client_host,
                joining.rebalance_timeout_ms,
                joining.classic.session_timeout_ms,
                CONSUMER_PROTOCOL_TYPE,
                joining.classic.supported_protocols,
            ),
            now_ms,
        )
    classic.protocol_name = classic.select_protocol()
    for mid, cm in classic.members.items():
        parts: dict[str, frozenset[int]] = {}
        # a joining static member takes the target assignment of the member it replaces
        source = next(iter(leaving)) if joining is not None and mid == joining.member_id else mid
        for topic_id, ps in g.target.get(source, {}).items():
            if (name := topic_names.get(topic_id)) is not None and ps:
                parts[name] = ps
        try:
            version = version_of(cm.metadata(classic.protocol_name))
        except ConsumerProtocolError:
            return None
        cm.assignment = encode_assignment(parts, version)
    return classic
