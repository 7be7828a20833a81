"""A classic group as its ``GroupMetadataValue`` record in ``__consumer_offsets``, and back.

A group loaded from its record is STABLE with its members (their session timers start at load)
or EMPTY, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping

from coordinator.group.classic import ClassicGroup
from coordinator.group.members import GroupConfig, Member
from coordinator.group.records import GroupMetadataValue, MemberMetadata
from coordinator.group.state import GroupState


def group_value(
    g: ClassicGroup, wall_ms: int, assignments: Mapping[str, bytes] | None = None
) -> GroupMetadataValue:
    return GroupMetadataValue(
        protocol_type=g.protocol_type or "",
        generation=g.generation,
        protocol=g.protocol_name,
        leader=g.leader_id,
        current_state_timestamp=wall_ms,
        members=tuple(
            MemberMetadata(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(g.protocol_name),
                m.assignment if assignments is None else assignments.get(m.member_id, b""),
            )
            for m in g.members.values()
        ),
    )


def assignment_value(
    g: ClassicGroup, assignments: Mapping[str, bytes], wall_ms: int
) -> GroupMetadataValue:
    """The record the leader's SyncGroup writes (members missing from it get b"")."""
    return group_value(g, wall_ms, {mid: assignments.get(mid, b"") for mid in g.members})


def group_from_value(
    group_id: str, v: GroupMetadataValue, config: GroupConfig, now_ms: int
) -> ClassicGroup:
    g = ClassicGroup(group_id, config, generation=v.generation, protocol_name=v.protocol)
    g.protocol_type = v.protocol_type or None
    for mm in v.members:
        m = Member(
            mm.member_id,
            mm.group_instance_id,
            mm.client_id,
            mm.client_host,
            mm.rebalance_timeout if mm.rebalance_timeout >= 0 else mm.session_timeout,
            mm.session_timeout,
            v.protocol_type,
            ((v.protocol or "", mm.subscription),),
            assignment=mm.assignment,
        )
        g.add_member(m, now_ms)
    g.leader_id = v.leader if v.leader in g.members else g.leader_id
    g.state = GroupState.STABLE if g.members else GroupState.EMPTY
    return g
