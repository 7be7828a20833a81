"""Broker configuration: Kafka's own config names, Kafka 4.x defaults.

Sources, lowest precedence first: built-in defaults, a Kafka-style ``server.properties`` file
(``--config FILE``), environment variables (``KAFKAD_`` + the name upper-cased with dots as
underscores, e.g. ``KAFKAD_AUTO_CREATE_TOPICS_ENABLE=false``), then ``--set name=value``.
Unknown names are refused at start-up rather than ignored, so a typo never silently runs a
broker with the wrong settings.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proxy.fault_injection import parse_spec
from storage.api import LogConfig
from storage.topic_config import TOPIC_CONFIGS, cleanup_flags


def _bool(v: str) -> bool:
    s = v.strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ValueError(f"not a boolean: {v!r}")


# name -> (parser, default). Only what kafkad honours is listed.
BROKER_CONFIGS: Mapping[str, tuple[Callable[[str], Any], str]] = {
    "node.id": (int, "1"),
    "auto.create.topics.enable": (_bool, "true"),
    "num.partitions": (int, "1"),
    "default.replication.factor": (int, "1"),
    "delete.topic.enable": (_bool, "true"),
    "group.initial.rebalance.delay.ms": (int, "3000"),
    "group.min.session.timeout.ms": (int, "6000"),
    "group.max.session.timeout.ms": (int, "1800000"),
    "group.max.size": (int, "2147483647"),
    "offsets.topic.num.partitions": (int, "50"),
    # Offsets retention (coordinator/group/offsets_api.py): an offset expires this long after
    # its commit (simple groups), or after its group became Empty; checked every interval.
    "offsets.retention.minutes": (int, "10080"),
    "offsets.retention.check.interval.ms": (int, "600000"),
    # The transaction coordinator (coordinator/txn/runtime.py, spec eos.md §4.12).
    "transaction.state.log.num.partitions": (int, "50"),
    "transaction.max.timeout.ms": (int, "900000"),
    "transactional.id.expiration.ms": (int, "604800000"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (int, "10000"),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (int, "3600000"),
    "socket.request.max.bytes": (int, "104857600"),
    "connections.max.idle.ms": (int, "600000"),
    "message.max.bytes": (int, "1048588"),
    "log.segment.bytes": (int, "1073741824"),
    "log.roll.ms": (int, str(168 * 3600 * 1000)),
    "log.retention.ms": (int, str(168 * 3600 * 1000)),
    "log.retention.bytes": (int, "-1"),
    "log.retention.check.interval.ms": (int, "300000"),
    "log.index.interval.bytes": (int, "4096"),
    "log.index.size.max.bytes": (int, str(10 * 1024 * 1024)),
    "log.segment.delete.delay.ms": (int, "60000"),
    # The log cleaner (storage/cleaner/): topic defaults and the background loop.
    "log.cleanup.policy": (str, "delete"),
    "log.cleaner.enable": (_bool, "true"),
    "log.cleaner.backoff.ms": (int, "15000"),
    "log.cleaner.min.cleanable.ratio": (float, "0.5"),
    "log.cleaner.delete.retention.ms": (int, "86400000"),
    "log.cleaner.min.compaction.lag.ms": (int, "0"),
    "log.cleaner.max.compaction.lag.ms": (int, str(2**63 - 1)),
    "log.cleaner.io.max.bytes.per.second": (float, "1.7976931348623157E308"),
    "log.cleaner.dedupe.buffer.size": (int, str(128 * 1024 * 1024)),
    # Deviation: Kafka's default is 100 MiB. The active segment is never cleaned and is replayed
    # in full at startup, and a Python replay is far slower than Kafka's: 1 MiB segments keep
    # the restart after cleaning short (issue 8's "1,000,000 commits, restart < 1 s").
    "offsets.topic.segment.bytes": (int, "1048576"),
    # fsync once this many offsets are unflushed, before acknowledging the append that got
    # there (1 = every append; concurrent ones share fsyncs), or this long after the last fsync.
    # Kafka's defaults, Long.MAX_VALUE: never (the page cache; fsync on roll and shutdown).
    # Deviation: Kafka checks flush.ms only every log.flush.scheduler.interval.ms (default
    # never); kafkad keeps a timer per log, so log.flush.interval.ms works on its own.
    "log.flush.interval.messages": (int, str(2**63 - 1)),
    "log.flush.interval.ms": (int, str(2**63 - 1)),
    "log.message.timestamp.type": (str, "CreateTime"),
    "compression.type": (str, "producer"),
    "min.insync.replicas": (int, "1"),
    # Partition-side idempotent producer state idle this long (and with no open transaction)
    # is dropped; checked every producer.id.expiration.check.interval.ms (KIP-854).
    "producer.id.expiration.ms": (int, "86400000"),
    "producer.id.expiration.check.interval.ms": (int, "600000"),
    "shutdown.grace.ms": (int, "10000"),
    # kafkad's own: deliberate errors, delays and dropped connections (proxy/fault_injection.py)
    "kafkad.fault.injection": (str, ""),
}


@dataclass(frozen=True)
class BrokerConfig:
    listen_host: str = "127.0.0.1"
    listen_port: int = 9092
    advertised_host: str | None = None  # None: the listen host
    advertised_port: int | None = None  # None: the bound port
    data_dir: str = "./data"  # a path, or a store URL such as memory://
    values: Mapping[str, Any] | None = None

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


def parse_properties(text: str) -> dict[str, str]:
    """The subset of Java .properties that server.properties files use."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise ConfigError(f"not a key=value line: {raw!r}")
        out[line[:sep].strip()] = line[sep + 1 :].strip()
    return out


def resolve_values(
    file_values: Mapping[str, str],
    environ: Mapping[str, str],
    overrides: Mapping[str, str],
) -> dict[str, Any]:
    raw = {name: default for name, (_, default) in BROKER_CONFIGS.items()}
    env_names = {"KAFKAD_" + n.upper().replace(".", "_"): n for n in BROKER_CONFIGS}
    env_values = {env_names[k]: v for k, v in environ.items() if k in env_names}
    for source, values in (
        ("config file", file_values),
        ("environment", env_values),
        ("--set", overrides),
    ):
        for name, value in values.items():
            if name not in BROKER_CONFIGS:
                raise ConfigError(f"unknown config {name!r} (from {source})")
            raw[name] = value
    resolved: dict[str, Any] = {}
    for name, value in raw.items():
        parser = BROKER_CONFIGS[name][0]
        try:
            resolved[name] = parser(value)
        except ValueError as exc:
            raise ConfigError(f"{name}={value!r}: {exc}") from None
    if resolved["num.partitions"] < 1:
        raise ConfigError("num.partitions must be >= 1")
    for name in (
        "offsets.topic.num.partitions",
        "offsets.retention.minutes",
        "offsets.retention.check.interval.ms",
        "transaction.state.log.num.partitions",
        "transaction.max.timeout.ms",
        "transactional.id.expiration.ms",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "transaction.remove.expired.transaction.cleanup.interval.ms",
    ):
        if resolved[name] < 1:
            raise ConfigError(f"{name} must be >= 1")
    try:
        parse_spec(resolved["kafkad.fault.injection"])
    except ValueError as exc:
        raise ConfigError(f"kafkad.fault.injection: {exc}") from None
    try:
        resolved["log.cleanup.policy"] = TOPIC_CONFIGS["cleanup.policy"][0](
            resolved["log.cleanup.policy"]
        )
    except ValueError as exc:
        raise ConfigError(f"log.cleanup.policy: {exc}") from None
    if resolved["log.message.timestamp.type"] not in ("CreateTime", "LogAppendTime"):
        raise ConfigError("log.message.timestamp.type must be CreateTime or LogAppendTime")
    return resolved


def split_host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def load_config(
    *,
    listen: str,
    advertise: str | None,
    data_dir: str,
    config_file: str | None,
    overrides: Mapping[str, str],
    environ: Mapping[str, str] | None = None,
) -> BrokerConfig:
    env = os.environ if environ is None else environ
    file_values = parse_properties(Path(config_file).read_text()) if config_file else {}
    host, port = split_host_port(listen)
    adv_host: str | None = None
    adv_port: int | None = None
    if advertise:
        adv_host, adv_port = split_host_port(advertise)
    return BrokerConfig(
        listen_host=host,
        listen_port=port,
        advertised_host=adv_host,
        advertised_port=adv_port,
        data_dir=data_dir,
        values=resolve_values(file_values, env, overrides),
    )
