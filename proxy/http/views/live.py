"""What the event stream watches: a cheap fingerprint of everything the pages show that moves
(offsets, transaction and group states). A page reloads its content when it changes."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from proxy.broker import Broker


def fingerprint(broker: Broker) -> int:
    parts: list[object] = []
    for topic in broker.topics:
        for p in topic.partitions:
            parts.append(
                (p.tp, p.log_start_offset, p.high_watermark, p.last_stable_offset, p.deleted)
            )
    for tid, m in broker.txns.cache.items():
        parts.append((tid, m.state, m.producer_id, m.producer_epoch, m.pending_state))
    for gid, g in broker.groups.groups.items():
        parts.append((gid, g.state, g.generation, len(g.members)))
    for gid, cg in broker.groups.consumer_groups.items():
        members = tuple((m.member_id, m.member_epoch, m.state) for m in cg.members.values())
        parts.append((gid, cg.group_epoch, cg.assignment_epoch, cg.dead, members))
    parts.append(sum(len(o) for o in broker.groups.offsets.committed.values()))
    parts.append(len(broker.groups.offsets.pending))
    return hash(tuple(parts))
