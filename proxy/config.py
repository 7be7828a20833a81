"""Broker configuration: Kafka's own config names, Kafka 4.x defaults.

Sources, lowest precedence first: built-in defaults, a Kafka-style ``server.properties`` file
(``--config FILE``), environment variables (``KAFKAD_`` + the name upper-cased with dots as
underscores, e.g. ``KAFKAD_AUTO_CREATE_TOPICS_ENABLE=false``), then ``--set name=value``.
Unknown names (and ``KAFKAD_`` variables that are neither a config nor a CLI option) are
refused at start-up rather than ignored, so a typo never silently runs a broker with the wrong
settings; Kafka 4.2's other configs, which kafkad has no use for (proxy/kafka_only_configs.py),
are checked by their type and range and kept only as the static originals DescribeConfigs
shows. Each config's parser is its definition: it checks type and range (Kafka's ConfigDef
validators) and says what is wrong; every problem, with the source it came from, is reported
at once in one ``ConfigError`` line. Kafka's own names in a properties file (``listeners``,
``log.dirs``, KRaft settings, ...) are translated by ``proxy/kafka_properties.py``.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proxy.acl.settings import SENSITIVE as ACL_SENSITIVE
from proxy.broker_config_defs import BROKER_CONFIGS, READABLE_PARSERS
from proxy.broker_config_types import PASSWORDS
from proxy.connection_quota_config import validate_values
from proxy.kafka_only_configs import KAFKA_ONLY_CONFIGS, parse_value
from proxy.kafka_properties import MUST_BE_ONE, translate
from proxy.listeners import (
    WILDCARD_HOSTS,
    Listener,
    ListenerError,
    host_port,
    listener_map,
    parse_listeners,
)
from proxy.properties_file import ConfigError, parse_properties
from proxy.sasl.settings import SASL_PROTOCOLS, SaslConfigError, listener_sasl
from proxy.sasl.settings import SENSITIVE as SASL_SENSITIVE
from proxy.static_originals import static_originals
from proxy.tls import (
    PER_LISTENER,
    TLS_PROTOCOLS,
    TlsConfigError,
    per_listener_base,
    server_settings,
)
from storage.api import LogConfig
from storage.topic_config import cleanup_flags


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


# Kafka's configs kafkad has no use for (proxy/kafka_only_configs.py): the environment and
# --set may give them as a server.properties may (but the replication ones, which must be 1)
KAFKA_ONLY_NAMES = frozenset(KAFKA_ONLY_CONFIGS)  # MUST_BE_ONE's: 1 only

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
    env_names = {env_name(n): n for n in (*BROKER_CONFIGS, *KAFKA_ONLY_NAMES)}
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
            elif (
                name in KAFKA_ONLY_NAMES
            ):  # Kafka's, of no use to kafkad: checked, kept as originals
                try:
                    parse_value(name, value)
                    if name in MUST_BE_ONE and value.strip() != "1":
                        raise ValueError("kafkad is one node, must be 1")
                except ValueError as exc:
                    shown = "[hidden]" if name in SENSITIVE_CONFIGS else value
                    where = f"environment variable {env_name(name)}"
                    errors.append(
                        f"{name}={shown} from {where if source == 'the environment' else source}: "
                        f"{exc}"
                    )
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
        parser = READABLE_PARSERS.get(declared, declared)
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
    env_values = {
        n: env[env_name(n)] for n in (*BROKER_CONFIGS, *KAFKA_ONLY_NAMES) if env_name(n) in env
    }
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
