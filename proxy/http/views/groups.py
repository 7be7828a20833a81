"""Consumer groups: members and their assignments, committed and pending (transactional)
offsets, and the lag of each committed offset against the high watermark and against the last
stable offset (the lag a read_committed consumer really has: it cannot read past the LSO).

Both kinds of group are shown: classic groups (JoinGroup/SyncGroup; generation, the assignment
the leader computed, decoded from the consumer protocol) and consumer-protocol groups (KIP-848,
type "consumer": group epoch as the generation, the target assignment epoch, each member's
epoch, reconciliation state, current and target assignment, as ConsumerGroupDescribe shows
them). Partitions are named by topic; a topic no longer there is left out, as Kafka's describe
does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

from coordinator.consumer_group.model import Assignment, ConsumerGroup
from storage.api import TopicPartition

if TYPE_CHECKING:
    from proxy.broker import Broker


@dataclass(frozen=True, slots=True)
class MemberRow:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[TopicPartition, ...] | None  # None: not a consumer-protocol assignment
    # consumer-protocol groups (KIP-848) only: None in classic groups
    member_epoch: int | None = None
    member_state: str | None = None  # stable, unrevoked_partitions, unreleased_partitions
    target: tuple[TopicPartition, ...] | None = None
    pending_revocation: tuple[TopicPartition, ...] = ()
    subscription: str = ""  # topic names, or the regex


@dataclass(frozen=True, slots=True)
class PendingOffset:
    producer_id: int
    offset: int


@dataclass(frozen=True, slots=True)
class OffsetRow:
    tp: TopicPartition
    committed: int | None
    pending: tuple[PendingOffset, ...]
    high_watermark: int | None  # None: the partition does not exist
    last_stable: int | None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.high_watermark is None:
            return None
        return max(self.high_watermark - self.committed, 0)

    @property
    def lag_committed(self) -> int | None:
        """Lag against the LSO: what a read_committed consumer can still read."""
        if self.committed is None or self.last_stable is None:
            return None
        return max(self.last_stable - self.committed, 0)


@dataclass(frozen=True, slots=True)
class GroupRow:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    generation: int
    members: tuple[MemberRow, ...]
    offsets: tuple[OffsetRow, ...]
    group_type: str = "classic"  # or "consumer" (KIP-848)
    assignment_epoch: int | None = None  # consumer groups: the target assignment's epoch


def consumer_assignment(data: bytes) -> tuple[TopicPartition, ...] | None:
    """The partitions of a ConsumerProtocolAssignment (any version: v0 layout first, the
    rest is user data and, from v1, nothing we show); None if it does not parse."""
    if not data:
        return ()
    try:
        pos = 2
        (topics,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out = []
        for _ in range(topics):
            (n,) = struct.unpack_from(">h", data, pos)
            topic = bytes(data[pos + 2 : pos + 2 + n]).decode()
            pos += 2 + n
            (count,) = struct.unpack_from(">i", data, pos)
            pos += 4
            for (p,) in struct.iter_unpack(">i", data[pos : pos + 4 * count]):
                out.append(TopicPartition(topic, p))
            pos += 4 * count
        return tuple(out)
    except (struct.error, UnicodeDecodeError, ValueError):
        return None


def group_ids(broker: Broker) -> list[str]:
    g = broker.groups
    live = {gid for gid, cg in g.consumer_groups.items() if not cg.dead}
    return sorted(set(g.groups) | live | set(g.offsets.committed))


def _by_name(broker: Broker, a: Assignment) -> tuple[TopicPartition, ...]:
    out = []
    for topic_id, parts in a.items():
        topic = broker.topics.by_id(topic_id)
        if topic is not None:
            out += [TopicPartition(topic.name, p) for p in parts]
    return tuple(sorted(out))


def _consumer_members(broker: Broker, g: ConsumerGroup) -> tuple[MemberRow, ...]:
    return tuple(
        MemberRow(
            m.member_id,
            m.instance_id,
            m.client_id,
            m.client_host,
            _by_name(broker, m.assigned),
            member_epoch=m.member_epoch,
            member_state=m.state.value,
            target=_by_name(broker, g.target.get(m.member_id, {})),
            pending_revocation=_by_name(broker, m.pending_revocation),
            subscription=(
                f"/{m.subscribed_topic_regex}/"
                if m.subscribed_topic_regex
                else ", ".join(m.subscribed_topic_names)
            ),
        )
        for m in sorted(g.members.values(), key=lambda m: m.member_id)
    )


def group_row(broker: Broker, group_id: str) -> GroupRow | None:
    coordinator = broker.groups
    group = coordinator.groups.get(group_id)
    consumer = coordinator.consumer_groups.get(group_id)
    if consumer is not None and consumer.dead:
        consumer = None
    committed = coordinator.offsets.committed.get(group_id, {})
    pending: dict[TopicPartition, list[PendingOffset]] = {}
    for pid, by_group in coordinator.offsets.pending.items():
        for tp, om in by_group.get(group_id, {}).items():
            pending.setdefault(tp, []).append(PendingOffset(pid, om.offset))
    if group is None and consumer is None and not committed and not pending:
        return None
    rows = []
    for tp in sorted(set(committed) | set(pending)):
        p = broker.topics.partition(tp.topic, tp.partition)
        live = p is not None and not p.deleted
        have = committed.get(tp)
        rows.append(
            OffsetRow(
                tp=tp,
                committed=have.offset if have is not None else None,
                pending=tuple(pending.get(tp, ())),
                high_watermark=p.high_watermark if live and p is not None else None,
                last_stable=p.last_stable_offset if live and p is not None else None,
            )
        )
    members: tuple[MemberRow, ...] = ()
    if group is not None:
        members = tuple(
            MemberRow(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                consumer_assignment(m.assignment)
                if (group.protocol_type or "") == "consumer"
                else None,
            )
            for m in group.members.values()
        )
    if consumer is not None:
        return GroupRow(
            group_id=group_id,
            state=consumer.state.value,
            protocol_type="consumer",
            protocol=coordinator.preferred_assignor(consumer),
            generation=consumer.group_epoch,
            members=_consumer_members(broker, consumer),
            offsets=tuple(rows),
            group_type="consumer",
            assignment_epoch=consumer.assignment_epoch,
        )
    return GroupRow(
        group_id=group_id,
        state=group.state.value if group is not None else "Empty (offsets only)",
        protocol_type=(group.protocol_type or "") if group is not None else "",
        protocol=(group.protocol_name or "") if group is not None else "",
        generation=group.generation if group is not None else 0,
        members=members,
        offsets=tuple(rows),
    )


def group_rows(broker: Broker) -> list[GroupRow]:
    return [r for gid in group_ids(broker) if (r := group_row(broker, gid)) is not None]
