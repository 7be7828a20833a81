"""Kafka's reconfigurables' checks of its dynamic configs kafkad has no use for (their values
are stored only, proxy/kafka_only_configs.py), in the words Kafka's
``DynamicBrokerConfig.processReconfiguration`` wraps their ConfigException in, in Kafka's order:
the acceptors' num.network.threads, DynamicThreadPool's thread counts, DynamicLogConfig's local
retention, DynamicRemoteLogConfig's thread counts (its rates' "at least 1" is ConfigDef's
``atLeast(1)``, checked first)."""

from __future__ import annotations

from collections.abc import Callable

from proxy.kafka_only_configs import KAFKA_ONLY_CONFIGS, parse_value

Lookup = Callable[[str], "str | None"]  # a config's effective string (None: null)

_THREADS = (
    "num.network.threads",
    "num.io.threads",
    "num.replica.fetchers",
    "num.recovery.threads.per.data.dir",
    "background.threads",
)
_REMOTE_THREADS = (
    "remote.log.reader.threads",
    "remote.log.manager.copier.thread.pool.size",
    "remote.log.manager.expiration.thread.pool.size",
    "remote.log.manager.follower.thread.pool.size",
)
_FOLLOWER = "remote.log.manager.follower.thread.pool.size"
# DynamicRemoteLogConfig.ReconfigurableConfigs: it checks its pools only when one of them changes
_REMOTE = frozenset(
    {
        "remote.log.index.file.cache.total.size.bytes",
        "remote.fetch.max.wait.ms",
        "remote.log.manager.copy.max.bytes.per.second",
        "remote.log.manager.fetch.max.bytes.per.second",
        "remote.list.offsets.request.timeout.ms",
        *_REMOTE_THREADS,
    }
)


def _wrapped(why: str) -> str:
    return (
        "Invalid value org.apache.kafka.common.config.ConfigException: "
        f"{why} for configuration Invalid dynamic configuration"
    )


def _number(lookup: Lookup, name: str) -> int:
    try:  # a stored value Kafka would ignore: its default
        value = parse_value(name, lookup(name) or "")
    except ValueError:
        value = int(KAFKA_ONLY_CONFIGS[name][1] or 0)
    assert isinstance(value, int)  # INT and LONG configs
    return value


def _threads_of(lookup: Lookup, listener: str) -> int:
    """A listener's acceptor's num.network.threads (Kafka's valuesWithPrefixOverride)."""
    name = "num.network.threads"
    raw = lookup(f"listener.name.{listener.lower()}.{name}") if listener else None
    return _number(lookup, name) if raw is None else _number(lambda _: raw, name)


def _thread_count(name: str, old: int, new: int) -> str | None:
    why = f"Dynamic thread count update validation failed for {name}={new}"
    if new == old:
        return None
    if new <= 0:
        return _wrapped(f"{why}, value should be at least 1")
    if new < old // 2:
        return _wrapped(f"{why}, value should be at least half the current value {old}")
    if new > old * 2:
        return _wrapped(f"{why}, value should not be greater than double the current value {old}")
    return None


# The MetricsReporter classes a stock Kafka 4.2 broker loads (public no-argument constructor,
# on its classpath: clients' JmxReporter, tools' PushHttpMetricsReporter)
_REPORTERS = frozenset(
    {
        "org.apache.kafka.common.metrics.JmxReporter",
        "org.apache.kafka.tools.PushHttpMetricsReporter",
    }
)


def _reporters(old: Lookup, new: Lookup, changed: tuple[str, ...]) -> str | None:
    """DynamicMetricsReporters: every class of a changed metric.reporters must load, else
    processReconfigurable's ConfigException (kafkad keeps the value only)."""
    name = "metric.reporters"
    if old(name) == new(name):
        return None
    classes = [c.strip() for c in (new(name) or "").split(",") if c.strip()]
    if all(c in _REPORTERS for c in classes):
        return None
    return _wrapped(
        f"Validation of dynamic config update of Set({', '.join(changed or (name,))}) failed "
        "with class class kafka.server.DynamicMetricsReporters"
    )


def _local_retention(new: Lookup, retention_ms: int, retention_bytes: int) -> str | None:
    """DynamicLogConfig: the local retention (-2: the retention's) within the retention."""
    for name, total, base, unlimited in (
        ("log.local.retention.ms", retention_ms, "log.retention.ms", retention_ms == -1),
        ("log.local.retention.bytes", retention_bytes, "log.retention.bytes", retention_bytes < 0),
    ):
        local = _number(new, name)
        if unlimited or local == -2:
            continue
        if local == -1:
            why = f"Value must not be -1 as {base} value is set as {total}."
        elif local > total:
            why = f"Value must not be more than {base} property value: {total}"
        else:
            continue
        return _wrapped(f"Invalid value {local} for configuration {name}: {why}")
    return None


def reconfiguration_error(
    old: Lookup,
    new: Lookup,
    retention_ms: int,
    retention_bytes: int,
    *,
    follower_set: bool = True,
    changed: tuple[str, ...] = (),
    listeners: tuple[str, ...] = (),
) -> str | None:
    """The refusal of a change from ``old`` to ``new`` (effective values), or None.
    ``retention_ms``/``retention_bytes``: the log retention after the change. ``follower_set``:
    the current config sets remote.log.manager.follower.thread.pool.size (else Kafka takes the
    follower pool's current size from the older remote.log.manager.thread.pool.size,
    ``RemoteLogManagerConfig.remoteLogManagerFollowerThreadPoolSize``). ``changed``: the
    names whose value the change changes (Kafka's ``updatedConfigNames``). ``listeners``: the
    client listeners, each an acceptor checking its own num.network.threads (its
    ``listener.name.<l>.num.network.threads`` override, else the broker's)."""
    for name in _THREADS:
        pairs = (
            [(_threads_of(old, x), _threads_of(new, x)) for x in listeners or ("",)]
            if name == "num.network.threads"
            else [(_number(old, name), _number(new, name))]
        )
        for was, now in pairs:
            if (error := _thread_count(name, was, now)) is not None:
                return error
        if name == "num.network.threads" and (error := _reporters(old, new, changed)):
            return error  # the acceptors, then DynamicMetricsReporters, then the broker's
    local = ("log.local.retention.ms", "log.local.retention.bytes")
    if any(old(n) != new(n) for n in local) and (
        error := _local_retention(new, retention_ms, retention_bytes)
    ):
        return error
    if not any(old(n) != new(n) for n in _REMOTE):
        return None
    for name in _REMOTE_THREADS:
        current = (
            name if name != _FOLLOWER or follower_set else "remote.log.manager.thread.pool.size"
        )
        if (error := _thread_count(name, _number(old, current), _number(new, name))) is not None:
            return error
    return None
