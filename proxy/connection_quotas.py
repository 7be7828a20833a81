"""Connection quotas: Kafka's ``kafka.network.ConnectionQuotas`` for one node.

Every accepted connection is counted per peer IP, per listener and broker-wide before it is
served (``inc``), and uncounted when it closes (``dec``). As Kafka's acceptor does:

* the connection creation rate is recorded broker-wide and per listener, each a Kafka ``Rate``
  (``quota.window.num`` samples of ``quota.window.size.seconds``) with the quota
  ``max.connection.creation.rate`` (the listener's: its override, else the broker-wide one);
  above either, the accept is delayed by ``round((rate - quota) / quota * window)`` ms, the
  longer of the two, at most one window (``QuotaUtils.boundedThrottleTime``), not refused;
* then, while the listener has ``max.connections`` connections (its override, else the
  broker-wide value) or the broker has ``max.connections``, the accept waits for one to close
  or for the limits to be raised (Kafka's acceptor blocks in ``waitForConnectionSlot``; the
  accepted socket stays open, unread, meanwhile; later clients queue in the listen backlog);
* then the connection is counted, and if its IP already had ``max.connections.per.ip``
  connections (or its ``max.connections.per.ip.overrides`` count) it is closed at once.

When ``max.connections`` is lowered below the connections open, the least recently active
ones are closed (Kafka's Processor.closeExcessConnections; ``Server._close_excess``).

Not modelled: Kafka's inter-broker listener exemption (kafkad has no inter-broker listener)
and the per-IP connection creation rate (the ``ip`` client-quota entity's
``connection_creation_rate``).

Deviation: Kafka records every connection in the rate sensors; kafkad records only while a
creation-rate quota is set (broker-wide or on the listener), so with no quota the accept path
costs two dict updates. A quota set at runtime therefore starts from an empty window (Kafka's
may throttle at once if the last window already saw more connections than the new quota).

Limits are re-read by ``configure`` (at start and after each dynamic config change) and a
change wakes the waiting accepts at once (Kafka's ``counts.notifyAll``). Times come from
``trio.current_time`` (a MockClock in tests).
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import math
import os
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import trio

from proxy.connection_quota_config import (
    INT_MAX,
    MAX_CONNECTION_CREATION_RATE,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_IP,
    MAX_CONNECTIONS_PER_IP_OVERRIDES,
    listener_limit,
    parse_overrides,
)
from proxy.quotas.throttle import Rate

log = logging.getLogger("kafkad.connections")


class TooManyConnections(Exception):
    def __init__(self, ip: str, count: int) -> None:
        super().__init__(f"{ip} already has the configured maximum of {count} connections")
        self.ip, self.count = ip, count


def normalise_ip(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host.split("%")[0]))
    except ValueError:
        return host


def _resolve(host: str) -> str | None:
    """Kafka's ``InetAddress.getByName``: an IP literal as is, a host name's first address."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return normalise_ip(str(socket.getaddrinfo(host, None)[0][4][0]))
    except OSError as exc:
        log.warning(
            "%s: cannot resolve %s (%s); ignored", MAX_CONNECTIONS_PER_IP_OVERRIDES, host, exc
        )
        return None


class _Limit:
    """One listener's (or the broker's) count, connection limit and creation-rate sensor."""

    __slots__ = ("count", "max", "quota", "rate", "throttle_ms_total", "throttled")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.count = 0
        self.max = INT_MAX
        self.quota = INT_MAX
        self.rate = Rate(samples, window_ms)
        self.throttle_ms_total = 0  # connection-accept-throttle-time's inputs
        self.throttled = 0


class ConnectionQuotas:
    def __init__(self, values: Mapping[str, Any], listeners: Iterable[str]) -> None:
        self.values = values
        samples, window_s = values["quota.window.num"], values["quota.window.size.seconds"]
        self.max_throttle_ms: int = window_s * 1000
        self.broker = _Limit(samples, window_s * 1000)
        self.listeners = {name: _Limit(samples, window_s * 1000) for name in listeners}
        self.per_ip: dict[str, int] = {}  # IP -> open connections
        self.per_ip_default = INT_MAX
        self.per_ip_overrides: dict[str, int] = {}
        self._overrides_text: str | None = None
        self._changed = trio.Event()
        self._waiting = 0  # accepts waiting for a slot or out a throttle
        self._blocked = trio.Event()  # set (and replaced) when an accept starts waiting
        self.configure()

    @property
    def total(self) -> int:
        return self.broker.count

    def configure(self) -> None:
        """Re-read the limits from ``values``; waiting accepts look again at once."""
        v = self.values
        self.per_ip_default = v[MAX_CONNECTIONS_PER_IP]
        text = v[MAX_CONNECTIONS_PER_IP_OVERRIDES]
        if text != self._overrides_text:
            try:
                parsed = parse_overrides(text)
            except ValueError as exc:  # checked before it was applied; stay with the old ones
                log.warning("%s=%s ignored: %s", MAX_CONNECTIONS_PER_IP_OVERRIDES, text, exc)
            else:
                resolved = {_resolve(host): n for host, n in parsed.items()}
                self.per_ip_overrides = {ip: n for ip, n in resolved.items() if ip is not None}
                self._overrides_text = text
        self.broker.max = v[MAX_CONNECTIONS]
        self.broker.quota = v[MAX_CONNECTION_CREATION_RATE]
        for name, limit in self.listeners.items():
            limit.max = listener_limit(v, name, MAX_CONNECTIONS)
            limit.quota = listener_limit(v, name, MAX_CONNECTION_CREATION_RATE)
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def count(self, ip: str) -> int:
        return self.per_ip.get(ip, 0)

    async def inc(self, listener: str, ip: str) -> None:
        """Count a new connection from ``ip`` on ``listener``, first waiting out a creation-rate
        throttle and for a free slot; TooManyConnections (uncounted again) if the IP is at its
        limit: the caller closes the connection at once."""
        limit = self.listeners[listener]
        await self._wait_for_slot(limit)
        count = self.per_ip.get(ip, 0)
        self.per_ip[ip] = count + 1
        self.broker.count += 1
        limit.count += 1
        most = self.per_ip_overrides.get(ip, self.per_ip_default)
        if count >= most:
            self.dec(listener, ip)
            raise TooManyConnections(ip, most)

    def dec(self, listener: str, ip: str) -> None:
        count = self.per_ip[ip]
        if count == 1:
            del self.per_ip[ip]
        else:
            self.per_ip[ip] = count - 1
        self.broker.count -= 1
        self.listeners[listener].count -= 1
        if self._waiting:
            self._notify()

    async def until_waiting(self, n: int) -> None:
        """Returns once ``n`` accepts are waiting (tests: a connection accepted, not served)."""
        while True:
            blocked = self._blocked
            if self._waiting >= n:
                return
            await blocked.wait()

    def _slot_available(self, limit: _Limit) -> bool:
        return limit.count < limit.max and self.broker.count < self.broker.max

    async def _wait_for_slot(self, limit: _Limit) -> None:
        if limit.quota >= INT_MAX and self.broker.quota >= INT_MAX:
            # no rate quota: nothing recorded (the fast path; see the module docstring)
            if self._slot_available(limit):
                return
            start_ms, throttle_ms = _now_ms(), 0
        else:
            start_ms = _now_ms()
            throttle_ms = self._record(self.broker, start_ms)
            throttle_ms = max(throttle_ms, self._record(limit, start_ms))
            if throttle_ms > 0:
                limit.throttle_ms_total += throttle_ms
                limit.throttled += 1
            if throttle_ms <= 0 and self._slot_available(limit):
                return
        end_ms = start_ms + throttle_ms
        self._waiting += 1
        self._blocked.set()
        self._blocked = trio.Event()
        try:
            while True:
                remaining_ms = end_ms - _now_ms()
                if remaining_ms <= 0 and self._slot_available(limit):
                    return
                changed = self._changed
                with trio.move_on_after(remaining_ms / 1000 if remaining_ms > 0 else math.inf):
                    await changed.wait()
        finally:
            self._waiting -= 1

    def _record(self, limit: _Limit, now_ms: int) -> int:
        """Kafka's recordAndGetThrottleTimeMs: record one connection; the throttle time if the
        rate is now above the quota."""
        limit.rate.record(1.0, now_ms)
        if limit.quota >= INT_MAX:
            return 0  # the rate cannot exceed Integer.MAX_VALUE per second
        if limit.quota <= 0:  # Kafka: an infinite throttle time, bounded to one window
            return self.max_throttle_ms
        rate = limit.rate.measure(now_ms)
        if rate <= limit.quota:
            return 0
        window = limit.rate.window_size(now_ms)
        throttle = math.floor((rate - limit.quota) / limit.quota * window + 0.5)
        return min(throttle, self.max_throttle_ms)


def _now_ms() -> int:
    return int(trio.current_time() * 1000)


# accept(2) errors that mean the system is overloaded: trio.serve_listeners' list and pause
ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
ACCEPT_RETRY_S = 0.1


def peer_ip(stream: trio.abc.Stream) -> str:
    """The peer's IP ("" for a stream without a socket, e.g. an in-memory one)."""
    if isinstance(stream, trio.SocketStream):
        try:
            return normalise_ip(str(stream.socket.getpeername()[0]))
        except OSError:
            pass
    return ""


async def serve_listener(
    quotas: ConnectionQuotas,
    name: str,
    listener: trio.abc.Listener[trio.abc.Stream],
    handler: Callable[[trio.abc.Stream], Awaitable[None]],
    handler_nursery: trio.Nursery,
) -> None:
    """trio.serve_listeners' loop for one listening socket of listener ``name``, each accepted
    connection first passed through ``quotas.inc`` (which may delay it, as Kafka's acceptor
    waits) and counted until its handler returns."""

    async def run(stream: trio.abc.Stream, ip: str) -> None:
        try:
            await handler(stream)
        finally:
            quotas.dec(name, ip)
            await trio.aclose_forcefully(stream)

    async with listener:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno not in ACCEPT_CAPACITY_ERRNOS:
                    raise
                log.error("accept: %s; retrying in %s s", os.strerror(exc.errno), ACCEPT_RETRY_S)
                await trio.sleep(ACCEPT_RETRY_S)
                continue
            ip = peer_ip(stream)
            try:
                await quotas.inc(name, ip)
            except TooManyConnections as exc:
                log.info(
                    "Rejected connection from %s, address already has the configured maximum "
                    "of %d connections.",
                    exc.ip,
                    exc.count,
                )
                await trio.aclose_forcefully(stream)
                continue
            except BaseException:  # cancelled while waiting for a slot: shutting down
                await trio.aclose_forcefully(stream)
                raise
            handler_nursery.start_soon(run, stream, ip)
