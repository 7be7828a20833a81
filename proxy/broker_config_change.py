"""The new dynamic configs of a BROKER resource from an IncrementalAlterConfigs or an
AlterConfigs request, checked as Kafka's ``ConfigAdminManager.preprocess`` checks them, in its
order: duplicate config names and null values (INVALID_REQUEST), unknown operations
(INVALID_REQUEST), APPEND/SUBTRACT on a name KafkaConfig does not define (UNKNOWN_SERVER_ERROR
without a message: ``prepareIncrementalConfigs`` looks it up in a Scala map, whose
NoSuchElementException ``ApiError.fromThrowable`` answers so) or on a config that is not a list
(INVALID_CONFIG), then
``DynamicBrokerConfig.validateConfigs`` over the resource's whole new set (an incremental
change builds on the stored set less the values that do not parse, as Kafka's
``fromPersistentProps``) (INVALID_REQUEST:
"Cannot update these configs dynamically: Set(...)" for a config Kafka or kafkad has that is
not dynamic, "Invalid value ..." for a bad value), then the reconfigurables' checks
(``DynamicBrokerConfigs.validators``: a listener's new keystore, proxy/dynamic_tls.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from kio.schema.errors import ErrorCode

from proxy.broker_config_defs import BROKER_CONFIGS
from proxy.broker_config_types import LIST, THREAD_POOLS, UNKNOWN, exact_type
from proxy.dynamic_broker import DynamicBrokerConfigs, refusal
from proxy.kafka_only_configs import KAFKA_ONLY_CONFIGS
from proxy.kafka_properties import IGNORED, KRAFT, MUST_BE_ONE
from proxy.tls import per_listener_base

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

Refusal = tuple[ErrorCode, str | None]


# Kafka's own broker configs that kafkad reads from a server.properties but does not have:
# not dynamic in Kafka (``DynamicConfig.Broker.nonDynamicProps``), so a change is refused, not
# stored as a name Kafka does not know. Kafka's thread pool sizes (DynamicThreadPool,
# num.network.threads) are dynamic; zookeeper.connect is no Kafka 4 config.
_KAFKA_STATIC = (IGNORED - THREAD_POOLS) | (KRAFT - {"zookeeper.connect"}) | MUST_BE_ONE


# Kafka's LIST configs among them: an APPEND/SUBTRACT applies (then the change is refused as
# not dynamic) unless the config has no default, whose ConfigDef.NO_DEFAULT_VALUE
# ``prepareIncrementalConfigs`` fails to cast to a List (ClassCastException: no message).
_KAFKA_STATIC_LISTS = frozenset(
    {"log.dir", "log.dirs", "controller.quorum.voters", "controller.quorum.bootstrap.servers"}
)
_KAFKA_STATIC_LISTS_WITHOUT_DEFAULT = frozenset({"process.roles", "controller.listener.names"})


def _known(name: str) -> bool:
    return (
        name in BROKER_CONFIGS
        or name in KAFKA_ONLY_CONFIGS  # Kafka's others: refused unless dynamic in Kafka
        or per_listener_base(name) is not None
    )


def _read_only_if_not_dynamic(name: str) -> bool:
    """A name Kafka's KafkaConfig defines, as far as kafkad knows."""
    return _known(name) or name in _KAFKA_STATIC


def _basic(names: Sequence[str], nulls: Sequence[str]) -> Refusal | None:
    if any(n > 1 for n in Counter(names).values()):
        return ErrorCode.invalid_request, "Error due to duplicate config keys"
    if nulls:
        return ErrorCode.invalid_request, "Null value not supported for : " + ", ".join(nulls)
    return None


def incremental(
    dyn: DynamicBrokerConfigs, resource: str, ops: Sequence[tuple[str, int, str | None]]
) -> dict[str, str] | Refusal:
    """The resource's dynamic configs after ``ops`` (name, operation, value), or the refusal."""
    nulls = [n for n, op, v in ops if op != DELETE and v is None]
    if (bad := _basic([n for n, _, _ in ops], nulls)) is not None:
        return bad
    for _, op, _ in ops:
        if op not in (SET, DELETE, APPEND, SUBTRACT):
            return ErrorCode.invalid_request, f"Unknown operations type {op}"
    props = dyn.persistent(resource)
    for name, op, value in ops:
        if op == SET:
            assert value is not None
            props[name] = value
        elif op == DELETE:
            props.pop(name, None)
        else:
            assert value is not None
            kind = LIST if name in _KAFKA_STATIC_LISTS else exact_type(name)  # configKeys
            if kind == UNKNOWN and name not in _KAFKA_STATIC:  # kafkad's own names and
                return ErrorCode.unknown_server_error, None  # listener-prefixed ones too
            if name in _KAFKA_STATIC_LISTS_WITHOUT_DEFAULT and name not in props:
                return ErrorCode.unknown_server_error, None
            if kind != LIST:
                verb = "append" if op == APPEND else "subtract"
                return (
                    ErrorCode.invalid_config,
                    f"Config value {verb} is not allowed for config key: {name}",
                )
            old = props.get(name)
            if old is None:
                old = BROKER_CONFIGS[name][1] if name in BROKER_CONFIGS else None
                if old is None and name in KAFKA_ONLY_CONFIGS:
                    old = KAFKA_ONLY_CONFIGS[name][1]
                old = old or ""
            items = old.split(",") if op == SUBTRACT or old else []
            given = value.split(",")
            if op == APPEND:
                items += [v for v in given if v not in items]
            else:
                for v in given:  # Scala's List.diff: one occurrence per given value
                    if v in items:
                        items.remove(v)
            props[name] = ",".join(items)
    return _checked(dyn, resource, props)


def legacy(
    dyn: DynamicBrokerConfigs, resource: str, configs: Sequence[tuple[str, str | None]]
) -> dict[str, str] | Refusal:
    """AlterConfigs: the listed configs become the resource's whole dynamic set."""
    nulls = [n for n, v in configs if v is None]
    if (bad := _basic([n for n, _ in configs], nulls)) is not None:
        return bad
    return _checked(dyn, resource, {n: v for n, v in configs if v is not None})


def _checked(
    dyn: DynamicBrokerConfigs, resource: str, props: dict[str, str]
) -> dict[str, str] | Refusal:
    known = _read_only_if_not_dynamic
    if (message := refusal(dyn, known, props, per_broker=resource != "")) is not None:
        return ErrorCode.invalid_request, message
    for validate in dyn.validators if resource != "" else ():
        if (message := validate(props)) is not None:
            return ErrorCode.invalid_request, message
    return props
