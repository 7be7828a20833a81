"""DescribeConfigs (key 32), v1-4. v1: config source and synonyms. v3: config type and
documentation. v4: flexible.

Resource types: TOPIC (2) lists every topic config with its effective value; an illegal topic
name is INVALID_TOPIC_EXCEPTION, a missing topic UNKNOWN_TOPIC_OR_PARTITION. BROKER (4) lists,
for this node's id, every broker config kafkad has (and any stored dynamically; and Kafka's
log.dir(s), process.roles and time alternates, ``KAFKA_ONLY``; and every other config Kafka
4.2 defines, proxy/kafka_only_configs.py, at Kafka's default unless set) with its value,
Kafka's type, documentation (v3+), read_only unless dynamic (``proxy/dynamic_broker.py``),
sensitive (no value) for a password or a config Kafka does not define
(``proxy/broker_config_types.py``); "" (the cluster default) lists, as Kafka's ConfigHelper,
only the dynamic cluster-wide defaults.
Anything else is INVALID_REQUEST. Synonyms and source, as Kafka's ConfigHelper: the topic
override (for a topic), then the broker config's alternates (log.retention.ms/minutes/hours,
...) in each layer, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG,
DEFAULT_CONFIG, from the config's own first entry; the source is the first synonym's, else
DEFAULT_CONFIG.

STATIC_BROKER_CONFIG is what the static config sets, as Kafka's originals
(``proxy/static_originals.py``): a config file, the environment, ``--set``, and the command
line's ``listeners`` (``--listen``), ``advertised.listeners``, ``log.dirs`` (the data dir),
``node.id`` and ``process.roles``, whatever their value. A broker config's value is Kafka's:
a config whose Kafka default is null shows null while unset (``NULL_DEFAULTS``:
advertised.listeners, ssl.keystore.location, ...; log.retention.ms, log.roll.ms and
log.flush.interval.ms too, though kafkad's effective value then comes from their hours /
scheduler alternates, which are listed as Kafka lists them); a LIST with its items trimmed,
a DOUBLE as Java's Double.toString prints it (1.0E7); a listener.name.<l>.<config>, no
KafkaConfig key, as set (Kafka lists it from the originals).

Authorization (Kafka's ``ConfigHelper.handleDescribeConfigsRequest``): DESCRIBE_CONFIGS on the
topic for a topic, on the cluster for a broker; a refused resource is answered, after the
others, TOPIC_ / CLUSTER_AUTHORIZATION_FAILED with Kafka's message and no configs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal
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
from proxy.broker_config_defs import BROKER_CONFIGS, INTERNAL_CONFIGS
from proxy.broker_config_types import (
    BOOLEAN,
    DOUBLE,
    INT,
    KAFKA_ONLY,
    LIST,
    LONG,
    NULL_DEFAULTS,
    SHORT,
    UNKNOWN,
    config_type,
    documentation,
    exact_type,
    listener_base,
    sensitive,
)
from proxy.context import RequestContext
from proxy.dynamic_broker import ALTERNATES, DYNAMIC, LISTENERS, DynamicBrokerConfigs, render
from proxy.kafka_only_configs import INTERNAL, KAFKA_DYNAMIC, KAFKA_ONLY_CONFIGS
from proxy.registry import handler
from storage.topic_config import TOPIC_CONFIG_TYPES, TOPIC_CONFIGS, effective_configs
from storage.topics import topic_name_error
from wire.values import NO_THROTTLE

TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5
PASSWORD = 9


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
    kind: int,
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
        config_type=i8(PASSWORD if value is None else kind),
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
        # Kafka's ConfigHelperUtils: no names or an empty list of names asks for every config
        wanted = set(res.configuration_keys) if res.configuration_keys else None
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
                    all_syn = [_synonym(name, value, DYNAMIC_TOPIC_CONFIG)] if override else []
                    if broker_name is not None:
                        all_syn += [
                            _synonym(n, v, src)
                            for n, v, src in broker.dynamic.synonyms(broker_name, per_broker=True)
                        ]
                    source = all_syn[0].source if all_syn else DEFAULT_CONFIG
                    syn = tuple(all_syn) if synonyms_wanted else ()
                    kind = TOPIC_CONFIG_TYPES[name]
                    entries.append(_entry(name, value, source, syn, False, kind))
        elif res.resource_type == BROKER:
            name = res.resource_name
            broker_id = None if name == "" else _broker_id(name)
            if name != "" and broker_id is None:
                code, message = (
                    ErrorCode.invalid_request,
                    f"Broker id must be an integer, but it is: {name}",
                )
            elif broker_id is not None and broker_id != broker.node_id:
                code, message = (
                    ErrorCode.invalid_request,
                    f"Unexpected broker id, expected {broker.node_id} or empty "
                    f"string, but received {name}",
                )
            else:
                entries = broker_entries(
                    broker.dynamic,
                    values,
                    "" if broker_id is None else str(broker_id),
                    wanted,
                    synonyms=synonyms_wanted,
                    docs=req.include_documentation,
                )
        else:
            code, message = (
                ErrorCode.invalid_request,
                f"Unsupported resource type {res.resource_type}",
            )
        results.append(_result(res, code, message, tuple(entries)))
    return DescribeConfigsResponse(throttle_time=NO_THROTTLE, results=tuple(results + refused))


def _broker_id(name: str) -> int | None:
    """Kafka's ``resourceNameToBrokerId``: Java's ``Integer.parseInt`` ("+1", "01"), else None."""
    if re.fullmatch(r"[+-]?[0-9]+", name) is None or not -(2**31) <= int(name) < 2**31:
        return None
    return int(name)


def broker_entries(
    dynamic: DynamicBrokerConfigs,
    values: Mapping[str, Any],
    resource: str,
    wanted: set[str] | None,
    *,
    synonyms: bool,
    docs: bool,
) -> list[DescribeConfigsResourceResult]:
    """Kafka's ConfigHelper for a BROKER resource: for the node id every config (kafkad's and
    any stored dynamically) with its effective value; for "" (the cluster default) only the
    dynamic cluster-wide ones. Source: the first synonym's (Kafka's order), else DEFAULT."""
    per_broker = resource != ""
    if per_broker:  # Kafka: the KafkaConfig's originals, a static listener override too
        names = set(BROKER_CONFIGS) | KAFKA_ONLY | set(KAFKA_ONLY_CONFIGS)
        names |= set(dynamic.layer("")) | set(dynamic.layer(resource))
        names |= {n for n in dynamic.static if listener_base(n)}
        names |= {n for n in dynamic.originals if exact_type(n) != UNKNOWN}
    else:
        names = set(dynamic.layer(""))
    out = []
    for name in sorted(names):
        if wanted is not None and name not in wanted:
            continue
        hidden = sensitive(name)  # as Kafka: a password or an unknown config, never shown
        raw = _value(dynamic, values, name, resource)
        all_syn = [
            _synonym(n, None if hidden else v, src)
            for n, v, src in dynamic.synonyms(name, per_broker=per_broker)
        ]
        internal = name in INTERNAL_CONFIGS or name in INTERNAL
        if internal and (not all_syn or all_syn[0].source == DEFAULT_CONFIG):
            continue  # Kafka lists an internal config only when the broker's config sets it
        if name in NULL_DEFAULTS and not all_syn:  # unset, Kafka's default null: shown null
            raw = None
        out.append(
            DescribeConfigsResourceResult(
                name=name,
                value=None if hidden else raw,
                # Kafka: AllDynamicConfigs.contains(name), base names only (so a listener's
                # override listener.name.<l>.max.connections is read-only, though alterable)
                read_only=name not in DYNAMIC | LISTENERS | KAFKA_DYNAMIC,
                config_source=i8(all_syn[0].source if all_syn else DEFAULT_CONFIG),
                is_sensitive=hidden,
                synonyms=tuple(all_syn) if synonyms else (),
                config_type=i8(config_type(name)),
                documentation=documentation(name) if docs else None,
            )
        )
    return out


# Configs whose Kafka value is not kafkad's effective value: the configs the command line sets
# (kafkad keeps "" for --listen's), the ms forms (kafkad's value comes from their alternates
# too) and Kafka's configs kafkad has none of. Shown as Kafka's KafkaConfig holds them: the
# highest layer that sets exactly that name, else Kafka's default.
_AS_SET = KAFKA_ONLY | set(ALTERNATES) | {"listeners", "advertised.listeners"}
_AS_SET |= {"controller.listener.names"}


def _value(
    dynamic: DynamicBrokerConfigs, values: Mapping[str, Any], name: str, resource: str
) -> str | None:
    """Kafka's value of ``name``: its KafkaConfig's (``nonInternalValues``, parsed and printed
    back); for the cluster default, the dynamic default's string as stored."""
    if resource == "":  # Kafka: currentDynamicDefaultConfigs, the strings as stored
        return dynamic.layer("").get(name)
    layers = (dynamic.layer(resource), dynamic.layer(""), dynamic.originals)
    if listener_base(name) is not None:  # no KafkaConfig key: its originals' string as set
        raw = next((x[name] for x in layers if name in x), None)
        return render(values[name]) if raw is None and name in values else raw
    if name in values and (name not in _AS_SET or any(name in x for x in layers[:2])):
        value: str | None = render(values[name])
    else:
        value = next((x[name] for x in layers if name in x), dynamic.default(name))
    return None if value is None else _kafka_form(value, config_type(name))


def _kafka_form(value: str, kind: int) -> str:
    """A value as Kafka's ConfigDef parses and prints it: trimmed (``String.trim``); a LIST's
    items trimmed and joined with commas; a number in its canonical form; a boolean lower-case."""
    text = value.strip("".join(map(chr, range(33))))
    if kind == LIST:
        return ",".join(re.split(r"\s*,\s*", text)) if text else ""
    if kind in (INT, LONG, SHORT) and re.fullmatch(r"[+-]?[0-9]+", text):
        return str(int(text))
    if kind == BOOLEAN and text.lower() in ("true", "false"):  # Boolean.toString
        return text.lower()
    if kind == DOUBLE and re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", text):
        return java_double(float(text))
    return text


def java_double(x: float) -> str:
    """Java's ``Double.toString``: the shortest digits, with a ``.0`` at least; computerized
    scientific notation (``1.0E7``, ``1.7976931348623157E308``) outside [10^-3, 10^7)."""
    if not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        return repr(x)  # Python's shortest digits, fixed notation in this range
    shortest = Decimal(repr(abs(x))).normalize().as_tuple()
    digits = "".join(map(str, shortest.digits))
    power = len(digits) - 1 + int(shortest.exponent)
    return f"{'-' if x < 0 else ''}{digits[0]}.{digits[1:] or '0'}E{power}"
