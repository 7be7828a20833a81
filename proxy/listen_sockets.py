"""The listening sockets of a client listener: one function for the listeners bound at start
(proxy/server.py) and those added at runtime (proxy/dynamic_listeners.py), so both bind alike.

It is ``trio.open_tcp_listeners``, made synchronous (a listener added at runtime is bound inside
the dynamic config change, before its answer): every address ``getaddrinfo(host, port,
AI_PASSIVE)`` gives (``0.0.0.0``: IPv4's every interface; ``::``: IPv6's, IPv6 only; a host
name: each of its addresses), ``SO_REUSEADDR``, ``IPV6_V6ONLY`` on IPv6 sockets, the backlog
``socket.listen.backlog.size`` (Kafka's, 50; the kernel caps it at ``net.core.somaxconn``),
an address family the system lacks skipped while another binds. ``::`` alone is bound as Java
binds it, one dual-stack socket (``IPV6_V6ONLY`` off: IPv4 clients too), as Kafka's
``[::]:9092`` listener takes both.

Deviations from Kafka: a listener's blank host (``PLAINTEXT://:9092``) reaches here as
``0.0.0.0`` (proxy/listeners.py), IPv4 only, where Java binds its wildcard dual-stack; a host
name is bound on each of its addresses where Java binds the first.
"""

from __future__ import annotations

import errno
import ipaddress
import socket

BACKLOG = 50  # socket.listen.backlog.size's default (SocketServerConfigs)


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
    dual_stack = len(infos) == 1 and _is_ipv6_wildcard(str(infos[0][4][0]))
    out: list[socket.socket] = []
    unsupported: list[OSError] = []
    try:
        for family, kind, proto, _, address in infos:
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
            sock.bind(address)
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
