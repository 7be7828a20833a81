"""The topics a classic "consumer" group subscribes to, read from its members' protocol
metadata (a ConsumerProtocolSubscription; every version starts with the version and the
topics). Kafka's ``ClassicGroup.computeSubscribedTopics``; OffsetDelete and offsets retention
use it."""

from __future__ import annotations

import struct

from coordinator.group.classic import ClassicGroup

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscription_topics(metadata: bytes) -> list[str]:
    """The topics of a ConsumerProtocolSubscription. Raises struct.error/UnicodeDecodeError."""
    pos = 2  # int16 version
    (count,) = struct.unpack_from(">i", metadata, pos)
    pos += 4
    topics = []
    for _ in range(max(count, 0)):
        (n,) = struct.unpack_from(">h", metadata, pos)
        pos += 2
        topics.append(metadata[pos : pos + n].decode())
        pos += n
    return topics


def subscribed_topics(g: ClassicGroup) -> set[str] | None:
    """The union of the members' subscriptions; None if the group is not a "consumer" group or
    some member's metadata does not parse (the coordinator then does not know)."""
    if g.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    topics: set[str] = set()
    for m in g.members.values():
        try:
            topics.update(subscription_topics(m.metadata(g.protocol_name)))
        except (struct.error, UnicodeDecodeError):
            return None
    return topics
