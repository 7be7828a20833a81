"""Consumer groups (KIP-848) in ``__consumer_offsets``: Kafka's record formats, the records a
change writes, and their replay.

Theory of operation
-------------------
A group is stored as Kafka stores it, one compacted key per part (key = int16 record type, then
the group id and member id as int16-length strings; value = int16 version 0, then Kafka's
flexible encoding: compact strings and arrays, uuids, an empty tag section per struct):

====  ==========================================  =========================================
type  key                                         value
====  ==========================================  =========================================
3     ConsumerGroupMetadataKey (group)            the group epoch
4     ConsumerGroupPartitionMetadataKey (group)   the subscribed topics' id, name, partitions
5     ConsumerGroupMemberMetadataKey (g, member)  instance/rack/client id, client host,
                                                  topic names, regex, rebalance timeout,
                                                  server assignor
6     ConsumerGroupTargetAssignmentMetadataKey    the target assignment epoch
7     ConsumerGroupTargetAssignmentMemberKey      the member's target partitions
8     ConsumerGroupCurrentMemberAssignmentKey     member epoch, previous epoch, state,
                                                  assigned and pending-revocation partitions
16    ConsumerGroupRegularExpressionKey           the topic names it resolved to, the
      (group, regex)                              version (see regexes.py), the timestamp
====  ==========================================  =========================================

``changes(before, after)`` is the list of records that turns the stored ``before`` into
``after`` (a removed member's three keys are tombstoned; a deleted group's too), in Kafka's
order; ``replay`` applies one record to the groups, at load and nowhere else (a decision has
already changed the live group when its records are written, see consumer_api.py). Replay is
Kafka's: a current-assignment tombstone empties the member's assignment, a member-metadata
tombstone removes it, a group-epoch tombstone removes the group, a regex tombstone forgets
that resolution. A regex's records come before the group epoch's, as Kafka writes the
resolution and then bumps the epoch.

A member using the classic protocol (online migration, coordinator/group/migration.py) has
its ClassicMemberMetadata (session timeout, JoinGroup protocols) in the member record's tagged
field 0, as Kafka writes it: a nullable struct, so preceded by a presence varint (KIP-893).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable
from dataclasses import replace

from coordinator.consumer_group.model import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    ResolvedRegex,
    TopicInfo,
)

GROUP_EPOCH, PARTITION_METADATA, MEMBER, TARGET_EPOCH, TARGET_MEMBER, CURRENT = range(3, 9)
REGEX = 16  # ConsumerGroupRegularExpression (Kafka 4.0+)
CONSUMER_GROUP_TYPES = frozenset((*range(3, 9), REGEX))
Record = tuple[bytes, bytes | None]

_STATE_BYTES = {
    MemberState.STABLE: 0,
    MemberState.UNREVOKED_PARTITIONS: 1,
    MemberState.UNRELEASED_PARTITIONS: 2,
    MemberState.UNKNOWN: 127,
}
_STATES = {v: k for k, v in _STATE_BYTES.items()}


class ConsumerRecordError(ValueError):
    """A consumer-group record that does not parse."""


# -- writing -----------------------------------------------------------------------------------


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class _W:
    def __init__(self) -> None:
        self.out = bytearray()

    def i8(self, n: int) -> None:
        self.out += struct.pack(">b", n)

    def i16(self, n: int) -> None:
        self.out += struct.pack(">h", n)

    def i32(self, n: int) -> None:
        self.out += struct.pack(">i", n)

    def i64(self, n: int) -> None:
        self.out += struct.pack(">q", n)

    def key_str(self, s: str) -> None:
        b = s.encode()
        self.i16(len(b))
        self.out += b

    def str(self, s: str | None) -> None:
        if s is None:
            self.out += _uvarint(0)
            return
        b = s.encode()
        self.out += _uvarint(len(b) + 1)
        self.out += b

    def array(self, n: int) -> None:
        self.out += _uvarint(n + 1)

    def uuid(self, u: uuid.UUID) -> None:
        self.out += u.bytes

    def tags(self) -> None:
        self.out += _uvarint(0)

    def partitions(self, a: Assignment) -> None:
        items = sorted(a.items(), key=lambda kv: kv[0].bytes)
        self.array(len(items))
        for topic_id, parts in items:
            self.uuid(topic_id)
            self.array(len(parts))
            for p in sorted(parts):
                self.i32(p)
            self.tags()


def key(kind: int, group: str, member: str | None = None) -> bytes:
    w = _W()
    w.i16(kind)
    w.key_str(group)
    if member is not None:
        w.key_str(member)
    return bytes(w.out)


def _value() -> _W:
    w = _W()
    w.i16(0)
    return w


def epoch_value(epoch: int) -> bytes:
    w = _value()
    w.i32(epoch)
    w.tags()
    return bytes(w.out)


def partition_metadata_value(topics: dict[str, TopicInfo]) -> bytes:
    w = _value()
    w.array(len(topics))
    for name in sorted(topics):
        t = topics[name]
        w.uuid(t.topic_id)
        w.str(t.name)
        w.i32(t.partitions)
        w.array(0)  # PartitionMetadata: no racks on one node
        w.tags()
    w.tags()
    return bytes(w.out)


def member_value(m: ConsumerGroupMember) -> bytes:
    w = _value()
    w.str(m.instance_id)
    w.str(m.rack_id)
    w.str(m.client_id)
    w.str(m.client_host)
    w.array(len(m.subscribed_topic_names))
    for t in m.subscribed_topic_names:
        w.str(t)
    w.str(m.subscribed_topic_regex)
    w.i32(m.rebalance_timeout_ms)
    w.str(m.server_assignor)
    if m.classic is None:
        w.tags()
    else:  # ClassicMemberMetadata: tagged field 0
        c = _W()
        c.i32(m.classic.session_timeout_ms)
        c.array(len(m.classic.supported_protocols))
        for name, metadata in m.classic.supported_protocols:
            c.str(name)
            c.out += _uvarint(len(metadata) + 1) + metadata
            c.tags()
        c.tags()
        # a nullable struct as a tagged field: size + 1, a presence varint (1), the struct
        w.out += _uvarint(1) + _uvarint(0) + _uvarint(len(c.out) + 1) + _uvarint(1) + c.out
    return bytes(w.out)


def target_value(a: Assignment) -> bytes:
    w = _value()
    w.partitions(a)
    w.tags()
    return bytes(w.out)


def current_value(m: ConsumerGroupMember) -> bytes:
    w = _value()
    w.i32(m.member_epoch)
    w.i32(m.previous_member_epoch)
    w.i8(_STATE_BYTES[m.state])
    w.partitions(m.assigned)
    w.partitions(m.pending_revocation)
    w.tags()
    return bytes(w.out)


def regex_value(r: ResolvedRegex) -> bytes:
    w = _value()
    w.array(len(r.topics))
    for t in sorted(r.topics):
        w.str(t)
    w.i64(r.version)
    w.i64(r.timestamp_ms)
    w.tags()
    return bytes(w.out)


def _subscription(m: ConsumerGroupMember) -> tuple[object, ...]:
    return (
        m.instance_id,
        m.rack_id,
        m.client_id,
        m.client_host,
        m.subscribed_topic_names,
        m.subscribed_topic_regex,
        m.rebalance_timeout_ms,
        m.server_assignor,
        m.classic,
    )


def _current(m: ConsumerGroupMember) -> tuple[object, ...]:
    return (
        m.member_epoch,
        m.previous_member_epoch,
        m.state,
        dict(m.assigned),
        dict(m.pending_revocation),
    )


def changes(before: ConsumerGroup | None, after: ConsumerGroup | None) -> list[Record]:
    """The records that turn ``before`` (None: nothing stored) into ``after`` (None: the group
    is deleted)."""
    group = (after or before).group_id  # type: ignore[union-attr]
    old = before or ConsumerGroup(group)
    new = after or ConsumerGroup(group)
    out: list[Record] = []
    for mid in old.members:
        if mid not in new.members:
            out += [(key(CURRENT, group, mid), None), (key(TARGET_MEMBER, group, mid), None)]
            out.append((key(MEMBER, group, mid), None))
    for mid, m in new.members.items():
        was = old.members.get(mid)
        if was is None or _subscription(was) != _subscription(m):
            out.append((key(MEMBER, group, mid), member_value(m)))
    for regex in sorted(old.resolved_regexes.keys() - new.resolved_regexes.keys()):
        out.append((key(REGEX, group, regex), None))
    for regex, resolved in sorted(new.resolved_regexes.items()):
        if old.resolved_regexes.get(regex) != resolved:
            out.append((key(REGEX, group, regex), regex_value(resolved)))
    if old.subscription_metadata != new.subscription_metadata or (after is None and before):
        out.append(
            (
                key(PARTITION_METADATA, group),
                None if after is None else partition_metadata_value(new.subscription_metadata),
            )
        )
    if old.group_epoch != new.group_epoch or after is None:
        out.append(
            (key(GROUP_EPOCH, group), None if after is None else epoch_value(new.group_epoch))
        )
    for mid, a in new.target.items():
        if mid in new.members and dict(old.target.get(mid, {})) != dict(a):
            out.append((key(TARGET_MEMBER, group, mid), target_value(a)))
    if old.assignment_epoch != new.assignment_epoch or after is None:
        out.append(
            (key(TARGET_EPOCH, group), None if after is None else epoch_value(new.assignment_epoch))
        )
    for mid, m in new.members.items():
        was = old.members.get(mid)
        if was is None or _current(was) != _current(m):
            out.append((key(CURRENT, group, mid), current_value(m)))
    return out


def snapshot(g: ConsumerGroup) -> ConsumerGroup:
    """A copy of what ``changes`` compares (members and assignments are immutable values)."""
    return replace(
        g,
        members=dict(g.members),
        static_members=dict(g.static_members),
        target=dict(g.target),
        partition_epochs=dict(g.partition_epochs),
        subscription_metadata=dict(g.subscription_metadata),
        resolved_regexes=dict(g.resolved_regexes),
        session_deadlines=dict(g.session_deadlines),
        rebalance_deadlines=dict(g.rebalance_deadlines),
        join_deadlines=dict(g.join_deadlines),
        sync_deadlines=dict(g.sync_deadlines),
    )


# -- reading -----------------------------------------------------------------------------------


class _R:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ConsumerRecordError("record ends early")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i8(self) -> int:
        return int(struct.unpack(">b", self.take(1))[0])

    def i16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def i32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def i64(self) -> int:
        return int(struct.unpack(">q", self.take(8))[0])

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise ConsumerRecordError("varint too long")

    def key_str(self) -> str:
        return self.take(self.i16()).decode()

    def str(self) -> str | None:
        n = self.uvarint() - 1
        return None if n < 0 else self.take(n).decode()

    def array(self) -> int:
        return self.uvarint() - 1

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def classic_tag(self) -> ClassicMemberMetadata | None:
        """The member record's tagged fields; tag 0 is ClassicMemberMetadata."""
        classic = None
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            if tag != 0:
                self.take(size)
                continue
            c = _R(self.take(size))
            if c.uvarint() <= 0:  # a null struct (Kafka's presence varint)
                continue
            timeout = c.i32()
            protocols = []
            for _ in range(max(c.array(), 0)):
                name = c.str() or ""
                metadata = c.take(c.uvarint() - 1)
                c.skip_tags()
                protocols.append((name, metadata))
            classic = ClassicMemberMetadata(timeout, tuple(protocols))
        return classic

    def partitions(self) -> Assignment:
        out: dict[uuid.UUID, frozenset[int]] = {}
        for _ in range(max(self.array(), 0)):
            topic_id = self.uuid()
            out[topic_id] = frozenset(self.i32() for _ in range(max(self.array(), 0)))
            self.skip_tags()
        return out

    def version(self) -> None:
        if (v := self.i16()) != 0:
            raise ConsumerRecordError(f"value version {v}")


def record_type(k: bytes) -> int:
    return int(struct.unpack(">h", k[:2])[0]) if len(k) >= 2 else -1


def replay(groups: dict[str, ConsumerGroup], k: bytes, v: bytes | None) -> None:
    """Apply one consumer-group record (types 3-8) to ``groups``."""
    r = _R(k)
    kind = r.i16()
    group_id = r.key_str()
    member_id = r.key_str() if kind in (MEMBER, TARGET_MEMBER, CURRENT, REGEX) else ""
    g = groups.get(group_id)
    if g is None:
        if v is None:
            return
        g = groups[group_id] = ConsumerGroup(group_id)
    if v is None:
        _tombstone(groups, g, kind, member_id)
        return
    r = _R(v)
    r.version()
    if kind == REGEX:  # member_id is the regex
        matched = frozenset(r.str() or "" for _ in range(max(r.array(), 0)))
        resolved = ResolvedRegex(matched, r.i64(), r.i64())
        g.resolved_regexes[member_id] = resolved
        g.regex_version = resolved.version
    elif kind == GROUP_EPOCH:
        g.group_epoch = r.i32()
    elif kind == TARGET_EPOCH:
        g.assignment_epoch = r.i32()
    elif kind == PARTITION_METADATA:
        topics: dict[str, TopicInfo] = {}
        for _ in range(max(r.array(), 0)):
            topic_id, name, n = r.uuid(), r.str() or "", r.i32()
            for _ in range(max(r.array(), 0)):  # partition racks
                r.i32()
                for _ in range(max(r.array(), 0)):
                    r.str()
                r.skip_tags()
            r.skip_tags()
            topics[name] = TopicInfo(name, topic_id, n)
        g.subscription_metadata = topics
    elif kind == TARGET_MEMBER:
        g.target[member_id] = r.partitions()
    elif kind == MEMBER:
        m = g.members.get(member_id) or ConsumerGroupMember(member_id)
        instance_id, rack_id, client_id, client_host = r.str(), r.str(), r.str(), r.str()
        names = tuple(r.str() or "" for _ in range(max(r.array(), 0)))
        regex, timeout, assignor = r.str(), r.i32(), r.str()
        classic = r.classic_tag()
        g.update_member(
            replace(
                m,
                instance_id=instance_id,
                rack_id=rack_id,
                client_id=client_id or "",
                client_host=client_host or "",
                subscribed_topic_names=names,
                subscribed_topic_regex=regex,
                rebalance_timeout_ms=timeout,
                server_assignor=assignor,
                classic=classic,
            )
        )
    elif kind == CURRENT:
        m = g.members.get(member_id) or ConsumerGroupMember(member_id)
        epoch, previous, state = r.i32(), r.i32(), _STATES.get(r.i8(), MemberState.UNKNOWN)
        assigned, pending = r.partitions(), r.partitions()
        g.update_member(
            replace(
                m,
                member_epoch=epoch,
                previous_member_epoch=previous,
                state=state,
                assigned=assigned,
                pending_revocation=pending,
            )
        )


def _tombstone(
    groups: dict[str, ConsumerGroup], g: ConsumerGroup, kind: int, member_id: str
) -> None:
    if kind == GROUP_EPOCH:
        del groups[g.group_id]
    elif kind == TARGET_MEMBER:
        g.target.pop(member_id, None)
    elif kind == MEMBER:
        g.remove_member(member_id)
    elif kind == CURRENT and (m := g.members.get(member_id)) is not None:
        g.update_member(
            replace(
                m, member_epoch=-1, previous_member_epoch=-1, assigned={}, pending_revocation={}
            )
        )
    elif kind == PARTITION_METADATA:
        g.subscription_metadata = {}
    elif kind == REGEX:
        g.resolved_regexes.pop(member_id, None)


def replay_all(records: Iterable[Record]) -> dict[str, ConsumerGroup]:
    """The groups a sequence of records leaves (tests: replay equals live)."""
    groups: dict[str, ConsumerGroup] = {}
    for k, v in records:
        replay(groups, k, v)
    return groups
