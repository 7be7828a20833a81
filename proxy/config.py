"""Broker configuration: Kafka's own config names, Kafka 4.x defaults.

Sources, lowest precedence first: built-in defaults, a Kafka-style ``server.properties`` file
(``--config FILE``), environment variables (``KAFKAD_`` + the name upper-cased with dots as
underscores, e.g. ``KAFKAD_AUTO_CREATE_TOPICS_ENABLE=false``), then ``--set name=value``.
Unknown names (and ``KAFKAD_`` variables that are neither a config nor a CLI option) are
refused at start-up rather than ignored, so a typo never silently runs a broker with the wrong
settings. Each config's parser is its definition: it checks type and range (Kafka's ConfigDef
validators) and says what is wrong; every problem, with the source it came from, is reported
at once in one ``ConfigError`` line. Kafka's own names in a properties file (``listeners``,
``log.dirs``, KRaft settings, ...) are translated by ``proxy/kafka_properties.py``.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proxy.acl.settings import ACL_CONFIGS
from proxy.acl.settings import SENSITIVE as ACL_SENSITIVE
from proxy.broker_config_types import PASSWORDS
from proxy.config_ranges import at_least, whole_number
from proxy.connection_quota_config import (
    overrides_parser,
    validate_values,
)
from proxy.fault_injection import parse_spec
from proxy.http.settings import parse_http_listeners
from proxy.kafka_properties import translate
from proxy.listeners import (
    DEFAULT_PROTOCOL_MAP,
    WILDCARD_HOSTS,
    Listener,
    ListenerError,
    host_port,
    listener_map,
    parse_listeners,
)
from proxy.sasl.settings import SASL_CONFIGS, SASL_PROTOCOLS, SaslConfigError, listener_sasl
from proxy.sasl.settings import SENSITIVE as SASL_SENSITIVE
from proxy.static_originals import static_originals
from proxy.tls import (
    PER_LISTENER,
    SSL_CONFIGS,
    TLS_PROTOCOLS,
    TlsConfigError,
    per_listener_base,
    server_settings,
)
from storage.api import LogConfig
from storage.topic_config import COMPRESSION_CONFIGS, TOPIC_CONFIGS, cleanup_flags
from wire.values import INT_MAX, LONG_MAX


def _bool(v: str) -> bool:
    s = v.strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ValueError("must be true or false")


def _number(v: str) -> float:
    try:
        return float(v.strip())
    except ValueError:
        raise ValueError("must be a number") from None


# Plain ``int``/``float`` parsers (configs added without a range) still get readable errors.
_READABLE: dict[Any, Callable[[str], Any]] = {int: whole_number, float: _number}


def unlimited_or_at_least(low: int) -> Callable[[str], int]:
    """-1 (no limit) or ``low`` and up: Kafka's rule for ``log.retention.ms``."""

    def parse(v: str) -> int:
        n = whole_number(v)
        if n != -1 and not low <= n <= LONG_MAX:
            raise ValueError(f"must be -1 (unlimited) or at least {low}")
        return n

    return parse


_int = at_least(-(2**31), INT_MAX)  # any Java int
_long = at_least(-(2**63))  # any Java long
_positive_int = at_least(1, INT_MAX)
_non_negative_int = at_least(0, INT_MAX)
_positive_long = at_least(1)
_non_negative_long = at_least(0)


def _cleanup_policy(v: str) -> Any:
    return TOPIC_CONFIGS["cleanup.policy"][0](v)


def _timestamp_type(v: str) -> str:
    if v not in ("CreateTime", "LogAppendTime"):
        raise ValueError("must be CreateTime or LogAppendTime")
    return v


def _fault_spec(v: str) -> str:
    parse_spec(v)  # raises ValueError naming what is wrong
    return v


def _http_listeners(v: str) -> str:
    parse_http_listeners(v)  # raises ValueError naming what is wrong
    return v


def _list(v: str) -> list[str]:
    return [x.strip() for x in v.split(",") if x.strip()]


def _rebalance_protocols(v: str) -> str:
    """Kafka's GroupCoordinatorConfig: classic, consumer, share, streams; classic required.
    kafkad serves classic and consumer; share and streams are refused."""
    names = _list(v.lower())
    for n in names:
        if n not in ("classic", "consumer"):
            raise ValueError(f"{n} is not a group protocol kafkad serves (classic, consumer)")
    if "classic" not in names:
        raise ValueError("must include classic")
    return ",".join(dict.fromkeys(names))  # normalised, as DescribeConfigs shows it


# Kafka's built-in assignor classes and the names they answer to.
_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def _assignors(v: str) -> str:
    names = [_ASSIGNOR_CLASSES.get(n, n) for n in _list(v)]
    if not names:
        raise ValueError("must name at least one assignor")
    for n in names:
        if n not in ("uniform", "range"):
            raise ValueError(f"{n} is not an assignor kafkad has (uniform, range)")
    return ",".join(dict.fromkeys(names))  # normalised, as DescribeConfigs shows it


def _migration_policy(v: str) -> str:
    """Kafka's CaseInsensitiveValidString over ConsumerGroupMigrationPolicy."""
    policy = v.strip().lower()
    if policy not in ("disabled", "upgrade", "downgrade", "bidirectional"):
        raise ValueError("must be one of disabled, upgrade, downgrade, bidirectional")
    return policy


def _ratio(v: str) -> float:
    n = _number(v)
    if not 0 <= n <= 1:
        raise ValueError("must be between 0 and 1")
    return n


# name -> (parser, default). Only what kafkad honours is listed. Ranges are Kafka's ConfigDef
# validators (and KafkaConfig's start-up checks: node.id >= 0 in KRaft, log.roll.ms >= 1,
# log.retention.ms -1 or >= 1). Stricter than Kafka: default.replication.factor >= 1 (Kafka has
# no range; below 1 every CreateTopics that asks for the default fails) and the replication
# settings a properties file may carry (proxy/kafka_properties.py: they must be 1).
# configs Kafka defines as internal (defineInternal): its DescribeConfigs of a broker lists one
# only when the broker's config sets it (ConfigHelperUtils.createResponseConfig: originals +
# nonInternalValues)
INTERNAL_CONFIGS = frozenset(
    {"group.consumer.regex.refresh.interval.ms", "producer.id.expiration.check.interval.ms"}
)

BROKER_CONFIGS: Mapping[str, tuple[Callable[[str], Any], str]] = {
    "node.id": (_non_negative_int, "1"),
    # Named client listeners (proxy/listeners.py); empty: --listen's one listener, else
    # 127.0.0.1:9092. Checked together in load_config.
    "listeners": (str, ""),
    "advertised.listeners": (str, ""),
    "listener.security.protocol.map": (str, DEFAULT_PROTOCOL_MAP),
    "auto.create.topics.enable": (_bool, "true"),
    "num.partitions": (_positive_int, "1"),
    "default.replication.factor": (_positive_int, "1"),
    "delete.topic.enable": (_bool, "true"),
    # Kafka's GroupCoordinatorConfig gives these three no range (a negative delay is none, a
    # negative minimum no minimum): a server.properties Kafka starts with must start kafkad.
    "group.initial.rebalance.delay.ms": (_int, "3000"),
    "group.min.session.timeout.ms": (_int, "6000"),
    "group.max.session.timeout.ms": (_int, "1800000"),
    "group.max.size": (_positive_int, "2147483647"),
    # KIP-848 (coordinator/consumer_group/): the protocols served (Kafka 4's default; "classic"
    # is required), the consumer protocol's heartbeat interval and session timeout (and the
    # bounds Kafka's dynamic group configs are checked against), its server-side assignors
    # (the first the default; Kafka's class names are accepted too) and its maximum group size.
    "group.coordinator.rebalance.protocols": (_rebalance_protocols, "classic,consumer"),
    "group.consumer.heartbeat.interval.ms": (at_least(1, INT_MAX), "5000"),
    "group.consumer.min.heartbeat.interval.ms": (at_least(1, INT_MAX), "5000"),
    "group.consumer.max.heartbeat.interval.ms": (at_least(1, INT_MAX), "15000"),
    "group.consumer.session.timeout.ms": (at_least(1, INT_MAX), "45000"),
    "group.consumer.min.session.timeout.ms": (at_least(1, INT_MAX), "45000"),
    "group.consumer.max.session.timeout.ms": (at_least(1, INT_MAX), "60000"),
    "group.consumer.assignors": (_assignors, "uniform,range"),
    "group.consumer.max.size": (_positive_int, "2147483647"),
    # how long a regex subscription's resolved topics stand with the topics unchanged (a
    # DESCRIBE granted since is seen after it); internal in Kafka, at least 10 s
    "group.consumer.regex.refresh.interval.ms": (at_least(10_000, INT_MAX), "600000"),
    # online migration between classic and consumer groups (coordinator/group/migration.py)
    "group.consumer.migration.policy": (_migration_policy, "bidirectional"),
    "offsets.topic.num.partitions": (_positive_int, "50"),
    # Offsets retention (coordinator/group/offsets_api.py): an offset expires this long after
    # its commit (simple groups), or after its group became Empty; checked every interval.
    "offsets.retention.minutes": (_positive_int, "10080"),
    "offsets.retention.check.interval.ms": (_positive_long, "600000"),
    # The transaction coordinator (coordinator/txn/runtime.py, spec eos.md §4.12).
    "transaction.state.log.num.partitions": (_positive_int, "50"),
    "transaction.max.timeout.ms": (_positive_int, "900000"),
    "transactional.id.expiration.ms": (_positive_int, "604800000"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (_positive_int, "10000"),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (_positive_int, "3600000"),
    # Fetch sessions (KIP-227, proxy/fetch_session.py): split over 8 shards as in Kafka
    "max.incremental.fetch.session.cache.slots": (_non_negative_int, "1000"),
    # Client quotas' rate windows (proxy/quotas/throttle.py, Kafka's QuotaConfig).
    "quota.window.num": (_positive_int, "11"),
    "quota.window.size.seconds": (_positive_int, "1"),
    # the controller mutation quota's (KIP-599, proxy/quotas/mutation.py): its own windows
    "controller.quota.window.num": (_positive_int, "11"),
    "controller.quota.window.size.seconds": (_positive_int, "1"),
    "socket.request.max.bytes": (_positive_int, "104857600"),
    # Connection quotas (proxy/connection_quotas.py), Kafka's defaults (Integer.MAX_VALUE: no
    # limit); max.connections and the rate also per listener (listener.name.<name>.<config>)
    "max.connections": (_non_negative_int, str(INT_MAX)),
    "max.connections.per.ip": (_non_negative_int, str(INT_MAX)),
    "max.connections.per.ip.overrides": (overrides_parser, ""),
    "max.connection.creation.rate": (_non_negative_int, str(INT_MAX)),
    "connections.max.idle.ms": (_long, "600000"),
    "message.max.bytes": (_non_negative_int, "1048588"),
    # Kafka 4.2's atLeast(1 MiB); small segments for tests: the topic's internal.segment.bytes
    "log.segment.bytes": (at_least(1024 * 1024, INT_MAX), "1073741824"),
    "log.roll.ms": (_positive_long, str(168 * 3600 * 1000)),
    "log.retention.ms": (unlimited_or_at_least(1), str(168 * 3600 * 1000)),
    "log.retention.bytes": (_long, "-1"),  # Kafka: any long, below 0 unlimited
    "log.retention.check.interval.ms": (_positive_long, "300000"),
    "log.index.interval.bytes": (_non_negative_int, "4096"),
    "log.index.size.max.bytes": (at_least(4, INT_MAX), str(10 * 1024 * 1024)),
    "log.segment.delete.delay.ms": (_non_negative_long, "60000"),
    # The log cleaner (storage/cleaner/): topic defaults and the background loop.
    "log.cleanup.policy": (_cleanup_policy, "delete"),
    "log.cleaner.enable": (_bool, "true"),
    "log.cleaner.backoff.ms": (_non_negative_long, "15000"),
    "log.cleaner.min.cleanable.ratio": (_ratio, "0.5"),
    "log.cleaner.delete.retention.ms": (_non_negative_long, "86400000"),
    "log.cleaner.min.compaction.lag.ms": (_non_negative_long, "0"),
    "log.cleaner.max.compaction.lag.ms": (_positive_long, str(2**63 - 1)),
    "log.cleaner.io.max.bytes.per.second": (_number, "1.7976931348623157E308"),
    "log.cleaner.dedupe.buffer.size": (_long, str(128 * 1024 * 1024)),
    # Deviation: Kafka's default is 100 MiB. The active segment is never cleaned and is replayed
    # in full at startup, and a Python replay is far slower than Kafka's: 1 MiB segments keep
    # the restart after cleaning short (issue 8's "1,000,000 commits, restart < 1 s").
    "offsets.topic.segment.bytes": (_positive_int, "1048576"),
    # fsync once this many offsets are unflushed, before acknowledging the append that got
    # there (1 = every append; concurrent ones share fsyncs), or this long after the last fsync.
    # Kafka's defaults, Long.MAX_VALUE: never (the page cache; fsync on roll and shutdown).
    # Deviation: Kafka checks flush.ms only every log.flush.scheduler.interval.ms (default
    # never); kafkad keeps a timer per log, so log.flush.interval.ms works on its own.
    "log.flush.interval.messages": (_positive_long, str(2**63 - 1)),
    "log.flush.interval.ms": (_non_negative_long, str(2**63 - 1)),
    "log.message.timestamp.type": (_timestamp_type, "CreateTime"),
    # The topics' defaults, checked by the topic configs' own rules: the codec batches are
    # stored in, and the KIP-390 levels the broker recompresses with.
    **{name: (TOPIC_CONFIGS[name][0], TOPIC_CONFIGS[name][2]) for name in COMPRESSION_CONFIGS},
    "min.insync.replicas": (_positive_int, "1"),
    # Partition-side idempotent producer state idle this long (and with no open transaction)
    # is dropped; checked every producer.id.expiration.check.interval.ms (KIP-854).
    "producer.id.expiration.ms": (_positive_int, "86400000"),
    "producer.id.expiration.check.interval.ms": (_positive_int, "600000"),
    "shutdown.grace.ms": (_non_negative_long, "10000"),
    # KIP-714 client telemetry (proxy/metrics/telemetry.py): Kafka's payload limit; kafkad's
    # switch and the push interval every client is subscribed at (Kafka's default interval)
    "telemetry.max.bytes": (_positive_int, "1048576"),
    "kafkad.client.telemetry.enable": (_bool, "true"),
    "kafkad.client.telemetry.push.interval.ms": (_positive_int, "300000"),
    # kafkad's own: deliberate errors, delays and dropped connections (proxy/fault_injection.py)
    "kafkad.fault.injection": (_fault_spec, ""),
    # kafkad's own: the web console (proxy/http/). Off while empty; read-only unless
    # admin.enable; an open transaction older than hanging.transaction.ms is flagged hanging.
    "kafkad.http.listeners": (_http_listeners, ""),
    "kafkad.http.admin.enable": (_bool, "false"),
    "kafkad.http.hanging.transaction.ms": (_positive_long, "900000"),
    # TLS (proxy/tls.py): Kafka's ssl.* names; listener.name.<name>.ssl.* overrides one
    # listener's (resolve_values accepts those prefixed names).
    **SSL_CONFIGS,
    # SASL (proxy/sasl/settings.py): mechanisms, PLAIN's JAAS users, KIP-368 re-authentication,
    # each also per listener (listener.name.<name>.<config>).
    **SASL_CONFIGS,
    # ACLs (proxy/acl/settings.py): authorizer.class.name, super.users,
    # allow.everyone.if.no.acl.found
    **ACL_CONFIGS,
    # Delegation tokens (proxy/delegation/): off while the secret key is empty, as in Kafka
    "delegation.token.secret.key": (str, ""),
    "delegation.token.max.lifetime.ms": (_positive_long, "604800000"),
    "delegation.token.expiry.time.ms": (_positive_long, "86400000"),
    "delegation.token.expiry.check.interval.ms": (_positive_long, "3600000"),
}


@dataclass(frozen=True)
class BrokerConfig:
    listen_host: str = "127.0.0.1"
    listen_port: int = 9092
    advertised_host: str | None = None  # None: the listen host
    advertised_port: int | None = None  # None: the bound port
    data_dir: str = "./data"  # a path, or a store URL such as memory://
    values: Mapping[str, Any] | None = None
    # Every client listener; empty: the one listener of the four fields above.
    listeners: tuple[Listener, ...] = ()
    # ``--feature NAME=LEVEL`` (proxy/features.py): levels a new data dir is formatted with
    features: Mapping[str, int] | None = None
    # Kafka's interBrokerListenerName: ``inter.broker.listener.name``, else the listener named
    # after ``security.inter.broker.protocol`` (PLAINTEXT); its connection quotas differ
    inter_broker_listener: str = "PLAINTEXT"
    # Kafka's originals (proxy/static_originals.py): the names the static config sets, as given
    originals: Mapping[str, str] = field(default_factory=dict)

    def endpoints(self) -> tuple[Listener, ...]:
        """The client listeners, the first being the one ``listen_*``/``advertised_*`` name."""
        if self.listeners:
            return self.listeners
        host = self.advertised_host or self.listen_host
        port = self.advertised_port or self.listen_port or None
        return (Listener("PLAINTEXT", "PLAINTEXT", self.listen_host, self.listen_port, host, port),)

    def get(self, name: str) -> Any:
        assert self.values is not None
        return self.values[name]

    def log_config(self) -> LogConfig:
        """Broker-wide log defaults; topic overrides are applied over these."""
        compact, delete = cleanup_flags(self.get("log.cleanup.policy"))
        return LogConfig(
            segment_bytes=self.get("log.segment.bytes"),
            segment_ms=self.get("log.roll.ms"),
            retention_ms=self.get("log.retention.ms"),
            retention_bytes=self.get("log.retention.bytes"),
            index_interval_bytes=self.get("log.index.interval.bytes"),
            segment_index_bytes=self.get("log.index.size.max.bytes"),
            flush_messages=self.get("log.flush.interval.messages"),
            flush_ms=self.get("log.flush.interval.ms"),
            file_delete_delay_ms=self.get("log.segment.delete.delay.ms"),
            compact=compact,
            delete=delete,
            delete_retention_ms=self.get("log.cleaner.delete.retention.ms"),
            min_cleanable_dirty_ratio=self.get("log.cleaner.min.cleanable.ratio"),
            min_compaction_lag_ms=self.get("log.cleaner.min.compaction.lag.ms"),
            max_compaction_lag_ms=self.get("log.cleaner.max.compaction.lag.ms"),
        )


class ConfigError(ValueError):
    pass


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


# Java's line terminators only: str.splitlines would also break at \f (a blank in Java), \v,
# \x1c-\x1e and \x85, which latin-1 files may hold inside a value.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Java ``Properties.load``'s logical lines: comments and blank lines dropped, a line ending
    in an odd number of backslashes continued on the next (whose leading blanks are dropped).
    Each comes with its first physical line number."""
    out: list[tuple[int, str]] = []
    parts: list[str] = []
    start = 0
    for number, raw in enumerate(_LINE_BREAK.split(text), 1):
        line = raw.lstrip(" \t\f")
        if not parts:
            if not line or line[0] in "#!":
                continue
            start = number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            parts.append(line[:-1])
            continue
        parts.append(line)
        out.append((start, "".join(parts)))
        parts = []
    if parts:
        out.append((start, "".join(parts)))
    return out


def _unescape(text: str, where: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(f"{where}: malformed \\uxxxx escape")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def parse_properties(text: str, source: str = "config file") -> dict[str, str]:
    """Java ``.properties`` syntax in full (``java.util.Properties.load``): ``#``/``!``
    comments, ``=``, ``:`` or blanks between key and value, ``\\`` line continuations and
    escapes (``\\t``, ``\\uXXXX``, ``\\=`` ...). A later duplicate key wins, as in Java."""
    out: dict[str, str] = {}
    for number, line in _logical_lines(text):
        i = 0
        while i < len(line):
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=: \t\f":
                break
            i += 1
        key = line[:i]
        rest = line[i:].lstrip(" \t\f")
        if rest[:1] in ("=", ":") and (i == len(line) or line[i] in " \t\f=:"):
            rest = rest[1:].lstrip(" \t\f")
        where = f"{source} line {number}"
        out[_unescape(key, where)] = _unescape(rest, where)
    return out


# Environment variables that are not broker configs: the CLI's options and the test tools'.
CLI_ENV = frozenset({"KAFKAD_LISTEN", "KAFKAD_ADVERTISE", "KAFKAD_DATA_DIR", "KAFKAD_CONFIG"})
CLI_ENV |= {"KAFKAD_LOG_LEVEL", "KAFKAD_FEATURE"}
TOOL_ENV = frozenset(
    {"KAFKAD_BOOTSTRAP", "KAFKAD_TEST_LOG_LEVEL", "KAFKAD_CLEANER_EXAMPLES"}
    | {"KAFKAD_BOOTSTRAP_SERVER"}  # the client CLI's default broker (kafkad/cli)
    | {"KAFKAD_WORKLOAD_SEED", "KAFKAD_WORKLOAD_SECONDS", "KAFKAD_SOAK_SECONDS"}
    | {"KAFKAD_TXN_CRASH_TXNS", "KAFKAD_TXN_CRASH_SEEDS", "KAFKAD_TXN_CRASH_DEBUG"}
    | {"KAFKAD_PIPELINE_CRASH_TRANSFERS", "KAFKAD_PIPELINE_CRASH_SEED"}
    | {"KAFKAD_PIPELINE_CRASH_KILLS"}
    | {"KAFKAD_HOST_PORT"}  # docker-compose.yml's published port for the HOST listener
)


def _java_trim(value: str) -> str:
    """``String.trim``, which Kafka's ConfigDef applies to every value before parsing it (a
    properties file keeps a value's trailing blanks)."""
    return value.strip("".join(map(chr, range(33))))


def env_name(config: str) -> str:
    return "KAFKAD_" + config.upper().replace(".", "_")


def _unknown(name: str, source: str, known: Iterable[str], what: str = "config") -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown {what} {name} in {source}{hint}"


# Configs whose value a start-up error never shows, as Kafka's ConfigException shows a PASSWORD
# "[hidden]": Kafka's PASSWORD configs, the mechanisms' JAAS configs (they hold passwords), and
# the authorizer's super.users and allow.everyone.if.no.acl.found, which DescribeConfigs hides.
SENSITIVE_CONFIGS = PASSWORDS | SASL_SENSITIVE | ACL_SENSITIVE


def resolve_values(
    file_values: Mapping[str, str],
    environ: Mapping[str, str],
    overrides: Mapping[str, str],
    *,
    file_source: str = "config file",
) -> dict[str, Any]:
    """Every config's value from the sources, parsed and checked. Every unknown name and every
    bad value is reported at once, in one ``ConfigError`` line, each with where it came from."""
    raw = {name: (default, "default") for name, (_, default) in BROKER_CONFIGS.items()}
    env_names = {env_name(n): n for n in BROKER_CONFIGS}
    errors: list[str] = []
    for key in sorted(environ):
        if key.startswith("KAFKAD_") and key not in env_names and key not in CLI_ENV | TOOL_ENV:
            errors.append(_unknown(key, "the environment", [*env_names, *CLI_ENV], "variable"))
    env_values = {env_names[k]: v for k, v in environ.items() if k in env_names}
    for source, values in (
        (file_source, file_values),
        ("the environment", env_values),
        ("--set", overrides),
    ):
        for name, value in values.items():
            if per_listener_base(name):
                raw[name] = (value, source)  # listener.name.<name>.<config>: parsed as <config>
            elif name not in BROKER_CONFIGS:
                errors.append(_unknown(name, source, BROKER_CONFIGS))
            else:
                where = (
                    f"environment variable {env_name(name)}"
                    if source == "the environment"
                    else source
                )
                raw[name] = (value, where)
    resolved: dict[str, Any] = {}
    for name, (value, source) in raw.items():
        base = per_listener_base(name)
        declared = PER_LISTENER[base] if base else BROKER_CONFIGS[name][0]
        parser = _READABLE.get(declared, declared)
        try:
            resolved[name] = parser(_java_trim(value))
        except ValueError as exc:
            # a PASSWORD config's value is never shown, as Kafka's ConfigException shows
            # "[hidden]" (the parsers' messages quote none of it either)
            shown = "[hidden]" if (base or name) in SENSITIVE_CONFIGS else value
            errors.append(f"{name}={shown} from {source}: {exc}")
    if errors:
        raise ConfigError("; ".join(errors))
    return resolved


def split_host_port(text: str, what: str = "address", *, lowest_port: int = 1) -> tuple[str, int]:
    try:
        return host_port(text, what, lowest_port=lowest_port)
    except ListenerError as exc:
        raise ConfigError(str(exc)) from None


DEFAULT_LISTEN = "127.0.0.1:9092"
DEFAULT_DATA_DIR = "./data"


def _read_config_file(config_file: str) -> dict[str, str]:
    try:
        text = Path(config_file).read_text(encoding="latin-1")  # Java's .properties encoding
    except OSError as exc:
        raise ConfigError(f"cannot read config file {config_file}: {exc.strerror or exc}") from None
    return parse_properties(text, f"config file {config_file}")


def _one_listener(listen: str, advertise: str | None, listen_what: str, adv_what: str) -> Listener:
    """``--listen``/``--advertise``: one PLAINTEXT listener."""
    host, port = split_host_port(listen, listen_what, lowest_port=0)
    if advertise:
        adv_host, adv_port = split_host_port(advertise, adv_what)
        if adv_host in WILDCARD_HOSTS:
            raise ConfigError(
                f"{adv_what} {advertise!r}: clients cannot connect to a wildcard address"
            )
        return Listener("PLAINTEXT", "PLAINTEXT", host, port, adv_host, adv_port)
    if host in WILDCARD_HOSTS:
        raise ConfigError(
            f"{listen_what} {listen!r} listens on every interface, so it needs --advertise "
            "HOST:PORT (the address clients connect to; Kafka refuses to advertise 0.0.0.0 too)"
        )
    return Listener("PLAINTEXT", "PLAINTEXT", host, port, host, port or None)


def consumer_group_config_errors(values: Mapping[str, Any]) -> list[str]:
    """Kafka's GroupCoordinatorConfig start-up checks of the consumer protocol's bounds."""
    hb, hb_min, hb_max = (
        values[f"group.consumer.{k}heartbeat.interval.ms"] for k in ("", "min.", "max.")
    )
    st, st_min, st_max = (
        values[f"group.consumer.{k}session.timeout.ms"] for k in ("", "min.", "max.")
    )
    hb_name, st_name = "group.consumer.heartbeat.interval.ms", "group.consumer.session.timeout.ms"
    checks = [
        (
            hb_max >= hb_min,
            "group.consumer.max.heartbeat.interval.ms",
            ">=",
            "group.consumer.min.heartbeat.interval.ms",
        ),
        (hb >= hb_min, hb_name, ">=", "group.consumer.min.heartbeat.interval.ms"),
        (hb <= hb_max, hb_name, "<=", "group.consumer.max.heartbeat.interval.ms"),
        (
            st_max >= st_min,
            "group.consumer.max.session.timeout.ms",
            ">=",
            "group.consumer.min.session.timeout.ms",
        ),
        (st >= st_min, st_name, ">=", "group.consumer.min.session.timeout.ms"),
        (st <= st_max, st_name, "<=", "group.consumer.max.session.timeout.ms"),
        (hb < st, hb_name, "<", st_name),
    ]
    words = {">=": "greater than or equal to", "<=": "less than or equal to", "<": "less than"}
    return [f"{a} must be {words[op]} {b}" for ok, a, op, b in checks if not ok]


def load_config(
    *,
    listen: str | None,
    advertise: str | None,
    data_dir: str | None,
    config_file: str | None,
    overrides: Mapping[str, str],
    environ: Mapping[str, str] | None = None,
) -> BrokerConfig:
    """``listen``/``advertise``/``data_dir`` (the command line or its environment variables)
    win over a config file's ``listeners``/``advertised.listeners``/``log.dirs``.

    Listeners, one rule: ``--listen``/``--advertise`` are the one-listener form and replace a
    config file's ``listeners``/``advertised.listeners``; given together with ``listeners`` or
    ``advertised.listeners`` from ``--set`` or the environment they are refused (two explicit
    answers to one question). ``--advertise`` alone keeps a config file's one client listener
    and sets its advertised address (refused if the file has several)."""
    env = os.environ if environ is None else environ
    source = f"config file {config_file}"
    props = _read_config_file(config_file) if config_file else {}
    kafka = translate(props, source)
    try:
        values = resolve_values(kafka.values, env, overrides, file_source=source)
    except ConfigError as exc:
        raise ConfigError("; ".join([*kafka.errors, str(exc)])) from None
    explicit = [
        n
        for n in ("listeners", "advertised.listeners")
        if overrides.get(n) or env.get(env_name(n))  # empty: not given (clears an image's)
    ]
    if (listen or advertise) and explicit:
        given = "--listen" if listen else "--advertise"
        raise ConfigError(
            f"{given} and {' and '.join(explicit)} are both given: use --listen/--advertise for "
            "one listener or listeners/advertised.listeners for several, not both"
        )
    from_file: str | None = None  # --advertise applied to a config file's one listener
    # As in Kafka, advertised.listeners alone applies to the default listener (PLAINTEXT).
    default = "" if advertise else f"PLAINTEXT://{DEFAULT_LISTEN}"
    binds = values["listeners"] or (default if values["advertised.listeners"] else "")
    adverts = values["advertised.listeners"]
    try:
        if binds and advertise and not listen:
            names = [n for n in listener_map(binds, "listeners") if n not in kafka.controllers]
            if len(names) > 1:
                raise ConfigError(
                    f"--advertise is for one listener, but {source} has {len(names)} "
                    f"({', '.join(names)}): use advertised.listeners"
                )
            adverts = ",".join(f"{n}://{advertise}" for n in names)  # checked as the file's
            from_file = adverts
        parsed = (
            parse_listeners(
                binds,
                adverts,
                values["listener.security.protocol.map"],
                kafka.controllers,
            )
            if binds and not listen
            else ()
        )
    except ListenerError as exc:
        where = source if not explicit else "--set or the environment"
        kafka.errors.append(f"{exc} (from {where})")
    tls_listeners = [] if kafka.errors else [x for x in parsed if x.protocol in TLS_PROTOCOLS]
    for listener in tls_listeners:
        try:
            # checked now; built again to serve (and warns then)
            server_settings(values, listener.name, listener.protocol, warn=False)
        except TlsConfigError as exc:
            kafka.errors.append(str(exc))
    sasl_listeners = [] if kafka.errors else [x for x in parsed if x.protocol in SASL_PROTOCOLS]
    for listener in sasl_listeners:
        try:
            listener_sasl(values, listener.name)  # checked now; built again to serve
        except (SaslConfigError, ValueError) as exc:
            kafka.errors.append(str(exc))
    kafka.errors += consumer_group_config_errors(values)
    if (error := validate_values(values)) is not None:
        kafka.errors.append(error.removeprefix("requirement failed: "))
    if kafka.errors:
        raise ConfigError("; ".join(kafka.errors))
    if not parsed:
        listen_what = "--listen" if listen else "the default listener"
        parsed = (_one_listener(listen or DEFAULT_LISTEN, advertise, listen_what, "--advertise"),)
    first = parsed[0]
    env_values = {n: env[env_name(n)] for n in BROKER_CONFIGS if env_name(n) in env}
    originals = static_originals(
        {**props, **env_values, **overrides},
        listen=listen,
        advertise=advertise,
        adverts=from_file,
        data_dir=data_dir,
        default_listen=DEFAULT_LISTEN,
        default_data_dir=DEFAULT_DATA_DIR,
        node_id=values["node.id"],
    )
    return BrokerConfig(
        listen_host=first.host,
        listen_port=first.port,
        advertised_host=first.advertised_host,
        advertised_port=first.advertised_port,
        data_dir=data_dir or kafka.data_dir or DEFAULT_DATA_DIR,
        values=values,
        listeners=parsed,
        inter_broker_listener=kafka.inter_broker or "PLAINTEXT",
        originals=originals,
    )
