"""IncrementalAlterConfigs (key 44), v0-1. v1: flexible.

TOPIC (2) resources only: each config operation (SET, DELETE, APPEND, SUBTRACT; the last two
for list configs such as ``cleanup.policy``) is applied to the topic's current overrides, the
result is validated as CreateTopics validates configs, and then persisted and applied to the
open partitions at once (``TopicManager.alter_configs``: rolls, retention and the log cleaner
use the new values without a restart; DescribeConfigs shows them). Per resource, in Kafka's
order: duplicate resources in one request -> INVALID_REQUEST; a duplicate config name or an
unknown operation -> INVALID_REQUEST; an unknown topic -> UNKNOWN_TOPIC_OR_PARTITION; an unknown
config name or a bad value -> INVALID_CONFIG. ``validate_only`` checks and changes nothing.

BROKER (4) resources: kafkad's broker configs are static, so any change is INVALID_REQUEST
("Cannot update these configs dynamically"), as Kafka answers for read-only broker configs.
Other resource types (BROKER_LOGGER, CLIENT_METRICS, GROUP) -> INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from proxy.config_resources import answer_each_resource
from proxy.context import RequestContext
from proxy.registry import handler
from storage.topic_config import incremental_overrides
from storage.topics import TopicError, TopicManager


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


@handler(api_key=44, versions=(0, 1))
async def incremental_alter_configs(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    values = broker.config.values or {}

    async def alter(res: Any) -> tuple[ErrorCode, str | None]:
        ops = [(c.name, int(c.config_operation), c.value) for c in res.configs]
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

    responses = await answer_each_resource(broker, ctx.b, req.resources, alter)
    return ctx.b.IncrementalAlterConfigsResponse(throttle_time=0, responses=responses)
