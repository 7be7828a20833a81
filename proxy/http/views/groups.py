"""Consumer groups: members and their assignments, committed and pending (transactional)
offsets, and the lag of each committed offset against the high watermark and against the last
stable offset (the lag a read_committed consumer really has: it cannot read past the LSO)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

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
    return sorted(set(g.groups) | set(g.offsets.committed))


def group_row(broker: Broker, group_id: str) -> GroupRow | None:
    coordinator = broker.groups
    group = coordinator.groups.get(group_id)
    committed = coordinator.offsets.committed.get(group_id, {})
    pending: dict[TopicPartition, list[PendingOffset]] = {}
    for pid, by_group in coordinator.offsets.pending.items():
        for tp, om in by_group.get(group_id, {}).items():
            pending.setdefault(tp, []).append(PendingOffset(pid, om.offset))
    if group is None and not committed and not pending:
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
