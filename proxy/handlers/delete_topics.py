"""DeleteTopics (key 20), v1-5. v1: throttle time. v4: flexible. v5: error messages. v6
(topics by id) is not advertised. A deleted topic's data is removed and its name can be
reused at once; fetches and produces still in flight for it answer
UNKNOWN_TOPIC_OR_PARTITION. The offsets groups committed for it are deleted (tombstones in
``__consumer_offsets``), so a topic created again under the name starts with none.

As Kafka's ``ControllerApis.deleteTopics``: with ``delete.topic.enable=false`` every topic is
answered INVALID_REQUEST below v3 and TOPIC_DELETION_DISABLED from v3, with no message (the
request's error response). A name given more than once is answered once, INVALID_REQUEST
("Duplicate topic name."), ahead of the others, and is not deleted.
"""

from __future__ import annotations

from collections import Counter

from kio.schema.delete_topics.v5.request import DeleteTopicsRequest
from kio.schema.delete_topics.v5.response import DeletableTopicResult, DeleteTopicsResponse
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName

from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import NO_THROTTLE


def _result(name: TopicName, code: ErrorCode, message: str | None = None) -> DeletableTopicResult:
    return DeletableTopicResult(name=name, error_code=code, error_message=message)


def _error_reply(req: DeleteTopicsRequest, code: ErrorCode) -> DeleteTopicsResponse:
    return DeleteTopicsResponse(
        throttle_time=NO_THROTTLE, responses=tuple(_result(n, code) for n in req.topic_names)
    )


@handler(
    api_key=20,
    versions=(1, 5),
    request=DeleteTopicsRequest,
    response=DeleteTopicsResponse,
    error_reply=_error_reply,
)
async def delete_topics(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    broker = ctx.broker
    if not broker.config.get("delete.topic.enable"):
        code = ErrorCode.invalid_request if ctx.version < 3 else ErrorCode.topic_deletion_disabled
        return _error_reply(req, code)
    counts = Counter(req.topic_names)
    results = [
        _result(name, ErrorCode.invalid_request, "Duplicate topic name.")
        for name, n in counts.items()
        if n > 1
    ]
    for name in req.topic_names:
        if counts[name] > 1:
            continue
        err = await broker.topics.delete(name)
        if err is None:
            await broker.groups.on_topic_deleted(name)  # its committed offsets go too
            results.append(_result(name, ErrorCode.none))
        else:
            results.append(_result(name, err.code, err.message))
    return DeleteTopicsResponse(throttle_time=NO_THROTTLE, responses=tuple(results))
