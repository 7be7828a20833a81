"""DeleteTopics (key 20), v1-6. v1: throttle time. v4: flexible. v5: error messages. v6:
topics by name or by id (``topics``; v1-5's ``topic_names`` become name-only entries of it,
``_names_as_topics``). A deleted topic's data is removed and its name can be
reused at once; fetches and produces still in flight for it answer
UNKNOWN_TOPIC_OR_PARTITION. The offsets groups committed for it are deleted (tombstones in
``__consumer_offsets``), so a topic created again under the name starts with none.

As Kafka's ``ControllerApis.deleteTopics``: with ``delete.topic.enable=false`` every topic is
answered INVALID_REQUEST below v3 and TOPIC_DELETION_DISABLED from v3, with no message (the
request's error response). A name given more than once is answered once, INVALID_REQUEST
("Duplicate topic name."), ahead of the others, and is not deleted.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.delete_topics.v6.response import DeletableTopicResult, DeleteTopicsResponse
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName

from proxy.acl.checks import MESSAGES, allowed_names, cluster_allows
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.quotas.enforce import MutationQuota
from proxy.registry import handler
from wire.values import NO_THROTTLE, ZERO_UUID


def _names_as_topics(old: Any, version: int) -> Mapping[str, Any]:
    """v0-5 name topics (``topic_names``); v6 lists topics by name or id (``topics``)."""
    if version >= 6:
        return {}
    return {"topics": tuple(DeleteTopicState(name=n, topic_id=ZERO_UUID) for n in old.topic_names)}


def _result(
    name: str | None, topic_id: uuid.UUID, code: ErrorCode, message: str | None = None
) -> DeletableTopicResult:
    return DeletableTopicResult(
        name=None if name is None else TopicName(name),
        topic_id=topic_id,
        error_code=code,
        error_message=message,
    )


def _error_reply(req: DeleteTopicsRequest, code: ErrorCode) -> DeleteTopicsResponse:
    return DeleteTopicsResponse(
        throttle_time=NO_THROTTLE,
        responses=tuple(_result(t.name, t.topic_id or ZERO_UUID, code) for t in req.topics),
    )


@handler(
    api_key=20,
    versions=(1, 6),
    request=DeleteTopicsRequest,
    response=DeleteTopicsResponse,
    error_reply=_error_reply,
    upgrade=_names_as_topics,
)
async def delete_topics(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    """Kafka's ``ControllerApis.deleteTopics``: topics by name or (v6+) by id; a topic named
    twice, or given both a name and an id, or neither, is refused INVALID_REQUEST; an unknown
    id UNKNOWN_TOPIC_ID; a name that maps to an id also given is refused. Without DELETE on
    the cluster, a topic needs DELETE (and DESCRIBE to be told it exists), else
    TOPIC_AUTHORIZATION_FAILED: given by name, with the zero id; by id, with its name only if
    the principal may DESCRIBE it."""
    broker = ctx.broker
    if not broker.config.get("delete.topic.enable"):
        code = ErrorCode.invalid_request if ctx.version < 3 else ErrorCode.topic_deletion_disabled
        return _error_reply(req, code)
    results: list[DeletableTopicResult] = []
    names: dict[str, int] = {}
    ids: dict[uuid.UUID, int] = {}
    for t in req.topics:
        topic_id = t.topic_id or ZERO_UUID
        if t.name is None and topic_id == ZERO_UUID:
            results.append(
                _result(
                    None,
                    ZERO_UUID,
                    ErrorCode.invalid_request,
                    "Neither topic name nor id were specified.",
                )
            )
        elif t.name is None:
            ids[topic_id] = ids.get(topic_id, 0) + 1
        elif topic_id == ZERO_UUID:
            names[t.name] = names.get(t.name, 0) + 1
        else:
            results.append(
                _result(
                    t.name,
                    topic_id,
                    ErrorCode.invalid_request,
                    "You may not specify both topic name and topic id.",
                )
            )
    for name, n in names.items():
        if n > 1:
            results.append(
                _result(name, ZERO_UUID, ErrorCode.invalid_request, "Duplicate topic name.")
            )
    for topic_id, n in ids.items():
        if n > 1:
            results.append(
                _result(None, topic_id, ErrorCode.invalid_request, "Duplicate topic id.")
            )
    by_id: dict[uuid.UUID, str] = {}
    for topic_id, n in ids.items():
        if n > 1:
            continue
        found = broker.topics.by_id(topic_id)
        if found is None:
            results.append(_result(None, topic_id, ErrorCode.unknown_topic_id))
        else:
            by_id[topic_id] = found.name
    # authorized by name: ids resolved first (Kafka does not reveal a refused id's name unless
    # the principal may DESCRIBE it)
    asked = [name for name, n in names.items() if n == 1] + list(by_id.values())
    if cluster_allows(ctx, AclOperation.DELETE):
        describable = deletable = set(asked)
    else:
        describable = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, asked)
        deletable = allowed_names(ctx, AclOperation.DELETE, ResourceType.TOPIC, asked)
    refused = ErrorCode.topic_authorization_failed
    for topic_id, name in list(by_id.items()):
        if name not in deletable:
            shown = name if name in describable else None
            results.append(_result(shown, topic_id, refused, MESSAGES[refused]))
            del by_id[topic_id]
    to_delete: list[tuple[str, uuid.UUID]] = list((name, i) for i, name in by_id.items())
    for name, n in names.items():
        if n > 1:
            continue
        topic = broker.topics.get(name)
        if name not in describable or (topic is not None and name not in deletable):
            results.append(_result(name, ZERO_UUID, refused, MESSAGES[refused]))
        elif topic is not None and topic.topic_id in by_id:
            # a name that maps to an id also given: neither is deleted
            to_delete.remove((name, topic.topic_id))
            results.append(
                _result(
                    name,
                    topic.topic_id,
                    ErrorCode.invalid_request,
                    "The provided topic name maps to an ID that was already supplied.",
                )
            )
        else:
            to_delete.append((name, ZERO_UUID if topic is None else topic.topic_id))
    mutation = MutationQuota(ctx, strict_since=5)  # controller_mutation_rate (proxy/quotas/)
    for name, topic_id in to_delete:
        topic = broker.topics.get(name)
        if topic is not None and (throttled := mutation.charge(len(topic.partitions))):
            results.append(_result(name, topic_id, *throttled))
            continue
        err = await broker.topics.delete(name)
        if err is None:
            await broker.groups.on_topic_deleted(name)  # its committed offsets go too
            results.append(_result(name, topic_id, ErrorCode.none))
        else:
            results.append(_result(name, topic_id, err.code, err.message))
    return DeleteTopicsResponse(throttle_time=mutation.throttle_time(), responses=tuple(results))
