"""AlterConfigs (key 33), v0-2. v1: nothing new for the broker. v2: flexible.

The legacy, non-incremental API: for a TOPIC (2) resource the configs listed become the topic's
complete set of overrides (every config not listed goes back to its default), validated as
CreateTopics validates them, then persisted and applied to the open partitions at once
(``TopicManager.alter_configs``). Errors per resource, in Kafka's order: duplicate resources ->
INVALID_REQUEST; an unknown topic -> UNKNOWN_TOPIC_OR_PARTITION; an unknown config name, a null
or bad value -> INVALID_CONFIG. ``validate_only`` checks and changes nothing.

BROKER (4) resources ("" or this node's id): the configs listed become the resource's whole
set of dynamic broker configs (``proxy/dynamic_broker.py``), checked as Kafka's
ConfigAdminManager checks them (``proxy/broker_config_change.py``), stored and applied at
once. Other resource types -> INVALID_REQUEST.

Authorization after the broker's own checks (duplicates, broker configs), as Kafka's
controller does (``authorizeAlterResource``): ALTER_CONFIGS on the topic, else
TOPIC_AUTHORIZATION_FAILED "Topic authorization failed." (on the cluster for broker
resources, CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kio.schema.alter_configs.v2.request import AlterConfigsRequest, AlterConfigsResource
from kio.schema.alter_configs.v2.response import (
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from kio.schema.errors import ErrorCode

from proxy.acl.checks import config_refusal
from proxy.acl.model import AclOperation
from proxy.broker_config_change import legacy
from proxy.config_resources import BROKER, answer_each_resource
from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import NO_THROTTLE


def _answer(
    res: AlterConfigsResource, code: ErrorCode, message: str | None
) -> AlterConfigsResourceResponse:
    return AlterConfigsResourceResponse(
        error_code=code,
        error_message=message,
        resource_type=res.resource_type,
        resource_name=res.resource_name,
    )


def _error_reply(req: AlterConfigsRequest, code: ErrorCode) -> AlterConfigsResponse:
    return AlterConfigsResponse(
        throttle_time=NO_THROTTLE,
        responses=tuple(_answer(res, code, None) for res in req.resources),
    )


BROKER_LOGGER = 8


@handler(
    api_key=33,
    versions=(0, 2),
    request=AlterConfigsRequest,
    response=AlterConfigsResponse,
    error_reply=_error_reply,
)
async def alter_configs(ctx: RequestContext, req: AlterConfigsRequest) -> AlterConfigsResponse:
    broker = ctx.broker

    def check_broker(res: AlterConfigsResource) -> tuple[ErrorCode, str | None] | None:
        new = legacy(broker.dynamic, res.resource_name, [(c.name, c.value) for c in res.configs])
        return new if isinstance(new, tuple) else None

    async def alter(res: AlterConfigsResource) -> tuple[ErrorCode, str | None]:
        if res.resource_type == BROKER:
            async with broker.dynamic.lock:
                new = legacy(
                    broker.dynamic, res.resource_name, [(c.name, c.value) for c in res.configs]
                )
                if isinstance(new, tuple):
                    return new
                if not req.validate_only:
                    await broker.dynamic.replace(res.resource_name, new)
            return ErrorCode.none, None
        given: dict[str, str | None] = {c.name: c.value for c in res.configs}
        if (err := broker.topics.check_alter(res.resource_name, given)) is not None:
            return err.code, err.message
        if not req.validate_only:
            new = {k: v for k, v in given.items() if v is not None}
            if (err := await broker.topics.alter_configs(res.resource_name, new)) is not None:
                return err.code, err.message  # deleted meanwhile
        return ErrorCode.none, None

    def authorize(config_type: int, name: str) -> ErrorCode | None:
        if config_type == BROKER_LOGGER:  # refused before authorization, as not supported
            return None
        return config_refusal(ctx, AclOperation.ALTER_CONFIGS, config_type, name)

    responses = await answer_each_resource(
        broker, req.resources, alter, _answer, authorize, check_broker
    )
    return AlterConfigsResponse(throttle_time=NO_THROTTLE, responses=responses)
