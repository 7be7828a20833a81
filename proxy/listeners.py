"""Named client listeners: Kafka's ``listeners`` / ``advertised.listeners`` /
``listener.security.protocol.map``.

A listener is a name, a security protocol, a bind HOST:PORT and an advertised HOST:PORT. Each
connection remembers the listener it came in on, and Metadata, FindCoordinator and
DescribeCluster answer with that listener's advertised address (as Kafka answers with the
request's listener name), so one broker serves clients on different networks (a compose
network and the host).

Rules, as Kafka's KafkaConfig checks them: names are unique, bind ports are unique (port 0,
"pick a free port", may repeat; two listeners may share a port if one binds an IPv4 address and
the other an IPv6 one, KIP-797), every name has a security protocol in the protocol map,
``advertised.listeners`` names only listeners, a listener without an advertised entry
advertises its bind address, a blank host (``PLAINTEXT://:9092``) binds every interface and is
advertised as this machine's canonical host name, and an explicit wildcard bind (``0.0.0.0``)
needs an advertised entry (clients cannot connect to 0.0.0.0).

All four protocols are served: TLS in proxy/tls.py, SASL in proxy/sasl/.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "0:0:0:0:0:0:0:0"})
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's default listener.security.protocol.map: each protocol's name maps to itself, in the
# order Kafka prints it (SocketServerConfigs collects them in a HashMap of listener names).
DEFAULT_PROTOCOL_MAP = ",".join(
    f"{p}:{p}" for p in ("SASL_SSL", "PLAINTEXT", "SSL", "SASL_PLAINTEXT")
)
SERVED_PROTOCOLS = frozenset(SECURITY_PROTOCOLS)


LISTENER_PREFIX = "listener.name."


def listener_value(values: Mapping[str, Any], listener: str, name: str) -> Any:
    """``name`` for ``listener``: its ``listener.name.<listener>.`` override (Kafka's
    ListenerName.configPrefix, the name lower-cased), else the global value."""
    prefixed = f"{LISTENER_PREFIX}{listener.lower()}.{name}"
    return values[prefixed] if prefixed in values else values[name]


class ListenerError(ValueError):
    pass


@dataclass(frozen=True)
class Listener:
    name: str
    protocol: str
    host: str  # bind host
    port: int  # bind port; 0 picks a free one
    advertised_host: str
    advertised_port: int | None  # None: the bound port (a port-0 listener without an entry)

    def url(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def listener_map(text: str, what: str) -> dict[str, str]:
    """``NAME://host:port,...`` -> {NAME: "host:port"}; malformed or repeated names raise."""
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, address = item.partition("://")
        if not sep or not name:
            raise ListenerError(f"{what}: {item!r} is not NAME://HOST:PORT")
        if name.upper() in out:
            raise ListenerError(f"{what}: listener name {name.upper()} appears twice")
        out[name.upper()] = address
    return out


def protocol_map(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, protocol = item.partition(":")
        if not sep:
            raise ListenerError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL")
        out[name.strip().upper()] = protocol.strip().upper()
    return out


def resolve_blank_host(address: str) -> str:
    """Kafka advertises a listener without a host (``PLAINTEXT://:9092``) as the machine's
    canonical host name (ListenerInfo.withWildcardHostnamesResolved)."""
    host, sep, port = address.rpartition(":")
    if sep and not host.strip("[]"):
        return f"{socket.getfqdn()}:{port}"
    return address


def host_port(text: str, what: str, *, lowest_port: int = 1) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ListenerError(f"{what} {text!r}: expected HOST:PORT")
    if not lowest_port <= int(port) <= 65535:
        raise ListenerError(f"{what} {text!r}: the port must be between {lowest_port} and 65535")
    return host.strip("[]") or "0.0.0.0", int(port)


def parse_listeners(
    listeners: str,
    advertised: str,
    protocols: str,
    controllers: frozenset[str] = frozenset(),
) -> tuple[Listener, ...]:
    """The client listeners of ``listeners`` (controller listeners left out: kafkad has no
    quorum to serve), each with its advertised address."""
    binds = {n: a for n, a in listener_map(listeners, "listeners").items() if n not in controllers}
    adverts = {
        n: a
        for n, a in listener_map(advertised, "advertised.listeners").items()
        if n not in controllers
    }
    pmap = protocol_map(protocols)
    if not binds:
        raise ListenerError("listeners: no client listener")
    unknown = sorted(adverts.keys() - binds.keys())
    if unknown:
        raise ListenerError(
            f"advertised.listeners: {', '.join(unknown)} not in listeners "
            "(an advertised listener must be one the broker binds)"
        )
    out: list[Listener] = []
    ports: dict[int, list[tuple[str, str]]] = {}
    for name, address in binds.items():
        protocol = pmap.get(name)
        if protocol is None:
            raise ListenerError(
                f"listeners: no security protocol for listener {name} "
                "in listener.security.protocol.map"
            )
        if protocol not in SERVED_PROTOCOLS:
            served = " and ".join(sorted(SERVED_PROTOCOLS))
            raise ListenerError(f"listeners: {name} is {protocol}; kafkad serves {served}")
        host, port = host_port(address, f"listeners {name}", lowest_port=0)
        if port:
            ports.setdefault(port, []).append((name, host))
            _check_shared_port(port, ports[port])
        if name in adverts:
            adv_host, adv_port = host_port(
                resolve_blank_host(adverts[name]), f"advertised.listeners {name}"
            )
            if adv_host in WILDCARD_HOSTS:
                raise ListenerError(
                    f"advertised.listeners {name} {adverts[name]!r}: clients cannot connect "
                    "to a wildcard address"
                )
            advertised_port: int | None = adv_port
        elif not address.rpartition(":")[0].strip("[]"):  # blank host: this machine's name
            adv_host, advertised_port = socket.getfqdn(), port or None
        elif host in WILDCARD_HOSTS:
            raise ListenerError(
                f"listeners {name} {address!r} binds every interface, so it needs an "
                "advertised.listeners entry (the address clients connect to; Kafka refuses "
                "to advertise 0.0.0.0 too)"
            )
        else:
            adv_host, advertised_port = host, port or None
        out.append(Listener(name, protocol, host, port, adv_host, advertised_port))
    return tuple(out)


def _ip_version(host: str) -> int | None:
    try:
        return ipaddress.ip_address(host).version
    except ValueError:
        return None


def _check_shared_port(port: int, users: list[tuple[str, str]]) -> None:
    """Kafka (CoreUtils.listenerListToEndPoints): one port, one listener, except an IPv4
    address and an IPv6 address sharing it."""
    if len(users) == 1:
        return
    versions = sorted(str(_ip_version(host)) for _, host in users)
    if versions != ["4", "6"]:
        names = " and ".join(name for name, _ in users)
        raise ListenerError(
            f"listeners: {names} all bind port {port} (only an IPv4 and an IPv6 address "
            "may share a port)"
        )
