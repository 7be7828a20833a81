"""IncrementalAlterConfigs (key 44), v0-1. v1: flexible.

TOPIC (2) resources only: each config operation (SET, DELETE, APPEND, SUBTRACT; the last two
for list configs such as ``cleanup.policy``) is applied to the topic's current overrides, the
result is validated as CreateTopics validates configs, and then persisted and applied to the
open partitions at once (``TopicManager.alter_configs``: rolls, retention and the log cleaner
use the new values without a restart; DescribeConfigs shows them). Per resource, in Kafka's
order: duplicate resources in one request -> INVALID_REQUEST; a duplicate config name or an
unknown operation -> INVALID_REQUEST; an unknown topic -> UNKNOWN_TOPIC_OR_PARTITION; an unknown
config name or a bad value -> INVALID_CONFIG. ``validate_only`` checks and changes nothing.

BROKER (4) resources, "" (the cluster default) or this node's id: the dynamic broker configs
(``proxy/dynamic_broker.py``), changed as Kafka's ConfigAdminManager checks them
(``proxy/broker_config_change.py``: a read-only config is INVALID_REQUEST "Cannot update these
configs dynamically: Set(...)"), stored durably and applied at once; another node id is
INVALID_REQUEST "Unexpected broker id, expected N, but received M".
Other resource types (BROKER_LOGGER, CLIENT_METRICS, GROUP) -> INVALID_REQUEST.

Authorization after the broker's own checks (duplicates, broker configs), as Kafka's
controller does (``authorizeAlterResource``): ALTER_CONFIGS on the topic, else
TOPIC_AUTHORIZATION_FAILED "Topic authorization failed."; on the cluster for broker and broker
logger resources, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1.request import (
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.incremental_alter_configs.v1.response import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse,
)

from proxy.acl.checks import config_refusal
from proxy.acl.model import AclOperation
from proxy.broker_config_change import incremental
from proxy.config_resources import BROKER, answer_each_resource
from proxy.context import RequestContext
from proxy.registry import handler
from storage.topic_config import incremental_overrides
from storage.topics import TopicError, TopicManager
from wire.values import NO_THROTTLE


def _change(
    topics: TopicManager, name: str, ops: list[tuple[str, int, str | None]], values: Any
) -> Callable[[Mapping[str, str]], Mapping[str, str] | TopicError]:
    """The new overrides of topic ``name`` from its current ones, checked as AlterConfigs
    checks them, or the refusal."""

    def change(current: Mapping[str, str]) -> Mapping[str, str] | TopicError:
        new = incremental_overrides(current, ops, values)
        if isinstance(new, tuple):
            return TopicError(ErrorCode[new[0]], new[1])
        return err if (err := topics.check_alter(name, new)) is not None else new

    return change


def _answer(
    res: AlterConfigsResource, code: ErrorCode, message: str | None
) -> AlterConfigsResourceResponse:
    return AlterConfigsResourceResponse(
        error_code=code,
        error_message=message,
        resource_type=res.resource_type,
        resource_name=res.resource_name,
    )


def _error_reply(
    req: IncrementalAlterConfigsRequest, code: ErrorCode
) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(
        throttle_time=NO_THROTTLE,
        responses=tuple(_answer(res, code, None) for res in req.resources),
    )


@handler(
    api_key=44,
    versions=(0, 1),
    request=IncrementalAlterConfigsRequest,
    response=IncrementalAlterConfigsResponse,
    error_reply=_error_reply,
)
async def incremental_alter_configs(
    ctx: RequestContext, req: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    broker = ctx.broker
    values = broker.config.values or {}

    def broker_ops(res: AlterConfigsResource) -> list[tuple[str, int, str | None]]:
        return [(c.name, int(c.config_operation), c.value) for c in res.configs]

    def check_broker(res: AlterConfigsResource) -> tuple[ErrorCode, str | None] | None:
        new = incremental(broker.dynamic, res.resource_name, broker_ops(res))
        return new if isinstance(new, tuple) else None

    async def alter(res: AlterConfigsResource) -> tuple[ErrorCode, str | None]:
        ops = [(c.name, int(c.config_operation), c.value) for c in res.configs]
        if res.resource_type == BROKER:
            async with broker.dynamic.lock:  # read-decide-write: no change lost
                new = incremental(broker.dynamic, res.resource_name, ops)
                if isinstance(new, tuple):
                    return new
                if not req.validate_only:
                    await broker.dynamic.replace(res.resource_name, new)
            return ErrorCode.none, None
        topic = broker.topics.get(res.resource_name)
        assert topic is not None  # refuse_resource answered for unknown topics
        change = _change(broker.topics, res.resource_name, ops, values)
        refusal: Mapping[str, str] | TopicError | None = change(topic.meta.configs)
        if not isinstance(refusal, TopicError) and not req.validate_only:
            # applied to the overrides as they are under the topic lock: none lost
            refusal = await broker.topics.alter_configs(res.resource_name, change)
        if isinstance(refusal, TopicError):
            return refusal.code, refusal.message
        return ErrorCode.none, None

    def authorize(config_type: int, name: str) -> ErrorCode | None:
        return config_refusal(ctx, AclOperation.ALTER_CONFIGS, config_type, name)

    responses = await answer_each_resource(
        broker, req.resources, alter, _answer, authorize, check_broker
    )
    return IncrementalAlterConfigsResponse(throttle_time=NO_THROTTLE, responses=responses)
