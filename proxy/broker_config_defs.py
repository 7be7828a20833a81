"""Every broker config kafkad honours, as Kafka defines it: name -> (parser, default). A parser
is the config's ConfigDef type and validator (its errors' texts are what start-up and
IncrementalAlterConfigs report); proxy/config.py resolves the values from the broker's sources.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from coordinator.consumer_group.assignors import ASSIGNOR_CLASSES
from proxy.acl.settings import ACL_CONFIGS
from proxy.config_ranges import at_least, whole_number
from proxy.connection_quota_config import overrides_parser
from proxy.fault_injection import parse_spec
from proxy.http.settings import parse_http_listeners
from proxy.listeners import DEFAULT_PROTOCOL_MAP
from proxy.sasl.settings import SASL_CONFIGS
from proxy.tls import SSL_CONFIGS
from storage.topic_config import COMPRESSION_CONFIGS, TOPIC_CONFIGS
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
READABLE_PARSERS: dict[Any, Callable[[str], Any]] = {int: whole_number, float: _number}


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


def _valid_list(name: str, v: str, valid: tuple[str, ...] = ()) -> list[str]:
    """Kafka's LIST type (items split at commas, trimmed) under ``ValidList`` with neither empty
    nor null allowed (``valid``: its ``ValidString``, none for ``anyNonDuplicateValues``), with
    its texts and order: no items, a duplicate, then each item: empty, or not a valid string."""
    items = [x.strip() for x in v.strip().split(",")] if v.strip() else []
    if not items:
        shown = f"[{', '.join(valid)}]" if valid else "any non-empty value"
        raise ValueError(f"Configuration '{name}' must not be empty. Valid values include: {shown}")
    if len(set(items)) != len(items):
        raise ValueError(f"Configuration '{name}' values must not be duplicated.")
    for item in items:
        if not item:
            raise ValueError(f"Configuration '{name}' values must not be empty.")
        if valid and item not in valid:
            raise ValueError(
                f"Invalid value {item} for configuration {name}: String must be one of: "
                f"{', '.join(valid)}"
            )
    return items


def _rebalance_protocols(v: str) -> str:
    """Kafka's GroupCoordinatorConfig: ValidList.in(consumer, classic, share, streams), names as
    given (case-sensitive), then KafkaConfig's: classic required. kafkad serves classic and
    consumer; share and streams are refused."""
    valid = ("consumer", "classic", "share", "streams")  # Group.GroupType.documentValidValues
    names = _valid_list("group.coordinator.rebalance.protocols", v, valid)
    if "classic" not in names:
        raise ValueError("Disabling the 'classic' protocol is not supported.")
    for n in names:
        if n not in ("classic", "consumer"):
            raise ValueError(f"{n} is not a group protocol kafkad serves (classic, consumer)")
    return ",".join(names)


def _assignors(v: str) -> str:
    """Kafka's ValidList.anyNonDuplicateValues: built-in names or class names, shown as given
    (``assignor_names`` maps them to the assignors kafkad has)."""
    names = _valid_list("group.consumer.assignors", v)
    for n in names:
        if ASSIGNOR_CLASSES.get(n, n) not in ("uniform", "range"):
            raise ValueError(f"{n} is not an assignor kafkad has (uniform, range)")
    return ",".join(names)


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
    "socket.listen.backlog.size": (_positive_int, "50"),  # static, as in Kafka
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
