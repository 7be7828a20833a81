"""The listening sockets of a client listener: one function for the listeners bound at start
(proxy/server.py) and those added at runtime (proxy/dynamic_listeners.py), so both bind alike.

It is ``trio.open_tcp_listeners``, made synchronous (a listener added at runtime is bound inside
the dynamic config change, before its answer): every address ``getaddrinfo(host, port,
AI_PASSIVE)`` gives (``0.0.0.0``: IPv4's every interface; a host name: each of its addresses),
``SO_REUSEADDR``, ``IPV6_V6ONLY`` on IPv6 sockets, the backlog ``socket.listen.backlog.size``
(Kafka's, 50; the kernel caps it at ``net.core.somaxconn``), an address family the system
lacks skipped while another binds.

Differences from trio: ``::`` alone is bound as Java binds it, one dual-stack socket
(``IPV6_V6ONLY`` off: IPv4 clients too), as Kafka's ``[::]:9092`` listener takes both; port 0 on
a host with several addresses (``localhost``: ``::1`` and ``127.0.0.1``) binds every address on
the port the first one got (trio gives each its own), as the listener advertises one port (Kafka
binds one socket, so has one).

Deviations from Kafka: a listener's blank host (``PLAINTEXT://:9092``) reaches here as
``0.0.0.0`` (proxy/listeners.py), IPv4 only, where Java binds its wildcard dual-stack; a host
name is bound on each of its addresses where Java binds the first.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from typing import Any

BACKLOG = 50  # socket.listen.backlog.size's default (SocketServerConfigs)
PORT_0_TRIES = 10  # port 0 on several addresses: picks of a port free on every one


def needs_lookup(host: str) -> bool:
    """Whether binding ``host`` asks the resolver (a host name), so may block: trio's
    getaddrinfo answers a numeric host at once and runs only a name's lookup in a thread."""
    try:
        ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return bool(host)
    return False


def bind_sockets(host: str, port: int, backlog: int = BACKLOG) -> list[socket.socket]:
    """Bound, listening sockets for ``host:port`` (blocking: resolves ``host``). An OSError if
    one cannot bind (those already bound closed again)."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    infos = list(dict.fromkeys(infos))  # an address twice (/etc/hosts): bound once
    for _ in range(PORT_0_TRIES - 1):
        try:
            return _bind(infos, port, backlog)
        except _TakenElsewhere:  # port 0's port taken on another address: pick again
            continue
    return _bind(infos, port, backlog, last=True)


class _TakenElsewhere(Exception):
    """Port 0: the port the first address got is in use on another."""


def _bind(infos: list[Any], port: int, backlog: int, last: bool = False) -> list[socket.socket]:
    dual_stack = len(infos) == 1 and _is_ipv6_wildcard(str(infos[0][4][0]))
    out: list[socket.socket] = []
    unsupported: list[OSError] = []
    try:
        for family, kind, proto, _, address in infos:
            if port == 0 and out:  # one port for every address: the one the first got
                address = (address[0], out[0].getsockname()[1], *address[2:])
            try:
                sock = socket.socket(family, kind, proto)
            except OSError as exc:
                if exc.errno != errno.EAFNOSUPPORT:
                    raise
                unsupported.append(exc)
                continue
            out.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0 if dual_stack else 1)
            try:
                sock.bind(address)
            except OSError as exc:
                if port == 0 and len(out) > 1 and exc.errno == errno.EADDRINUSE and not last:
                    raise _TakenElsewhere from exc
                raise
            sock.listen(backlog)
    except BaseException:
        for sock in out:
            sock.close()
        raise
    if unsupported and not out:
        raise OSError(
            errno.EAFNOSUPPORT,
            "This system doesn't support any of the kinds of socket that that address could use",
        )
    return out


def _is_ipv6_wildcard(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%")[0]) == ipaddress.IPv6Address("::")
    except ValueError:
        return False
