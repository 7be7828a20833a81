"""DescribeConfigs (key 32), v1-4. v1: config source and synonyms. v3: config type and
documentation. v4: flexible.

Resource types: TOPIC (2) lists every topic config with its effective value (source
DYNAMIC_TOPIC_CONFIG for an override, else STATIC_BROKER_CONFIG when the broker config it
defaults from is set, else DEFAULT_CONFIG); an illegal topic name is INVALID_TOPIC_EXCEPTION,
a missing topic UNKNOWN_TOPIC_OR_PARTITION. BROKER (4) lists the broker configs kafkad
honours for this node's id; "" (the cluster default) lists, as Kafka's ConfigHelper, only the
dynamic cluster-wide defaults: kafkad's broker configs are static, so none. Anything else is
INVALID_REQUEST. Synonyms, as Kafka's ConfigHelper lists them: the topic override, then the
broker config it defaults from (STATIC_BROKER_CONFIG if set), then that config's default.

Deviation: a broker config counts as set (STATIC_BROKER_CONFIG) when its value differs from
its default; Kafka also reports one set explicitly to its default value as static.

Authorization (Kafka's ``ConfigHelper.handleDescribeConfigsRequest``): DESCRIBE_CONFIGS on the
topic for a topic, on the cluster for a broker; a refused resource is answered, after the
others, TOPIC_ / CLUSTER_AUTHORIZATION_FAILED with Kafka's message and no configs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.describe_configs.v4.response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from proxy.acl.checks import MESSAGES, config_refusal
from proxy.acl.model import AclOperation
from proxy.config import BROKER_CONFIGS
from proxy.context import RequestContext
from proxy.registry import handler
from proxy.tls import SENSITIVE_CONFIGS
from storage.topic_config import TOPIC_CONFIG_TYPES, TOPIC_CONFIGS, effective_configs
from storage.topics import topic_name_error
from wire.values import NO_THROTTLE

TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST, PASSWORD = 1, 2, 3, 5, 6, 7, 9

_INT_CONFIGS = {
    "index.interval.bytes",
    "max.message.bytes",
    "min.insync.replicas",
    "segment.bytes",
    "segment.index.bytes",
    "node.id",
    "num.partitions",
    "default.replication.factor",
    "offsets.topic.num.partitions",
    "transaction.state.log.num.partitions",
    "socket.request.max.bytes",
    "message.max.bytes",
    "log.segment.bytes",
    "log.index.interval.bytes",
    "log.index.size.max.bytes",
    "group.initial.rebalance.delay.ms",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
}


def _config_type(name: str, value: str) -> int:
    if name == "cleanup.policy":
        return LIST
    if value in ("true", "false", "True", "False"):
        return BOOLEAN
    if name in _INT_CONFIGS:
        return INT
    try:
        int(value)
        return LONG
    except ValueError:
        pass
    try:
        float(value)
        return DOUBLE
    except ValueError:
        return STRING


def _result(
    res: DescribeConfigsResource,
    code: ErrorCode,
    message: str | None,
    entries: tuple[DescribeConfigsResourceResult, ...] = (),
) -> DescribeConfigsResult:
    return DescribeConfigsResult(
        error_code=code,
        error_message=message,
        resource_type=res.resource_type,
        resource_name=res.resource_name,
        configs=entries,
    )


def _error_reply(req: DescribeConfigsRequest, code: ErrorCode) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(
        throttle_time=NO_THROTTLE, results=tuple(_result(r, code, None) for r in req.resources)
    )


def _entry(
    name: str,
    value: str | None,
    source: int,
    synonyms: tuple[DescribeConfigsSynonym, ...],
    read_only: bool,
    config_type: int | None = None,
) -> DescribeConfigsResourceResult:
    """One config; ``value`` None: a sensitive one (a password or key: never shown, Kafka's
    PASSWORD type)."""
    return DescribeConfigsResourceResult(
        name=name,
        value=value,
        read_only=read_only,
        config_source=i8(source),
        is_sensitive=value is None,
        synonyms=synonyms,
        config_type=i8(
            PASSWORD
            if value is None
            else config_type
            if config_type is not None
            else _config_type(name, value)
        ),
        documentation=None,
    )


def _synonym(name: str, value: str | None, source: int) -> DescribeConfigsSynonym:
    return DescribeConfigsSynonym(name=name, value=value, source=i8(source))


@handler(
    api_key=32,
    versions=(1, 4),
    request=DescribeConfigsRequest,
    response=DescribeConfigsResponse,
    error_reply=_error_reply,
)
async def describe_configs(
    ctx: RequestContext, req: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    broker = ctx.broker
    values = broker.config.values or {}
    synonyms_wanted = req.include_synonyms
    results = []
    refused = []  # answered after the others, with Kafka's message for the error
    for res in req.resources:
        denied = config_refusal(
            ctx, AclOperation.DESCRIBE_CONFIGS, res.resource_type, res.resource_name
        )
        if denied is not None:
            refused.append(_result(res, denied, MESSAGES[denied]))
            continue
        wanted = set(res.configuration_keys) if res.configuration_keys is not None else None
        entries: list[DescribeConfigsResourceResult] = []
        code: ErrorCode = ErrorCode.none
        message: str | None = None
        if res.resource_type == TOPIC:
            topic = broker.topics.get(res.resource_name)
            if (illegal := topic_name_error(res.resource_name)) is not None:
                code, message = ErrorCode.invalid_topic_exception, illegal
            elif topic is None:
                code, message = (
                    ErrorCode.unknown_topic_or_partition,
                    f"Topic {res.resource_name} does not exist",
                )
            else:
                for name, (value, override) in sorted(
                    effective_configs(topic.meta.configs, values).items()
                ):
                    if wanted is not None and name not in wanted:
                        continue
                    broker_name = TOPIC_CONFIGS[name][1]
                    static = (
                        broker_name is not None
                        and _broker_source(broker_name, values) != DEFAULT_CONFIG
                    )
                    source = (
                        DYNAMIC_TOPIC_CONFIG
                        if override
                        else STATIC_BROKER_CONFIG
                        if static
                        else DEFAULT_CONFIG
                    )
                    syn = []
                    if synonyms_wanted:
                        if override:
                            syn.append(_synonym(name, value, DYNAMIC_TOPIC_CONFIG))
                        if broker_name is not None:
                            syn.extend(_broker_synonyms(broker_name, values))
                    kind = TOPIC_CONFIG_TYPES[name]
                    entries.append(_entry(name, value, source, tuple(syn), False, kind))
        elif res.resource_type == BROKER:
            if res.resource_name not in ("", str(broker.node_id)):
                code, message = (
                    ErrorCode.invalid_request,
                    f"Unexpected broker id, expected {broker.node_id} or empty "
                    f"string, but received {res.resource_name}",
                )
            elif res.resource_name:  # "": the dynamic cluster defaults, of which there are none
                for name in sorted(BROKER_CONFIGS):
                    if wanted is not None and name not in wanted:
                        continue
                    sensitive = name in SENSITIVE_CONFIGS  # as Kafka: no value, ever
                    shown = None if sensitive else _render(values[name])
                    source = _broker_source(name, values)
                    own = (_synonym(name, shown, source),) if synonyms_wanted else ()
                    entries.append(_entry(name, shown, source, own, read_only=True))
        else:
            code, message = (
                ErrorCode.invalid_request,
                f"Unsupported resource type {res.resource_type}",
            )
        results.append(_result(res, code, message, tuple(entries)))
    return DescribeConfigsResponse(throttle_time=NO_THROTTLE, results=tuple(results + refused))


def _broker_source(name: str, values: Mapping[str, Any]) -> int:
    """STATIC_BROKER_CONFIG if broker config ``name`` is set (differs from its default)."""
    return (
        STATIC_BROKER_CONFIG if _render(values[name]) != BROKER_CONFIGS[name][1] else DEFAULT_CONFIG
    )


def _broker_synonyms(name: str, values: Mapping[str, Any]) -> list[DescribeConfigsSynonym]:
    """A topic config's broker synonyms: the set value (if set), then the default."""
    out = []
    if _broker_source(name, values) == STATIC_BROKER_CONFIG:
        out.append(_synonym(name, _render(values[name]), STATIC_BROKER_CONFIG))
    out.append(_synonym(name, BROKER_CONFIGS[name][1], DEFAULT_CONFIG))
    return out


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
