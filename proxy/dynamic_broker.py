"""Dynamic broker configs (Kafka's ``DynamicBrokerConfig``): the broker configs Kafka lets
IncrementalAlterConfigs/AlterConfigs change at runtime, per broker (resource name the node id)
or cluster-wide (resource name ""), kept durably and applied at once.

Layers, highest precedence first (Kafka's synonym order): DYNAMIC_BROKER_CONFIG (this node's),
DYNAMIC_DEFAULT_BROKER_CONFIG (the cluster default), STATIC_BROKER_CONFIG (server.properties,
the environment, ``--set``, the command line: Kafka's originals, ``originals``), DEFAULT_CONFIG.
The effective values are written into the broker's one values mapping (``BrokerConfig.values``),
which every reader looks up at use time; the log defaults of topics without overrides are
re-applied to their open partitions.

Which configs are dynamic: Kafka's ``AllDynamicConfigs`` that kafkad has (``DYNAMIC``): the log
defaults (Kafka's ``DynamicLogConfig``: every broker synonym of a topic config), the log
cleaner's (``LogCleaner.ReconfigurableConfigs``) and ``producer.id.expiration.ms``. A TLS
listener's keystore and truststore (``listener.name.<l>.ssl.keystore.location`` and the other
``SECURITY`` names, with a listener prefix) are dynamic per broker, as in Kafka: checked,
stored and applied to new connections by proxy/dynamic_tls.py (``validators``, ``listeners``);
without a listener prefix they get Kafka's own refusal ("... only per-listener using the
listener prefix"). A listener's connection quota overrides
(``listener.name.<l>.max.connections``, ``...max.connection.creation.rate``: ``quota_base``)
are dynamic per broker and cluster-wide and applied, checked as their unprefixed configs
(proxy/connection_quota_config.py). Another listener-prefixed config is refused for an
existing listener with Kafka's "Configs cannot be updated dynamically for existing listener
..." and stored for any other name (a listener added later); a listener's ``ssl.client.auth``
is first checked as its base config, as Kafka's validateConfigTypes (``LISTENER_CHECKED``).
``listeners`` and ``listener.security.protocol.map`` are dynamic per broker (``LISTENERS``:
checked and applied by proxy/dynamic_listeners.py); ``advertised.listeners`` is not (Kafka 4
dropped it from DynamicListenerConfig, KAFKA-18405): refused as Kafka's read-only configs are.
Kafka's other security configs (the unprefixed ssl.* and sasl.*) are dynamic per broker in
Kafka but not in kafkad: a change to one is refused INVALID_REQUEST ("Cannot update these
configs dynamically"), as Kafka refuses its read-only configs.
Kafka's static configs kafkad only reads from a server.properties (process.roles, log.dirs...)
are refused the same way. Names Kafka does not know are accepted and stored, as Kafka stores
them (no ConfigDef checks them), but change nothing.

On-disk format: the metadata blob ``broker-configs``, JSON
``{"version": 1, "configs": {"": {"log.retention.ms": "1000"}, "1": {...}}}``; replaced
atomically and fsynced (``Store.write_metadata``) before the change is applied or answered.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any, Protocol

import trio

from proxy.broker_config_types import (
    BOOLEAN,
    BROKER_QUOTA_RATES,
    DOUBLE,
    INT,
    LONG,
    NULL_DEFAULTS,
    SHORT,
    STRING,
    config_type,
    listener_base,
)
from proxy.connection_quota_config import (
    BROKER_WIDE,
    quota_base,
    reconfiguration_error,
    validate_values,
)
from proxy.kafka_only_checks import reconfiguration_error as kafka_only_error
from proxy.kafka_only_configs import KAFKA_DYNAMIC, KAFKA_ONLY_CONFIGS, parse_value

log = logging.getLogger("kafkad.config")
_FOLLOWER = "remote.log.manager.follower.thread.pool.size"
BLOB = "broker-configs"
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5

# DynamicListenerConfig's listener set, per broker (checked and applied: proxy/dynamic_listeners.py)
LISTENERS = frozenset({"listeners", "listener.security.protocol.map"})

# Kafka's AllDynamicConfigs, restricted to the configs kafkad has and applies.
DYNAMIC = frozenset(
    {
        # DynamicLogConfig.ReconfigurableConfigs: the broker synonyms of topic configs
        "log.segment.bytes",
        "log.roll.ms",
        "log.retention.ms",
        "log.retention.bytes",
        "log.index.interval.bytes",
        "log.index.size.max.bytes",
        "log.segment.delete.delay.ms",
        "log.cleanup.policy",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.message.timestamp.type",
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "min.insync.replicas",
        "message.max.bytes",
        # LogCleaner.ReconfigurableConfigs
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
        # DynamicProducerStateManagerConfig
        "producer.id.expiration.ms",
        # SocketServer.ReconfigurableConfigs (proxy/connection_quotas.py); the per-listener
        # max.connections and max.connection.creation.rate too (``dynamic``)
        *BROKER_WIDE,
    }
)


def dynamic(name: str) -> bool:
    """Whether Kafka lets a dynamic config change ``name`` (kafkad applies it, or stores it:
    ``KAFKA_DYNAMIC``, Kafka's dynamic configs kafkad has no use for)."""
    return name in DYNAMIC or name in KAFKA_DYNAMIC or quota_base(name) is not None


# Kafka's validateConfigTypes checks every listener-prefixed config as its base config when
# DynamicConfig.Broker defines the base (AllDynamicConfigs: DynamicListenerConfig's, whatever the
# listener, existing or not); kafkad checks so those whose parser is Kafka's validator (the
# others are strings Kafka does not check, or kafkad's own stricter rules, applied when the
# listener is added: proxy/dynamic_listeners.py). The connection quotas: ``dynamic``.
LISTENER_CHECKED = frozenset({"ssl.client.auth"})


# Kafka's DynamicSecurityConfigs (SslConfigs.RECONFIGURABLE_CONFIGS): dynamic only with a
# listener prefix (listener.name.<name>.ssl.keystore.location), per broker.
SECURITY = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.certificates",
    }
)

# Kafka's alternates of one broker config (DynamicBrokerConfig.brokerConfigSynonyms): ms, then
# minutes, then hours; log.flush.scheduler.interval.ms is the default of log.flush.interval.ms
# but has no synonym of its own.
_RETENTION = ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
_ROLL = ("log.roll.ms", "log.roll.hours")
_JITTER = ("log.roll.jitter.ms", "log.roll.jitter.hours")
ALTERNATES: Mapping[str, tuple[str, ...]] = {
    **dict.fromkeys(_RETENTION, _RETENTION),
    **dict.fromkeys(_ROLL, _ROLL),
    **dict.fromkeys(_JITTER, _JITTER),
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}
# Kafka's ConfigDef defaults where kafkad's differ or kafkad has no config of that name (None:
# null or NO_DEFAULT_VALUE, so no DEFAULT_CONFIG synonym): the ms forms, whose value kafkad
# takes from their alternates, the configs its command line sets, log.dir(s).
KAFKA_DEFAULTS: Mapping[str, str | None] = {
    "log.retention.ms": None,
    "log.retention.minutes": None,
    "log.retention.hours": "168",
    "log.roll.ms": None,
    "log.roll.hours": "168",
    "log.flush.interval.ms": None,
    "log.flush.scheduler.interval.ms": str(2**63 - 1),
    "listeners": "PLAINTEXT://:9092",  # SocketServerConfigs.LISTENERS_DEFAULT
    "node.id": None,
    "broker.id": "-1",  # ServerConfigs.BROKER_ID_DEFAULT
    "process.roles": None,
    "controller.listener.names": None,
    "controller.quorum.voters": "",  # empty lists
    "controller.quorum.bootstrap.servers": "",
    "inter.broker.listener.name": None,
    "log.dir": "/tmp/kafka-logs",
    "log.dirs": None,
}


class MetadataStore(Protocol):
    async def read_metadata(self, name: str) -> bytes | None: ...

    async def write_metadata(self, name: str, data: bytes) -> None: ...


Configs = dict[str, dict[str, str]]  # resource name ("" or the node id) -> name -> value


def listener_security(name: str) -> bool:
    """A keystore/truststore config with a listener prefix: dynamic per broker."""
    return listener_base(name) in SECURITY


def encode(configs: Configs) -> bytes:
    return json.dumps({"version": 1, "configs": configs}, sort_keys=True).encode()


def decode(data: bytes) -> Configs:
    doc = json.loads(data)
    if doc.get("version") != 1:
        raise ValueError(f"{BLOB}: unknown version {doc.get('version')!r}")
    return {str(k): {str(n): str(v) for n, v in m.items()} for k, m in doc["configs"].items()}


class DynamicBrokerConfigs:
    """The dynamic layers over the static values; ``values`` (the broker's shared mapping) is
    kept equal to the effective values. ``parsers``: each config's parser (its ConfigDef)."""

    def __init__(
        self,
        store: MetadataStore,
        node_id: int,
        values: MutableMapping[str, Any],
        parsers: Mapping[str, Callable[[str], Any]],
        defaults: Mapping[str, str],
        originals: Mapping[str, str],
    ) -> None:
        self._store = store
        self.node = str(node_id)
        self.values = values
        self.static = dict(values)  # as the broker started, before any dynamic layer
        # Kafka's staticBrokerConfigs: what the static config sets, as given
        # (proxy/static_originals.py)
        self.originals = dict(originals)
        self._parsers = parsers
        self._defaults = defaults
        self._configs: Configs = {}
        self.lock = trio.Lock()  # held across a read-decide-write
        self.listeners: list[Callable[[], None]] = []  # told after each applied change
        self.listener_names: tuple[str, ...] = ()  # the client listeners (connection quotas)
        # checks of a per-broker resource's whole new set: a refusal's message, or None
        self.validators: list[Callable[[Mapping[str, str]], str | None]] = []

    def layer(self, resource: str) -> Mapping[str, str]:
        """The dynamic configs of ``resource`` ("" the cluster default, else the node id)."""
        return self._configs.get(resource, {})

    def persistent(self, resource: str) -> dict[str, str]:
        """Kafka's ``fromPersistentProps``: ``resource``'s stored configs less those whose value
        does not parse (stored by an older kafkad; ``removeInvalidConfigs``, logged), which a
        change then builds on."""
        out = dict(self.layer(resource))
        for name, value in list(out.items()):
            if dynamic(name) or listener_base(name) in LISTENER_CHECKED:
                try:
                    self.parse(name, value)
                except ValueError as exc:
                    log.error("dynamic broker config %s=%s ignored: %s", name, value, exc)
                    del out[name]
        return out

    async def load(self) -> None:
        data = await self._store.read_metadata(BLOB)
        self._configs = decode(data) if data else {}
        self._apply()

    async def replace(self, resource: str, configs: Mapping[str, str]) -> None:
        """Make ``configs`` the dynamic configs of ``resource``: durable first, then applied."""
        new = {**self._configs, resource: dict(configs)}
        if not configs:
            del new[resource]
        await self._store.write_metadata(BLOB, encode(new))
        self._configs = new
        self._apply()

    def parse(self, name: str, value: str) -> Any:
        if name in KAFKA_DYNAMIC:  # Kafka's, stored only: its ConfigDef's checks
            return parse_value(name, value)
        return self._parsers[listener_base(name) or name](value.strip())

    def with_security(self, layer: Mapping[str, str]) -> dict[str, Any]:
        """The effective values with ``layer``'s listener keystore/truststore configs (this
        node's dynamic set) in place of the current ones."""
        out = {n: v for n, v in self.values.items() if not listener_security(n)}
        out |= {n: v for n, v in self.static.items() if listener_security(n)}
        for name, raw in layer.items():
            if listener_security(name):
                out[name] = self.parse(name, raw)
        return out

    def effective(self, configs: Configs) -> dict[str, Any]:
        """The values of the dynamic configs (the listener keystore/truststore ones aside:
        ``with_security``) over the static ones with layers ``configs``."""
        mine, cluster = configs.get(self.node, {}), configs.get("", {})
        prefixed = {n for n in (*self.static, *mine, *cluster) if quota_base(n)}
        out: dict[str, Any] = {}
        for name in DYNAMIC | prefixed:
            raw = mine.get(name, cluster.get(name))
            try:
                if raw is not None:
                    out[name] = self.parse(name, raw)
                    continue
            except ValueError as exc:  # stored by an older kafkad: ignored, as Kafka does
                log.warning("dynamic broker config %s=%s ignored: %s", name, raw, exc)
            if name in self.static:
                out[name] = self.static[name]
        return out

    def _apply(self) -> None:
        try:
            security = self.with_security(self.layer(self.node))
        except ValueError as exc:  # stored by an older kafkad: ignored, as Kafka does
            log.warning("dynamic listener keystore/truststore configs ignored: %s", exc)
            security = self.with_security({})
        for name in [n for n in self.values if listener_security(n)]:
            del self.values[name]
        self.values.update({n: v for n, v in security.items() if listener_security(n)})
        values = self.effective(self._configs)
        for name in [n for n in self.values if quota_base(n) and n not in values]:
            del self.values[name]  # a per-listener override deleted: the broker-wide value
        self.values.update(values)
        mine = self.layer(self.node)
        for name in LISTENERS:  # what DescribeConfigs shows; served by proxy/dynamic_listeners.py
            if name in self.static:
                self.values[name] = mine.get(name, self.static[name])
        for listener in self.listeners:
            listener()

    def lookup(self, configs: Configs) -> Callable[[str], str | None]:
        """A config's string with dynamic layers ``configs``: this node's, the cluster
        default's, the static originals', else Kafka's default."""

        def get(name: str) -> str | None:
            layers = (configs.get(self.node, {}), configs.get("", {}), self.originals)
            return next((x[name] for x in layers if name in x), self.default(name))

        return get

    def default(self, name: str) -> str | None:
        """Kafka's ConfigDef default of ``name`` as a string (None: null or no default)."""
        if name in KAFKA_DEFAULTS:
            return KAFKA_DEFAULTS[name]
        if name in KAFKA_ONLY_CONFIGS:
            return KAFKA_ONLY_CONFIGS[name][1]
        return None if name in NULL_DEFAULTS else self._defaults.get(name)

    def synonyms(self, name: str, *, per_broker: bool) -> list[tuple[str, str, int]]:
        """Kafka's ConfigHelper.configSynonyms: (name, value, source) for each alternate name
        in each layer, highest precedence first, from the first entry of ``name`` itself; for
        the cluster default only the DYNAMIC_DEFAULT_BROKER_CONFIG ones."""
        base = listener_base(name)  # Kafka: a listener config's synonym is its base config
        names = ALTERNATES.get(name, (name,) if base is None else (name, base))
        out: list[tuple[str, str, int]] = []
        for source, layer in (
            (DYNAMIC_BROKER_CONFIG, self.layer(self.node)),
            (DYNAMIC_DEFAULT_BROKER_CONFIG, self.layer("")),
            (STATIC_BROKER_CONFIG, self.originals),
        ):
            out += [(n, layer[n], source) for n in names if n in layer]
        for n in names:
            if (default := self.default(n)) is not None:
                out.append((n, default, DEFAULT_CONFIG))
        while out and out[0][0] != name:
            out.pop(0)
        if not per_broker:
            out = [s for s in out if s[2] == DYNAMIC_DEFAULT_BROKER_CONFIG]
        return out


def refusal(
    dyn: DynamicBrokerConfigs,
    known: Callable[[str], bool],
    configs: Mapping[str, str],
    *,
    per_broker: bool = True,
) -> str | None:
    """Kafka's ``DynamicBrokerConfig.validateConfigs`` of a resource's new dynamic configs (all
    of them, not only the changed ones): the message of its INVALID_REQUEST, or None. ``known``:
    whether kafkad knows a config name (names it does not know are stored unchecked, as Kafka)."""
    # the cluster default: Kafka's per-broker configs are refused after the other checks
    later = [] if per_broker else [n for n in configs if _per_broker_only(n)]
    fixed = [
        n
        for n in configs
        if not dynamic(n)
        and n not in SECURITY | LISTENERS
        and (known(n) or n in KAFKA_DEFAULTS)
        and n not in later
        and listener_base(n) is None  # no KafkaConfig name: checked per listener
    ]
    if fixed:
        return f"Cannot update these configs dynamically: Set({', '.join(fixed)})"
    if security := [n for n in configs if n in SECURITY]:
        return (
            "These security configs can be dynamically updated only per-listener using the "
            f"listener prefix: Set({', '.join(security)})"
        )
    for name, value in configs.items():  # Kafka's DynamicConfig.Broker defines them first
        if name in BROKER_QUOTA_RATES and not _long_at_least_zero(value):
            return kafka_value_error(name, value, "must be at least 0")
    for name, value in configs.items():
        if not dynamic(name) and listener_base(name) not in LISTENER_CHECKED:
            continue
        try:
            dyn.parse(name, value)
        except ValueError as exc:  # a listener's override is checked as its base config
            return kafka_value_error(listener_base(name) or name, value, str(exc))
    if later:
        return (
            "Cannot update these configs at default cluster level, broker id must be "
            f"specified: Set({', '.join(later)})"
        )
    # Kafka then builds the whole new KafkaConfig (validateValues) and asks each reconfigurable
    new = dyn.effective({**dyn._configs, dyn.node if per_broker else "": dict(configs)})
    new_values = {n: v for n, v in dyn.values.items() if not quota_base(n)} | new
    if (problem := validate_values(new_values)) is not None:
        return problem
    if (problem := reconfiguration_error(dyn.values, new_values, dyn.listener_names)) is not None:
        return problem
    layers = {**dyn._configs, dyn.node if per_broker else "": dict(configs)}
    before, after = dyn.lookup(dyn._configs), dyn.lookup(layers)
    resource = dyn.node if per_broker else ""
    return kafka_only_error(
        before,
        after,
        new_values.get("log.retention.ms", -1),
        new_values.get("log.retention.bytes", -1),
        follower_set=any(
            _FOLLOWER in x for x in (dyn.layer(dyn.node), dyn.layer(""), dyn.originals)
        ),
        changed=tuple(n for n in {**dyn.layer(resource), **configs} if before(n) != after(n)),
        listeners=dyn.listener_names,
    )


# Kafka's DynamicBrokerConfig.PerBrokerConfigs: DynamicListenerConfig's (and the security ones)
# but the cluster-level listener configs; a listener-prefixed config of any but those.
_CLUSTER_LEVEL_LISTENER = frozenset(
    {"max.connections", "max.connection.creation.rate", "num.network.threads"}
)
_PER_BROKER = SECURITY | {
    "listeners",
    "listener.security.protocol.map",
    "principal.builder.class",
    "ssl.protocol",
    "ssl.provider",
    "ssl.cipher.suites",
    "ssl.enabled.protocols",
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm",
    "ssl.secure.random.implementation",
    "ssl.client.auth",
    "ssl.engine.factory.class",
    "sasl.mechanism.inter.broker.protocol",
    "sasl.jaas.config",
    "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name",
    "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds",
}


def _per_broker_only(name: str) -> bool:
    if (base := listener_base(name)) is not None:
        return base not in _CLUSTER_LEVEL_LISTENER
    return name in _PER_BROKER


_TYPE_NAMES = {INT: "INT", SHORT: "SHORT", LONG: "LONG", DOUBLE: "DOUBLE"}
_BITS = {INT: 32, SHORT: 16, LONG: 64}


def _long_at_least_zero(value: str) -> bool:
    try:
        return 0 <= int(value.strip()) < 2**63
    except ValueError:
        return False


def kafka_value_error(name: str, value: str, problem: str) -> str:
    """The message of Kafka's ``ConfigException`` for a value kafkad's parser refused
    (``problem``: its reason), in ConfigDef's words: the type's ("Not a number of type LONG"),
    ``Range`` ("Value must be at least 1"), ``ValidString``/``ValidList`` ("String must be one
    of: ...")."""
    kind, v = config_type(name), value.strip()

    def invalid(shown: str, why: str) -> str:
        return f"Invalid value {shown} for configuration {name}: {why}"

    try:
        number = float(v) if kind == DOUBLE else int(v) if kind in _BITS else None
        if kind in _BITS and not -(2 ** (_BITS[kind] - 1)) <= int(v) < 2 ** (_BITS[kind] - 1):
            raise ValueError  # outside the Java type: Java's parse fails
    except ValueError:
        return invalid(value, f"Not a number of type {_TYPE_NAMES[kind]}")
    if kind == BOOLEAN and v.lower() not in ("true", "false"):
        return invalid(value, "Expected value to be either true or false")
    if number is not None and (
        m := re.fullmatch(r"must be (?:at least (\S+)|between (\S+) and (\S+))", problem)
    ):
        low, high = (m[1], None) if m[1] else (m[2], m[3])
        too_low = number < float(low)
        why = f"Value must be at least {low}" if too_low else f"Value must be no more than {high}"
        return invalid(str(number), why)
    if name == "log.cleanup.policy":
        items = [x.strip() for x in v.split(",")] if v else []
        if bad := [x for x in items if x not in ("compact", "delete")]:
            if "" in bad:
                return f"Configuration '{name}' values must not be empty."
            return invalid(bad[0], "String must be one of: compact, delete")
    if m := re.fullmatch(r"expected one of (.*)", problem):
        return invalid(v, f"String must be one of: {m[1]}")
    if name == "log.message.timestamp.type":
        return invalid(v, "String must be one of: CreateTime, LogAppendTime")
    return invalid(v if kind == STRING else value, problem)  # a STRING is validated trimmed


def render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
