"""What a Fetch request asks for, as Kafka's ``FetchRequest.fetchData(topicNames)`` and
``forgottenTopics(topicNames)`` read it: each partition keyed by (topic id, topic name,
index), in request order, a partition named twice once (its last entry wins, at its first
place: Kafka's LinkedHashMap).

Below v13 topics are named (the topic id is zero); from v13 (KIP-516) they are given by id,
resolved to names with the broker's topics, and an id it does not know keeps a null name (the
handler answers UNKNOWN_TOPIC_ID). The request is read as the client sent it (any version's
kio class): fields a version lacks take Kafka's defaults (no current leader epoch before v9,
no log start offset before v5, no last fetched epoch before v12, no forgotten topics before
v7).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from proxy.fetch_session import (
    TOPIC_ID_VERSION,
    ZERO_ID,
    PartitionRequest,
    TopicIdPartition,
)

Resolve = Callable[[uuid.UUID], str | None]
NO_EPOCH = -1
NO_OFFSET = -1


def fetch_data(
    req: Any, version: int, resolve: Resolve
) -> tuple[list[tuple[TopicIdPartition, PartitionRequest]], list[TopicIdPartition]]:
    """(the partitions to fetch, the partitions to forget) of ``req``, a Fetch request of
    ``version``."""
    by_ids = version >= TOPIC_ID_VERSION
    epochs, starts, last = version >= 9, version >= 5, version >= 12
    wanted: dict[TopicIdPartition, PartitionRequest] = {}
    for topic in req.topics:
        if by_ids:
            topic_id = topic.topic_id or ZERO_ID
            name = resolve(topic_id)
        else:
            topic_id, name = ZERO_ID, topic.topic
        for p in topic.partitions:
            wanted[TopicIdPartition(topic_id, name, p.partition)] = PartitionRequest(
                p.fetch_offset,
                p.partition_max_bytes,
                p.current_leader_epoch if epochs else NO_EPOCH,
                p.log_start_offset if starts else NO_OFFSET,
                p.last_fetched_epoch if last else NO_EPOCH,
            )
    to_forget: list[TopicIdPartition] = []
    for t in getattr(req, "forgotten_topics_data", ()):  # v7+
        if by_ids:
            topic_id = t.topic_id or ZERO_ID
            name = resolve(topic_id)
        else:
            topic_id, name = ZERO_ID, t.topic
        to_forget.extend(TopicIdPartition(topic_id, name, index) for index in t.partitions)
    return list(wanted.items()), to_forget


def replica_id(req: Any) -> int:
    """The fetching replica's id (-1: a consumer) of a Fetch request of any version: v15+
    moved it into ``replica_state`` (KIP-903)."""
    state = getattr(req, "replica_state", None)
    return int(state.replica_id if state is not None else req.replica_id)
