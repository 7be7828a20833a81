"""Listeners added and removed at runtime (Kafka's ``DynamicListenerConfig``): ``listeners`` and
``listener.security.protocol.map`` are dynamic per broker. ``advertised.listeners`` is not (Kafka
4 dropped it, KAFKA-18405; proxy/dynamic_broker.py refuses it): the static one applies.

Deviation (deliberate): a listener added at runtime is in kafkad's Metadata, FindCoordinator and
DescribeCluster answers at once (``Broker.listeners_now``), and after a restart while stored.
Kafka 4.2 registers a broker's listeners once, at start: BrokerServer builds its ``ListenerInfo``
from the static config and sends it in the BrokerRegistration request, and
``DynamicListenerConfig.reconfigure`` only adds acceptors (``SocketServer.addListeners``), never
registers again. So in Kafka a client bootstrapping on an added listener is answered with no
brokers (the metadata cache has no endpoint for that listener) until the listener is in the
static config and the broker restarts. kafkad serves a developer adding a listener to a running
broker; no client that works with Kafka's behaviour breaks on it.

The node's dynamic layer (proxy/dynamic_broker.py) holds the new strings; what it lacks is the
static value (the listeners the broker started with). ``DynamicListeners.endpoints`` is the
effective client listeners, computed at start from the stored layer (so an added listener
outlives a restart) and after each change. The server (proxy/server.py) is told the listeners
added and removed (``on_change``): it binds the added ones at once and starts accepting on them,
and for a removed one stops accepting and closes its open connections, as Kafka's
``SocketServer.removeListeners`` stops the listener's acceptor and processors.

Checks (``validate``, one of ``DynamicBrokerConfigs.validators``), each refused INVALID_REQUEST:
- each entry parses as Kafka's endpoint ("Unable to parse x to a broker endpoint");
- kafkad's listener rules (proxy/listeners.py: unique names and ports, every listener in the
  protocol map, advertised names a subset of listeners, no wildcard advertised host);
  Kafka's KafkaConfig words for the advertised subset ("requirement failed: advertised.listeners
  listener names must be equal to or a subset of ...");
- Kafka's ``DynamicListenerConfig.validateReconfiguration``: the old advertised listeners stay
  listeners (without ``advertised.listeners`` every listener is advertised: as in Kafka 4, only
  a listener the static ``advertised.listeners`` leaves out can be removed at runtime),
  every listener is in the protocol map, an existing listener keeps its security protocol;
  those come wrapped as Kafka's ``processReconfiguration`` wraps them ("Invalid value
  org.apache.kafka.common.config.ConfigException: ... for configuration Invalid dynamic
  configuration");
- the controller listener of a combined node (named in the static ``listeners``, not served by
  kafkad) stays, at the same address (Kafka: "controller.listener.names must only contain values
  appearing in the 'listeners' configuration ...");
- an added TLS or SASL listener's own configs (``listener.name.<l>.*`` in the same layer, or the
  broker's) must build (proxy/tls.py, proxy/sasl/settings.py);
- an added listener's bind address must be free: it is bound and closed again at once (the
  real bind follows the change; a port taken in between is logged, the listener not served).
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Callable, Mapping
from typing import Any

from proxy.broker_config_types import listener_prefixed
from proxy.dynamic_broker import DynamicBrokerConfigs
from proxy.listen_sockets import BACKLOG, bind_sockets
from proxy.listeners import Listener, ListenerError, listener_map, parse_listeners, protocol_map
from proxy.sasl.settings import SASL_PROTOCOLS, SaslConfigError, listener_sasl
from proxy.tls import TLS_PROTOCOLS, TlsConfigError, server_settings

log = logging.getLogger("kafkad.listeners")
_ENDPOINT = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")

NAMES = ("listeners", "listener.security.protocol.map")
Change = Callable[[tuple[Listener, ...], tuple[Listener, ...]], None]  # (added, removed)


def invalid_dynamic(message: str) -> str:
    """Kafka's ``new ConfigException("Invalid dynamic configuration", e)`` (the (name, value)
    constructor) around a ConfigException of a reconfigurable's validation."""
    return (
        f"Invalid value org.apache.kafka.common.config.ConfigException: {message} "
        "for configuration Invalid dynamic configuration"
    )


def _scala_set(names: list[str]) -> str:
    return "Set(" + ", ".join(f"ListenerName({n})" for n in names) + ")"


class DynamicListeners:
    def __init__(self, dynamic: DynamicBrokerConfigs, static: tuple[Listener, ...]) -> None:
        self._dynamic = dynamic
        self._static = static
        raw = str(dynamic.static.get("listeners") or "")
        served = {e.name for e in static}
        # a combined node's controller listener: named in listeners, not a client listener
        self.controllers = {
            n: a for n, a in listener_map(raw, "listeners").items() if n not in served
        }
        self.on_change: list[Change] = []
        try:
            self.endpoints = self.new_endpoints(dynamic.layer(dynamic.node))
        except ListenerError as exc:  # stored by an older kafkad: ignored, the static ones
            log.error("dynamic listeners ignored: %s", exc)
            self.endpoints = static
        dynamic.validators.append(self.validate)
        dynamic.listeners.append(self.reconfigure)

    def _strings(self, layer: Mapping[str, str]) -> tuple[str, str, str]:
        static = self._static
        binds = ",".join(e.url() for e in static)
        binds += "".join(f",{n}://{a}" for n, a in self.controllers.items())
        adverts = ",".join(
            f"{e.name}://{e.advertised_host}:{e.advertised_port}"
            for e in static
            if e.advertised_port is not None
        )
        pmap = str(self._dynamic.static.get("listener.security.protocol.map") or "")
        return (
            layer.get("listeners", binds),
            adverts,  # not dynamic in Kafka 4: one stored by an older kafkad is ignored
            layer.get("listener.security.protocol.map", pmap),
        )

    def new_endpoints(self, layer: Mapping[str, str]) -> tuple[Listener, ...]:
        if not any(n in layer for n in NAMES):
            return self._static
        binds, adverts, pmap = self._strings(layer)
        return parse_listeners(binds, adverts, pmap, frozenset(self.controllers))

    def values_with(self, layer: Mapping[str, str]) -> dict[str, Any]:
        """The broker's values with ``layer``'s listener-prefixed configs (a new listener's
        SASL and TLS configs), each parsed as its unprefixed config if kafkad knows it. One
        that does not parse (stored by an older kafkad) is ignored with a warning, as Kafka's
        ``DynamicBrokerConfig.removeInvalidConfigs`` ignores an invalid stored config."""
        out = self._dynamic.with_security(layer)
        for name, raw in layer.items():
            parts = listener_prefixed(name)
            if parts is None or name in out:
                continue
            try:
                out[name] = self._dynamic.parse(parts[1], raw)
            except KeyError:
                out[name] = raw
            except ValueError as exc:
                log.warning("dynamic broker config %s=%s ignored: %s", name, raw, exc)
        return out

    def validate(self, layer: Mapping[str, str]) -> str | None:
        old_layer = self._dynamic.layer(self._dynamic.node)
        if all(layer.get(n) == old_layer.get(n) for n in NAMES):
            return None
        binds, adverts, pmap = self._strings(layer)
        for entry in [x.strip() for x in f"{binds},{adverts}".split(",") if x.strip()]:
            if not _ENDPOINT.fullmatch(
                entry
            ):  # Kafka's SocketServerConfigs.listenerListToEndPoints
                return f"Unable to parse {entry} to a broker endpoint"
        try:
            bind_names = listener_map(binds, "listeners")
            advert_names = listener_map(adverts, "advertised.listeners")
            protocols = protocol_map(pmap)
        except ListenerError as exc:
            return str(exc)
        for name, address in self.controllers.items():
            if bind_names.get(name) != address:
                return (
                    "requirement failed: controller.listener.names must only contain values "
                    "appearing in the 'listeners' configuration when running the KRaft "
                    f"controller role (kafkad: the controller listener {name}://{address} "
                    "cannot be removed or changed)"
                )
        if not advert_names.keys() <= bind_names.keys():
            return (
                "requirement failed: advertised.listeners listener names must be equal to or a "
                f"subset of the ones defined in listeners. Found {','.join(advert_names)}. The "
                "valid options based on the current configuration are "
                f"{','.join(bind_names)}"
            )
        old = {e.name: e for e in self.endpoints}
        # Kafka's effectiveAdvertisedBrokerListeners: advertised.listeners, else listeners
        was = self._dynamic.static.get("advertised.listeners")
        advertised = [n for n in listener_map(str(was or ""), "") if n in old] or list(old)
        if not set(advertised) <= bind_names.keys():
            return invalid_dynamic(
                f"Advertised listeners '{_scala_set(advertised)}' must be a subset of listeners "
                f"'{_scala_set(list(bind_names))}'"
            )
        if not bind_names.keys() <= protocols.keys():
            shown = ", ".join(f"ListenerName({n}) -> {p}" for n, p in protocols.items())
            return invalid_dynamic(
                f"Listeners '{_scala_set(list(bind_names))}' must be subset of listener map "
                f"'{{{shown}}}'"
            )
        for name, listener in old.items():
            if protocols.get(name) != listener.protocol:
                return invalid_dynamic(
                    f"Security protocol cannot be updated for existing listener "
                    f"ListenerName({name})"
                )
        try:
            new = self.new_endpoints(layer)
        except ListenerError as exc:
            return str(exc)
        values = self.values_with(layer)
        for listener in new:
            if listener.name in old:
                continue
            try:
                if listener.protocol in TLS_PROTOCOLS:
                    server_settings(values, listener.name, listener.protocol, warn=False)
                if listener.protocol in SASL_PROTOCOLS:
                    listener_sasl(values, listener.name)
            except (TlsConfigError, SaslConfigError, ValueError) as exc:
                return invalid_dynamic(str(exc))
            if listener.port and listener.port not in {e.port for e in old.values()}:
                try:
                    for sock in bind(listener):
                        sock.close()
                except OSError as exc:
                    return f"listener {listener.name}: cannot bind {listener.url()}: {exc}"
        return None

    def reconfigure(self) -> None:
        try:
            new = self.new_endpoints(self._dynamic.layer(self._dynamic.node))
        except ListenerError as exc:
            log.error("dynamic listeners not applied: %s", exc)
            return
        old = {e.name: e for e in self.endpoints}
        now = {e.name: e for e in new}
        moved = {n for n in old.keys() & now.keys() if old[n].url() != now[n].url()}
        added = tuple(e for e in new if e.name not in old or e.name in moved)
        removed = tuple(e for e in old.values() if e.name not in now or e.name in moved)
        self.endpoints = new
        if new != tuple(old.values()):
            for change in self.on_change:
                change(added, removed)


def bind(listener: Listener, backlog: int = BACKLOG) -> list[socket.socket]:
    """The listening sockets of ``listener``, bound now, as at start (proxy/listen_sockets.py)."""
    return bind_sockets(listener.host, listener.port, backlog)
