"""Topic-level configs: names, defaults (taken from the broker's ``log.*`` settings, as in
Kafka), validation of overrides, and the effective ``LogConfig`` of a topic.

``cleanup.policy`` is a list: ``delete``, ``compact`` or both (``compact,delete``); the log
cleaner (``storage/cleaner/``) compacts, retention deletes only where ``delete`` is listed. A
compacted topic rolls its active segment at least every ``max.compaction.lag.ms`` (Kafka's
``maxSegmentMs``). Changes made with AlterConfigs/IncrementalAlterConfigs reach the open
partitions at once (``TopicManager.alter_configs``).

``internal.segment.bytes`` is Kafka's internal topic config (``LogConfig.defineInternal``, "for
testing only"): an INT with no default and no range check which, when set, replaces
``segment.bytes`` (whose minimum is 1 MiB) as the segment size; it is listed by DescribeConfigs
and CreateTopics only where it is set (Kafka's ``resolveEffectiveTopicConfigs``).

``compression.type`` takes Kafka's values: ``producer`` keeps each batch's own codec,
``uncompressed``/``gzip``/``snappy``/``lz4``/``zstd`` make the broker recompress batches of
another codec (``storage/log_validator.py``), at the level ``compression.<codec>.level`` gives
(KIP-390; snappy has none).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from storage.api import LogConfig
from wire.values import INT_MAX

_LONG_MAX = str(2**63 - 1)


_INT_MIN, _LONG_MIN, _LONG_MAX_N = -(2**31), -(2**63), 2**63 - 1


class WholeMessage(ValueError):
    """A ``ConfigException(message)`` of Kafka's: the message is all of it, not wrapped as
    "Invalid value V for configuration N: ..."."""


def _number(kind: str, low: int | None = None) -> Callable[[str], int]:
    """Kafka's ConfigDef INT or LONG, with ``Range.atLeast(low)``: its messages."""
    lo, hi = (_INT_MIN, INT_MAX) if kind == "INT" else (_LONG_MIN, _LONG_MAX_N)

    def parse(v: str) -> int:
        try:
            n = int(v.strip())
        except ValueError:
            raise ValueError(f"Not a number of type {kind}") from None
        if not lo <= n <= hi:
            raise ValueError(f"Not a number of type {kind}")
        if low is not None and n < low:
            raise ValueError(f"Value must be at least {low}")
        return n

    return parse


def _int(low: int | None = None) -> Callable[[str], int]:
    return _number("INT", low)


def _long(low: int | None = None) -> Callable[[str], int]:
    return _number("LONG", low)


def _bool(v: str) -> bool:
    if v.strip().lower() not in ("true", "false"):
        raise ValueError("Expected value to be either true or false")
    return v.strip().lower() == "true"


def _ratio(v: str) -> float:
    """A DOUBLE between 0 and 1 (Kafka's ``Range.between(0, 1)``)."""
    try:
        n = float(v.strip())
    except ValueError:
        raise ValueError("Not a number of type DOUBLE") from None
    if n < 0:
        raise ValueError("Value must be at least 0")
    if n > 1:
        raise ValueError("Value must be no more than 1")
    return n


def _list(v: str) -> list[str]:
    """ConfigDef's LIST parse: empty, or split at commas with any whitespace around them."""
    trimmed = v.strip()
    return re.split(r"\s*,\s*", trimmed) if trimmed else []


def _throttled_replicas(name: str) -> Callable[[str], str]:
    """Kafka's ``ThrottledReplicaListValidator``: ``*`` or partitionId:brokerId pairs (its
    message shows the parsed list, as Java prints it)."""

    def parse(v: str) -> str:
        items = _list(v)
        if not (all(re.fullmatch(r"([0-9]+:[0-9]+)?", x) for x in items) or "".join(items) == "*"):
            raise WholeMessage(
                f"Invalid value [{', '.join(items)}] for configuration {name}: "
                f"{name} must be the literal '*' or a list of replicas in the following "
                "format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
            )
        return v

    return parse


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(v: str) -> str:
        if v not in allowed:  # Kafka's ValidString
            raise ValueError(f"String must be one of: {', '.join(allowed)}")
        return v

    return parse


def _level(low: int, high: int, default: int | None = None) -> Callable[[str], int]:
    """A compression level in [low, high] (gzip: or its default, -1), with Kafka's messages."""

    def parse(v: str) -> int:
        level = _int()(v)  # ConfigDef's INT parse, then the validator
        if default is not None:
            if level > high or (level < low and level != default):
                raise ValueError(f"Value must be between {low} and {high} or equal to {default}")
        elif level < low:
            raise ValueError(f"Value must be at least {low}")
        elif level > high:
            raise ValueError(f"Value must be no more than {high}")
        return level

    return parse


def _policy(v: str) -> str:
    """Kafka 4.2's ``ValidList.in("compact", "delete")``: empty allowed (neither compacted nor
    deleted by retention), no duplicates, no empty items."""
    items = _list(v)
    name = "cleanup.policy"
    if len(set(items)) != len(items):
        raise WholeMessage(f"Configuration '{name}' values must not be duplicated.")
    for x in items:
        if not x:
            raise WholeMessage(f"Configuration '{name}' values must not be empty.")
        if x not in ("compact", "delete"):
            raise WholeMessage(
                f"Invalid value {x} for configuration {name}: "
                "String must be one of: compact, delete"
            )
    return ",".join(sorted(items))


# compression.type -> the codec batches are stored with (None: the producer's own)
COMPRESSION_CODECS: Mapping[str, int | None] = {
    "producer": None,
    "uncompressed": 0,
    "gzip": 1,
    "snappy": 2,
    "lz4": 3,
    "zstd": 4,
}


LEVEL_CONFIGS: Mapping[int, str] = {
    1: "compression.gzip.level",
    3: "compression.lz4.level",
    4: "compression.zstd.level",
}
# topic configs whose broker config of the same name is their default
COMPRESSION_CONFIGS = ("compression.type", *LEVEL_CONFIGS.values())


def cleanup_flags(policy: str) -> tuple[bool, bool]:
    """(compact, delete) of a ``cleanup.policy`` value."""
    items = {x.strip() for x in policy.split(",")}
    return "compact" in items, "delete" in items


# topic config -> (parser, broker config supplying the default or None, fixed default)
TOPIC_CONFIGS: Mapping[str, tuple[Callable[[str], Any], str | None, str]] = {
    "cleanup.policy": (_policy, "log.cleanup.policy", "delete"),
    "compression.type": (
        _choice("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        "compression.type",
        "producer",
    ),
    # KIP-390: the level the broker compresses with when it recompresses (compression.type)
    "compression.gzip.level": (_level(1, 9, -1), "compression.gzip.level", "-1"),
    "compression.lz4.level": (_level(1, 17), "compression.lz4.level", "9"),
    "compression.zstd.level": (_level(-131072, 22), "compression.zstd.level", "3"),
    "delete.retention.ms": (_long(0), "log.cleaner.delete.retention.ms", "86400000"),
    "file.delete.delay.ms": (_long(0), "log.segment.delete.delay.ms", "60000"),
    "flush.messages": (_long(1), "log.flush.interval.messages", _LONG_MAX),
    "flush.ms": (_long(0), "log.flush.interval.ms", _LONG_MAX),
    # replication throttles (KIP-73): stored and shown; a single node replicates nothing
    "follower.replication.throttled.replicas": (
        _throttled_replicas("follower.replication.throttled.replicas"),
        None,
        "",
    ),
    "index.interval.bytes": (_int(0), "log.index.interval.bytes", "4096"),
    "leader.replication.throttled.replicas": (
        _throttled_replicas("leader.replication.throttled.replicas"),
        None,
        "",
    ),
    # tiered storage (KIP-405): stored and shown; kafkad has no remote storage, so
    # remote.storage.enable=true is refused as Kafka refuses it when the broker's
    # remote.log.storage.system.enable is false (check_combination)
    "local.retention.bytes": (_long(-2), None, "-2"),
    "local.retention.ms": (_long(-2), None, "-2"),
    "max.compaction.lag.ms": (_long(1), "log.cleaner.max.compaction.lag.ms", _LONG_MAX),
    "max.message.bytes": (_int(0), "message.max.bytes", "1048588"),
    "message.timestamp.after.max.ms": (_long(0), None, "3600000"),
    "message.timestamp.before.max.ms": (_long(0), None, _LONG_MAX),
    "message.timestamp.type": (
        _choice("CreateTime", "LogAppendTime"),
        "log.message.timestamp.type",
        "CreateTime",
    ),
    "min.cleanable.dirty.ratio": (_ratio, "log.cleaner.min.cleanable.ratio", "0.5"),
    "min.compaction.lag.ms": (_long(0), "log.cleaner.min.compaction.lag.ms", "0"),
    "min.insync.replicas": (_int(1), "min.insync.replicas", "1"),
    "preallocate": (_bool, None, "false"),
    "remote.log.copy.disable": (_bool, None, "false"),
    "remote.log.delete.on.disable": (_bool, None, "false"),
    "remote.storage.enable": (_bool, None, "false"),
    "retention.bytes": (_long(), "log.retention.bytes", "-1"),
    "retention.ms": (_long(-1), "log.retention.ms", "604800000"),
    "segment.bytes": (_int(1024 * 1024), "log.segment.bytes", "1073741824"),
    "segment.index.bytes": (_int(4), "log.index.size.max.bytes", "10485760"),
    "segment.jitter.ms": (_long(0), None, "0"),
    "segment.ms": (_long(1), "log.roll.ms", "604800000"),
    "unclean.leader.election.enable": (_bool, None, "false"),
    "internal.segment.bytes": (_int(), None, ""),
}
# Kafka's internal topic configs: accepted, shown only where a topic sets them
INTERNAL_TOPIC_CONFIGS = frozenset({"internal.segment.bytes"})

# Kafka's ConfigDef type of each topic config, as DescribeConfigs v3+ reports it
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7
TOPIC_CONFIG_TYPES: Mapping[str, int] = {
    **{
        name: LONG
        for name, (parse, _, _) in TOPIC_CONFIGS.items()
        if getattr(parse, "__qualname__", "").startswith("_number")
    },
    **{name: BOOLEAN for name, (parse, _, _) in TOPIC_CONFIGS.items() if parse is _bool},
    "cleanup.policy": LIST,
    "follower.replication.throttled.replicas": LIST,
    "leader.replication.throttled.replicas": LIST,
    "min.cleanable.dirty.ratio": DOUBLE,
    "compression.type": STRING,
    "message.timestamp.type": STRING,
    **{
        name: INT
        for name in (
            "compression.gzip.level",
            "compression.lz4.level",
            "compression.zstd.level",
            "index.interval.bytes",
            "max.message.bytes",
            "min.insync.replicas",
            "segment.bytes",
            "segment.index.bytes",
            "internal.segment.bytes",
        )
    },
}


def validate_overrides(overrides: Mapping[str, str | None]) -> str | None:
    """None if every override names a known topic config with a valid value, else a message
    for INVALID_CONFIG."""
    for name, value in overrides.items():
        if name not in TOPIC_CONFIGS:
            return f"Unknown topic config name: {name}"
        if value is None:
            return f"Null value not supported for topic config: {name}"
        try:
            TOPIC_CONFIGS[name][0](value)
        except WholeMessage as exc:
            return str(exc)
        except ValueError as exc:
            return f"Invalid value {value} for configuration {name}: {exc}"
    return None


def effective_configs(
    overrides: Mapping[str, str], broker_values: Mapping[str, Any]
) -> dict[str, tuple[str, bool]]:
    """Every topic config -> (value as a string, is it a topic-level override); an internal
    one only if overridden."""
    out: dict[str, tuple[str, bool]] = {}
    for name, (_, broker_name, fixed) in TOPIC_CONFIGS.items():
        if name in INTERNAL_TOPIC_CONFIGS and name not in overrides:
            continue
        if name in overrides:
            out[name] = (overrides[name], True)
        elif broker_name is not None and broker_name in broker_values:
            out[name] = (str(broker_values[broker_name]), False)
        else:
            out[name] = (fixed, False)
    return out


def check_combination(overrides: Mapping[str, str], broker_values: Mapping[str, Any]) -> str | None:
    """Checks across configs (Kafka's LogConfig.validateValues): None or an INVALID_CONFIG
    message."""
    eff = {k: v for k, (v, _) in effective_configs(overrides, broker_values).items()}
    if eff["remote.storage.enable"].strip().lower() == "true":  # LogConfig.validate
        return (
            "Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage."
        )
    if int(eff["min.compaction.lag.ms"]) > int(eff["max.compaction.lag.ms"]):
        return (
            "conflict topic config setting min.compaction.lag.ms "
            f"({eff['min.compaction.lag.ms']}) > max.compaction.lag.ms "
            f"({eff['max.compaction.lag.ms']})"
        )
    return None


def topic_log_config(base: LogConfig, overrides: Mapping[str, str]) -> LogConfig:
    """The broker's log defaults with the topic's overrides applied."""
    o = overrides
    changes: dict[str, Any] = {}
    if "cleanup.policy" in o:
        changes["compact"], changes["delete"] = cleanup_flags(o["cleanup.policy"])
    for cfg, attr in (
        ("delete.retention.ms", "delete_retention_ms"),
        ("min.compaction.lag.ms", "min_compaction_lag_ms"),
        ("max.compaction.lag.ms", "max_compaction_lag_ms"),
    ):
        if cfg in o:
            changes[attr] = int(o[cfg])
    if "min.cleanable.dirty.ratio" in o:
        changes["min_cleanable_dirty_ratio"] = float(o["min.cleanable.dirty.ratio"])
    for cfg, attr in (
        ("segment.bytes", "segment_bytes"),
        ("segment.ms", "segment_ms"),
        ("retention.ms", "retention_ms"),
        ("retention.bytes", "retention_bytes"),
        ("index.interval.bytes", "index_interval_bytes"),
        ("segment.index.bytes", "segment_index_bytes"),
        ("file.delete.delay.ms", "file_delete_delay_ms"),
    ):
        if cfg in o:
            changes[attr] = int(o[cfg])
    for cfg, attr in (("flush.messages", "flush_messages"), ("flush.ms", "flush_ms")):
        if cfg in o:
            changes[attr] = int(o[cfg])
    if "internal.segment.bytes" in o:  # Kafka's LogConfig.segmentSize(): it wins when set
        changes["segment_bytes"] = int(o["internal.segment.bytes"])
    out = replace(base, **changes)
    if out.compact and out.max_compaction_lag_ms < out.segment_ms:
        # Kafka's LogConfig.maxSegmentMs (KIP-354): a compacted log rolls at the latest when
        # max.compaction.lag.ms is reached, so its records become cleanable in time
        out = replace(out, segment_ms=out.max_compaction_lag_ms)
    return out


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
LIST_CONFIGS = frozenset(name for name, kind in TOPIC_CONFIG_TYPES.items() if kind == LIST)


def incremental_overrides(
    current: Mapping[str, str],
    ops: Sequence[tuple[str, int, str | None]],
    broker_values: Mapping[str, Any],
) -> dict[str, str] | tuple[str, str]:
    """IncrementalAlterConfigs on a topic (Kafka's ``ConfigAdminManager`` +
    ``prepareIncrementalConfigs``): the new overrides, or (error name, message) with error
    name ``invalid_request`` or ``invalid_config``. ``ops`` are (name, operation, value):
    SET replaces, DELETE removes the override (back to the default), APPEND/SUBTRACT add or
    remove items of a list config (starting from the current effective value)."""
    names = [name for name, _, _ in ops]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        return "invalid_request", f"Error due to duplicate config keys : {', '.join(dup)}"
    out = dict(current)
    effective = effective_configs(current, broker_values)
    for name, op, value in ops:
        if op not in (SET, DELETE, APPEND, SUBTRACT):
            return "invalid_request", f"Unknown operation type {op} for config {name}"
        if name not in TOPIC_CONFIGS:
            return "invalid_config", f"Unknown topic config name: {name}"
        if op == DELETE:
            out.pop(name, None)
            continue
        if value is None:
            return "invalid_request", f"Null value not supported for : {name}"
        if op == SET:
            out[name] = value
            continue
        if name not in LIST_CONFIGS:  # the KRaft controller's ConfigurationControlManager
            kind = "APPEND" if op == APPEND else "SUBTRACT"
            return "invalid_config", f"Can't {kind} to key {name} because its type is not LIST."
        items = [x for x in effective[name][0].split(",") if x]
        given = [x.strip() for x in value.split(",") if x.strip()]
        if op == APPEND:
            items += [x for x in given if x not in items]
        else:  # (Kafka 4.2 allows an empty list config: cleanup.policy "" or no replicas)
            items = [x for x in items if x not in given]
        out[name] = ",".join(items)
    return out
