"""What a Fetch request asks for, as Kafka's ``FetchRequest.fetchData(topicNames)`` and
``forgottenTopics(topicNames)`` read it: each partition keyed by (topic id, topic name,
index), in request order, a partition named twice once (its last entry wins, at its first
place: Kafka's LinkedHashMap).

Below v13 topics are named (the topic id is zero); from v13 (KIP-516) they are given by id,
resolved to names with the broker's topics, and an id it does not know keeps a null name (the
handler answers UNKNOWN_TOPIC_ID). The handler is typed with the newest request, which has no
topic names: for v4-12 the names come from the request as the client sent it
(``RequestContext.body``), whose topics are converted one for one, in order.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from kio.schema.fetch.v18.request import FetchRequest

from proxy.fetch_session import (
    TOPIC_ID_VERSION,
    ZERO_ID,
    PartitionRequest,
    TopicIdPartition,
)

Resolve = Callable[[uuid.UUID], str | None]


def _names(body: Any, attr: str, count: int) -> Sequence[str | None]:
    """The topic names of ``body``'s ``attr`` list (a request below v13; below v7 it has no
    forgotten topics)."""
    names = [t.topic for t in getattr(body, attr, ())] if body is not None else []
    if len(names) != count:
        raise ValueError("a Fetch request below v13 needs its topic names (ctx.body)")
    return names


def fetch_data(
    req: FetchRequest, body: Any, version: int, resolve: Resolve
) -> tuple[list[tuple[TopicIdPartition, PartitionRequest]], list[TopicIdPartition]]:
    """(the partitions to fetch, the partitions to forget) of ``req`` (converted to the newest
    version) and ``body`` (as the client sent it)."""
    by_ids = version >= TOPIC_ID_VERSION
    if by_ids:
        names = [resolve(t.topic_id or ZERO_ID) for t in req.topics]
        forgotten = [resolve(t.topic_id or ZERO_ID) for t in req.forgotten_topics_data]
    else:
        names = list(_names(body, "topics", len(req.topics)))
        forgotten = list(_names(body, "forgotten_topics_data", len(req.forgotten_topics_data)))
    wanted: dict[TopicIdPartition, PartitionRequest] = {}
    for topic, name in zip(req.topics, names, strict=True):
        topic_id = (topic.topic_id or ZERO_ID) if by_ids else ZERO_ID
        for p in topic.partitions:
            wanted[TopicIdPartition(topic_id, name, p.partition)] = PartitionRequest(
                p.fetch_offset,
                p.partition_max_bytes,
                p.current_leader_epoch,
                p.log_start_offset,
                p.last_fetched_epoch,
            )
    to_forget = [
        TopicIdPartition((t.topic_id or ZERO_ID) if by_ids else ZERO_ID, name, index)
        for t, name in zip(req.forgotten_topics_data, forgotten, strict=True)
        for index in t.partitions
    ]
    return list(wanted.items()), to_forget
