"""The classic "consumer" embedded protocol's two messages, as the group coordinator reads and
writes them when it converts a group between the protocols or serves a classic member inside a
consumer group: Kafka's ``ConsumerProtocol`` (``ConsumerProtocolSubscription`` and
``ConsumerProtocolAssignment``, versions 0-3, not flexible, each preceded by its int16 version).

Subscription: topics, user data; v1 owned partitions; v2 generation id; v3 rack id.
Assignment: assigned partitions, user data (the same in every version).

Reading accepts a newer version than 3 as Kafka does (the fields it knows are a prefix);
anything that does not parse raises ``ConsumerProtocolError`` (Kafka's SchemaException).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

HIGHEST_VERSION = 3
TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]


class ConsumerProtocolError(ValueError):
    """Malformed embedded consumer protocol bytes."""


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: TopicPartitions = ()
    generation_id: int = -1
    rack_id: str | None = None


class _R:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ConsumerProtocolError("the embedded consumer protocol ends early")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def i32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        try:
            return self.take(n).decode()
        except UnicodeDecodeError as exc:
            raise ConsumerProtocolError(str(exc)) from None

    def bytes_(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self.take(n)

    def count(self) -> int:
        return max(self.i32(), 0)

    def topic_partitions(self) -> TopicPartitions:
        out = []
        for _ in range(self.count()):
            topic = self.string() or ""
            out.append((topic, tuple(self.i32() for _ in range(self.count()))))
        return tuple(out)


def version_of(data: bytes) -> int:
    """Kafka's ConsumerProtocol.deserializeVersion."""
    if len(data) < 2:
        raise ConsumerProtocolError("no version")
    return int(struct.unpack(">h", data[:2])[0])


def decode_subscription(data: bytes) -> Subscription:
    r = _R(data)
    version = r.i16()
    if version < 0:
        raise ConsumerProtocolError(f"subscription version {version}")
    topics = tuple(r.string() or "" for _ in range(r.count()))
    user_data = r.bytes_()
    owned: TopicPartitions = r.topic_partitions() if version >= 1 else ()
    generation = r.i32() if version >= 2 else -1
    rack = r.string() if version >= 3 else None
    return Subscription(topics, user_data, owned, generation, rack)


def decode_assignment(data: bytes) -> TopicPartitions:
    """The assigned partitions (user data dropped, as Kafka's conversion does)."""
    r = _R(data)
    if r.i16() < 0:
        raise ConsumerProtocolError("negative assignment version")
    return r.topic_partitions()


def _string(out: bytearray, s: str) -> None:
    b = s.encode()
    out += struct.pack(">h", len(b)) + b


def encode_assignment(partitions: Mapping[str, Iterable[int]], version: int) -> bytes:
    """Kafka's ConsumerProtocol.serializeAssignment at ``version`` (capped at the highest),
    topics and partitions sorted, no user data."""
    v = min(max(version, 0), HIGHEST_VERSION)
    out = bytearray(struct.pack(">h", v))
    out += struct.pack(">i", len(partitions))
    for topic in sorted(partitions):
        parts = sorted(partitions[topic])
        _string(out, topic)
        out += struct.pack(">i", len(parts))
        for p in parts:
            out += struct.pack(">i", p)
    out += struct.pack(">i", -1)  # user data: null
    return bytes(out)


def encode_subscription(
    topics: Iterable[str],
    owned: Mapping[str, Iterable[int]] | None = None,
    version: int = HIGHEST_VERSION,
    generation_id: int = -1,
    rack_id: str | None = None,
) -> bytes:
    """A subscription (tests, and the protocol metadata kafkad itself never sends)."""
    out = bytearray(struct.pack(">h", version))
    names = sorted(topics)
    out += struct.pack(">i", len(names))
    for t in names:
        _string(out, t)
    out += struct.pack(">i", -1)
    if version >= 1:
        owned = owned or {}
        out += struct.pack(">i", len(owned))
        for t in sorted(owned):
            parts = sorted(owned[t])
            _string(out, t)
            out += struct.pack(">i", len(parts))
            for p in parts:
                out += struct.pack(">i", p)
    if version >= 2:
        out += struct.pack(">i", generation_id)
    if version >= 3:
        if rack_id is None:
            out += struct.pack(">h", -1)
        else:
            _string(out, rack_id)
    return bytes(out)
