"""OffsetFetch (key 9), v1-8. v2: null topics = every committed partition; top-level error
code. v3: throttle time. v5: committed leader epoch. v6: flexible. v7: require_stable (answers
UNSTABLE_OFFSET_COMMIT for partitions with pending transactional offsets, KIP-447). v8: many
groups in one request, one error code per group (KIP-709). v9 (KIP-848 member epoch) is not
advertised.

A partition with no committed offset answers offset -1, leader epoch -1, metadata "" and no
error; a group that does not exist answers the same (and nothing for "all partitions").
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.group.offsets import FetchedOffset
from proxy.context import RequestContext
from proxy.registry import handler
from storage.api import TopicPartition


def _wanted(topics: Any) -> list[TopicPartition] | None:
    if topics is None:
        return None
    return [TopicPartition(t.name, i) for t in topics for i in t.partition_indexes]


def _topics(ctx: RequestContext, fetched: list[FetchedOffset], suffix: str) -> tuple[Any, ...]:
    b = ctx.b
    by_topic: dict[str, list[FetchedOffset]] = defaultdict(list)
    for f in fetched:
        by_topic[f.tp.topic].append(f)
    return tuple(
        getattr(b, "OffsetFetchResponseTopic" + suffix)(
            name=name,
            partitions=tuple(
                getattr(b, "OffsetFetchResponsePartition" + suffix)(
                    partition_index=f.tp.partition,
                    committed_offset=f.offset,
                    committed_leader_epoch=f.leader_epoch,
                    metadata=f.metadata,
                    error_code=f.error,
                )
                for f in parts
            ),
        )
        for name, parts in by_topic.items()
    )


@handler(api_key=9, versions=(1, 8))
async def offset_fetch(ctx: RequestContext, req: Any) -> Any:
    b, groups = ctx.b, ctx.broker.groups
    stable = bool(getattr(req, "require_stable", False))
    if ctx.version >= 8:
        out = []
        for g in req.groups:
            code, fetched = groups.fetch_offsets(g.group_id, _wanted(g.topics), stable)
            out.append(
                b.OffsetFetchResponseGroup(
                    group_id=g.group_id, topics=_topics(ctx, fetched, "s"), error_code=code
                )
            )
        return b.OffsetFetchResponse(throttle_time=0, groups=tuple(out))
    wanted = _wanted(req.topics)
    code, fetched = groups.fetch_offsets(req.group_id, wanted, stable)
    if code is not ErrorCode.none and ctx.version < 2:
        fetched = [FetchedOffset(tp, -1, -1, "", code) for tp in wanted or []]
    return b.OffsetFetchResponse(throttle_time=0, topics=_topics(ctx, fetched, ""), error_code=code)
