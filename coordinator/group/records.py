"""The ``__consumer_offsets`` record codec: Kafka's own key and value formats.

Theory of operation
-------------------
Every record of the offsets topic is a (key, value) pair in Kafka's coordinator-record format,
so Kafka's tools (``kafka-dump-log --offsets-decoder``) and a later compaction-by-key read it as
they would Kafka's. A key starts with an int16 *record type* (historically the key's version):

======  ===================  ======================================  =========================
type    key schema           key fields                              value written
======  ===================  ======================================  =========================
0, 1    OffsetCommitKey      group string, topic string, partition   OffsetCommitValue v3
                             int32
2       GroupMetadataKey     group string                            GroupMetadataValue v3
======  ===================  ======================================  =========================

Keys and values v0-3 use the classic (non-flexible) encoding: int16-length strings (-1 for a
null), int32-length bytes and arrays. A value starts with its own int16 version.

* OffsetCommitValue v3: offset int64, leaderEpoch int32, metadata string, commitTimestamp int64.
  (v1 adds expireTimestamp and is only written by Kafka for OffsetCommit v1 retention; read, never
  written. v0/v2 are read too.)
* GroupMetadataValue v3: protocolType string, generation int32, protocol string?, leader
  string?, currentStateTimestamp int64, members [memberId, groupInstanceId?, clientId,
  clientHost, rebalanceTimeout int32, sessionTimeout int32, subscription bytes, assignment
  bytes].

A *tombstone* (value None) deletes the key: an offset (OffsetDelete, DeleteGroups) or a group.
Flexible v4 values (tagged fields) are decoded by skipping the tag section; we never write them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from wire.errors import DecodeError
from wire.headers import read_uvarint

OFFSET_COMMIT_KEY_TYPES = (0, 1)
GROUP_METADATA_KEY_TYPE = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value that is not in a format we know."""


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...]


# -- writing ------------------------------------------------------------------------------


def _str(out: bytearray, s: str | None) -> None:
    if s is None:
        out += _I16.pack(-1)
    else:
        data = s.encode()
        out += _I16.pack(len(data)) + data


def _bytes(out: bytearray, b: bytes) -> None:
    out += _I32.pack(len(b)) + b


def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    out = bytearray(_I16.pack(1))
    _str(out, key.group)
    _str(out, key.topic)
    out += _I32.pack(key.partition)
    return bytes(out)


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    out = bytearray(_I16.pack(GROUP_METADATA_KEY_TYPE))
    _str(out, key.group)
    return bytes(out)


def encode_offset_commit_value(v: OffsetCommitValue) -> bytes:
    out = bytearray(_I16.pack(OFFSET_COMMIT_VALUE_VERSION))
    out += _I64.pack(v.offset) + _I32.pack(v.leader_epoch)
    _str(out, v.metadata)
    out += _I64.pack(v.commit_timestamp)
    return bytes(out)


def encode_group_metadata_value(v: GroupMetadataValue) -> bytes:
    out = bytearray(_I16.pack(GROUP_METADATA_VALUE_VERSION))
    _str(out, v.protocol_type)
    out += _I32.pack(v.generation)
    _str(out, v.protocol)
    _str(out, v.leader)
    out += _I64.pack(v.current_state_timestamp)
    out += _I32.pack(len(v.members))
    for m in v.members:
        _str(out, m.member_id)
        _str(out, m.group_instance_id)
        _str(out, m.client_id)
        _str(out, m.client_host)
        out += _I32.pack(m.rebalance_timeout) + _I32.pack(m.session_timeout)
        _bytes(out, m.subscription)
        _bytes(out, m.assignment)
    return bytes(out)


# -- reading ------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError("record ends early")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.data, self.pos, len(self.data))
        except DecodeError as exc:
            raise RecordFormatError(str(exc)) from exc
        return value

    def string(self, flexible: bool = False) -> str | None:
        n = self.uvarint() - 1 if flexible else self.i16()
        return None if n < 0 else self._take(n).decode()

    def str_(self, flexible: bool = False) -> str:
        s = self.string(flexible)
        if s is None:
            raise RecordFormatError("null where a string is required")
        return s

    def bytes_(self, flexible: bool = False) -> bytes:
        n = self.uvarint() - 1 if flexible else self.i32()
        return b"" if n < 0 else self._take(n)

    def array_len(self, flexible: bool = False) -> int:
        return self.uvarint() - 1 if flexible else self.i32()

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """The key of an offsets-topic record; None for record types we do not handle (Kafka's
    KIP-848 consumer-group records, which kafkad never writes)."""
    r = _Reader(data)
    kind = r.i16()
    if kind in OFFSET_COMMIT_KEY_TYPES:
        return OffsetCommitKey(r.str_(), r.str_(), r.i32())
    if kind == GROUP_METADATA_KEY_TYPE:
        return GroupMetadataKey(r.str_())
    return None


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"OffsetCommitValue version {version}")
    flex = version >= 4
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.str_(flex)
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else -1
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_ts, expire_ts)


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"GroupMetadataValue version {version}")
    flex = version >= 4
    protocol_type = r.str_(flex)
    generation = r.i32()
    protocol = r.string(flex)
    leader = r.string(flex)
    ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len(flex)):
        member_id = r.str_(flex)
        instance_id = r.string(flex) if version >= 3 else None
        client_id, client_host = r.str_(flex), r.str_(flex)
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        subscription, assignment = r.bytes_(flex), r.bytes_(flex)
        if flex:
            r.skip_tags()
        members.append(
            MemberMetadata(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    return GroupMetadataValue(protocol_type, generation, protocol, leader, ts, tuple(members))
