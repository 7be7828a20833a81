"""DeleteTopics (key 20), v1-5. v1: throttle time. v4: flexible. v5: error messages. v6
(topics by id) is not advertised. A deleted topic's data is removed and its name can be
reused at once; fetches and produces still in flight for it answer
UNKNOWN_TOPIC_OR_PARTITION. The offsets groups committed for it are deleted (tombstones in
``__consumer_offsets``), so a topic created again under the name starts with none."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from proxy.context import RequestContext
from proxy.registry import handler


@handler(api_key=20, versions=(1, 5))
async def delete_topics(ctx: RequestContext, req: Any) -> Any:
    b, broker = ctx.b, ctx.broker
    enabled = broker.config.get("delete.topic.enable")
    results = []
    for name in req.topic_names:
        code, message = ErrorCode.none, None
        if not enabled:
            code, message = ErrorCode.topic_deletion_disabled, "Topic deletion is disabled."
        elif broker.topics.get(name) is None:
            code, message = (
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            )
        else:
            await broker.topics.delete(name)
            await broker.groups.on_topic_deleted(name)  # its committed offsets go too
        results.append(b.DeletableTopicResult(name=name, error_code=code, error_message=message))
    return b.DeleteTopicsResponse(throttle_time=0, responses=tuple(results))
