"""Options of the `kafkad` data source, parsed and checked before anything runs.

The names are those of Spark's built-in Kafka connector, so a job moves from `format("kafka")`
to `format("kafkad")` by changing the format name. Spark hands options over case-insensitively
(lower-cased keys); `kafka.`-prefixed ones go to the Kafka client with the prefix removed,
translated from the Java client's names to librdkafka's where they differ
(`pipeline.client_config`).

Deliberate differences from Spark's connector:
- `kafka.isolation.level` defaults to `read_committed` (Spark: the Java consumer's default,
  read_uncommitted): ranges end at the last stable offset and aborted records never appear.
- Not supported (refused with a message rather than ignored): the timestamp-based
  starting/ending options, `minOffsetsPerTrigger`, `maxTriggerDelay`.
- The sink's own options: `transactionalIdPrefix` and `markerTopic` (see `pipeline.sink`).

Pure: no Spark, no Kafka client; every error is an `OptionError` naming the option.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pipeline import client_config

EARLIEST = -2  # in a JSON offsets spec, as in Spark and Kafka's ListOffsets
LATEST = -1

# What a Spark job may pass. Keys are lower-case, as Spark hands them over.
SOURCE_KEYS = {
    "subscribe",
    "subscribepattern",
    "assign",
    "startingoffsets",
    "endingoffsets",
    "maxoffsetspertrigger",
    "minpartitions",
    "maxrecordsperpartition",
    "failondataloss",
    "includeheaders",
    "groupidprefix",
    "kafkaconsumer.polltimeoutms",
    "fetchoffset.numretries",
    "fetchoffset.retryintervalms",
    "path",  # load(path) hands it over; refused if non-empty
}
# checkpointLocation, queryName, path: handed over by Spark itself.
SINK_KEYS = {
    "topic",
    "transactionalidprefix",
    "markertopic",
    "checkpointlocation",
    "queryname",
    "path",
}
UNSUPPORTED = {
    "startingtimestamp",
    "endingtimestamp",
    "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy",
    "minoffsetspertrigger",
    "maxtriggerdelay",
}
# kafka.* settings the connector owns (Spark refuses the same ones).
SOURCE_OWNED = {
    "auto.offset.reset": "use startingOffsets instead",
    "enable.auto.commit": "the source never commits offsets to Kafka",
    "key.deserializer": "keys are always read as binary",
    "value.deserializer": "values are always read as binary",
    "interceptor.classes": "not supported",
}
SINK_OWNED = {
    "key.serializer": "keys are written as binary (cast string columns)",
    "value.serializer": "values are written as binary (cast string columns)",
    "transactional.id": "the sink derives it (option transactionalIdPrefix)",
    "enable.idempotence": "the sink's producers are transactional, hence idempotent",
    "interceptor.classes": "not supported",
}
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


class OptionError(ValueError):
    """An unknown, missing or invalid option; the message names it."""


# A position spec: a keyword, or per topic-partition an offset (EARLIEST/LATEST allowed).
OffsetSpec = Literal["earliest", "latest"] | dict[tuple[str, int], int]


@dataclass(frozen=True)
class Subscription:
    """Exactly one of Spark's three ways to name what to read."""

    kind: Literal["subscribe", "subscribepattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribepattern":
            return not topic.startswith("__") and re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)


@dataclass(frozen=True)
class ReadOptions:
    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    max_records_per_partition: int | None
    fail_on_data_loss: bool
    include_headers: bool
    group_id: str | None  # kafka.group.id, else a fresh one from groupIdPrefix per client
    group_id_prefix: str
    poll_timeout_ms: int
    isolation_level: str
    client: dict[str, str] = field(default_factory=dict)  # kafka.* minus the prefix
    # Spark's KafkaOffsetReader: how often the driver retries fetching offsets, and the pause
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1000


@dataclass(frozen=True)
class WriteOptions:
    bootstrap_servers: str
    topic: str | None
    transactional_id_prefix: str
    marker_topic: str | None
    client: dict[str, str] = field(default_factory=dict)


def _split(options: Mapping[str, str], known: set[str]) -> tuple[dict[str, str], dict[str, str]]:
    plain: dict[str, str] = {}
    client: dict[str, str] = {}
    for raw_key, value in options.items():
        key = raw_key.lower()
        if key.startswith("kafka."):
            client[key[len("kafka.") :]] = value
        elif key in UNSUPPORTED:
            raise OptionError(f"option {raw_key!r} is not supported by the kafkad data source")
        elif key not in known:
            hint = ", ".join(sorted(known - {"path", "checkpointlocation", "queryname"}))
            raise OptionError(f"unknown option {raw_key!r} (known: {hint}, and kafka.*)")
        else:
            plain[key] = value
    if not client.get("bootstrap.servers"):
        raise OptionError("option 'kafka.bootstrap.servers' is required")
    try:
        client = client_config.translate(client)
    except client_config.OptionError as exc:
        raise OptionError(str(exc)) from None
    if plain.get("path"):
        raise OptionError("the kafkad data source takes no path: use options")
    return plain, client


def _int(plain: Mapping[str, str], key: str, name: str, minimum: int = 1) -> int | None:
    if key not in plain:
        return None
    try:
        value = int(plain[key])
    except ValueError:
        raise OptionError(f"option {name!r} must be an integer, got {plain[key]!r}") from None
    if value < minimum:
        raise OptionError(f"option {name!r} must be at least {minimum}, got {value}")
    return value


def _default(value: int | None, default: int) -> int:
    return default if value is None else value


def _bool(plain: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    raw = plain.get(key)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise OptionError(f"option {name!r} must be true or false, got {raw!r}")


def parse_subscription(plain: Mapping[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in plain]
    if len(given) != 1:
        raise OptionError(
            "exactly one of the options 'subscribe', 'subscribePattern', 'assign' is required"
            + (f", got {len(given)}" if given else "")
        )
    (kind,) = given
    raw = plain[kind]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError("option 'subscribe' names no topic")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribepattern":
        try:
            re.compile(raw)
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern' is not a regex: {exc}") from None
        return Subscription("subscribepattern", pattern=raw)
    spec = _json_object(raw, "assign")
    assigned: list[tuple[str, int]] = []
    for topic, parts in spec.items():
        if not isinstance(parts, list) or not all(type(p) is int and p >= 0 for p in parts):
            raise OptionError(f"option 'assign' wants {{\"topic\":[0,1]}}, got {raw!r}")
        assigned += [(topic, p) for p in parts]
    if not assigned:
        raise OptionError("option 'assign' names no partition")
    return Subscription("assign", assigned=tuple(sorted(set(assigned))))


def _json_object(raw: str, name: str) -> dict[str, object]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise OptionError(f"option {name!r} is neither a keyword nor JSON: {raw!r}") from None
    if not isinstance(value, dict):
        raise OptionError(f"option {name!r} must be a JSON object, got {raw!r}")
    return value


def parse_offset_spec(
    raw: str | None, name: str, default: OffsetSpec, *, ending: bool
) -> OffsetSpec:
    """`earliest`, `latest` or JSON `{"topic":{"0":23,"1":-2}}` (-2 earliest, -1 latest)."""
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in ("earliest", "latest"):
        if ending and word == "earliest":
            raise OptionError(f"option {name!r} cannot be 'earliest'")
        return "earliest" if word == "earliest" else "latest"
    spec: dict[tuple[str, int], int] = {}
    for topic, parts in _json_object(raw, name).items():
        if not isinstance(parts, dict):
            raise OptionError(f'option {name!r} wants {{"topic":{{"0":23}}}}, got {raw!r}')
        for part, offset in parts.items():
            if not part.lstrip("-").isdigit() or int(part) < 0 or type(offset) is not int:
                raise OptionError(f"option {name!r}: bad entry {topic!r}: {part!r}: {offset!r}")
            if offset < EARLIEST or (ending and offset == EARLIEST):
                raise OptionError(f"option {name!r}: offset {offset} for {topic}-{part}")
            spec[(topic, int(part))] = offset
    return spec


def parse_read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    plain, client = _split(options, SOURCE_KEYS)
    for key, why in SOURCE_OWNED.items():
        if key in client:
            raise OptionError(f"option 'kafka.{key}' is not allowed: {why}")
    subscription = parse_subscription(plain)
    starting = parse_offset_spec(
        plain.get("startingoffsets"),
        "startingOffsets",
        "latest" if streaming else "earliest",
        ending=False,
    )
    if not streaming and (
        starting == "latest" or (isinstance(starting, dict) and LATEST in starting.values())
    ):
        raise OptionError("option 'startingOffsets' cannot be latest in a batch query")
    if streaming and "endingoffsets" in plain:
        raise OptionError("option 'endingOffsets' is for batch queries only")
    ending = parse_offset_spec(plain.get("endingoffsets"), "endingOffsets", "latest", ending=True)
    if not streaming and "maxoffsetspertrigger" in plain:
        raise OptionError("option 'maxOffsetsPerTrigger' is for streaming queries only")
    isolation = client.pop("isolation.level", "read_committed").lower()
    if isolation not in ISOLATION_LEVELS:
        raise OptionError(f"option 'kafka.isolation.level' must be one of {ISOLATION_LEVELS}")
    group_id = client.pop("group.id", None)
    return ReadOptions(
        bootstrap_servers=client.pop("bootstrap.servers"),
        subscription=subscription,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=_int(plain, "maxoffsetspertrigger", "maxOffsetsPerTrigger"),
        min_partitions=_int(plain, "minpartitions", "minPartitions"),
        max_records_per_partition=_int(plain, "maxrecordsperpartition", "maxRecordsPerPartition"),
        fail_on_data_loss=_bool(plain, "failondataloss", "failOnDataLoss", True),
        include_headers=_bool(plain, "includeheaders", "includeHeaders", False),
        group_id=group_id,
        # Spark's defaults: spark-kafka-source for streaming queries, -relation for batch
        group_id_prefix=plain.get(
            "groupidprefix", "spark-kafka-source" if streaming else "spark-kafka-relation"
        ),
        fetch_offset_num_retries=_default(
            _int(plain, "fetchoffset.numretries", "fetchOffset.numRetries", minimum=0), 3
        ),
        fetch_offset_retry_interval_ms=_default(
            _int(plain, "fetchoffset.retryintervalms", "fetchOffset.retryIntervalMs", minimum=0),
            1000,
        ),
        poll_timeout_ms=_int(plain, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs")
        or 120_000,
        isolation_level=isolation,
        client=client,
    )


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    plain, client = _split(options, SINK_KEYS)
    for key, why in SINK_OWNED.items():
        if key in client:
            raise OptionError(f"option 'kafka.{key}' is not allowed: {why}")
    topic = plain.get("topic") or None
    marker_topic = plain.get("markertopic") or topic
    if marker_topic is None:
        raise OptionError(
            "set option 'topic' (or, when rows carry their own topic, 'markerTopic': an existing"
            " topic whose partition 0 anchors the sink's exactly-once markers)"
        )
    prefix = plain.get("transactionalidprefix", "kafkad-sink-")
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,100}", prefix):
        raise OptionError(f"option 'transactionalIdPrefix' must be [A-Za-z0-9._-]+: {prefix!r}")
    return WriteOptions(
        bootstrap_servers=client.pop("bootstrap.servers"),
        topic=topic,
        transactional_id_prefix=prefix,
        marker_topic=marker_topic,
        client=client,
    )


# The sink's input columns, as Spark's Kafka sink takes them: name -> accepted Spark types.
SINK_COLUMNS: dict[str, tuple[str, ...]] = {
    "value": ("binary", "string"),
    "key": ("binary", "string"),
    "topic": ("string",),
    "partition": ("int",),
    "headers": ("array<struct<key:string,value:binary>>",),
}


def check_sink_columns(columns: Mapping[str, str], opts: WriteOptions) -> None:
    """`columns` maps each input column to its Spark simpleString type. Columns other than
    these five are ignored, as by Spark's sink."""
    if "value" not in columns:
        raise OptionError("the kafkad sink needs a 'value' column (binary or string)")
    for name, accepted in SINK_COLUMNS.items():
        if name in columns and columns[name] not in accepted:
            raise OptionError(
                f"column {name!r} is {columns[name]}; the kafkad sink takes {' or '.join(accepted)}"
            )
    if opts.topic is None and "topic" not in columns:
        raise OptionError("set option 'topic' or give the rows a 'topic' column")
