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

When ``max.connections`` is lowered below the connections open, each listener's least recently
active are closed in turn (Kafka's Processor.closeExcessConnections; ``Server._close_excess``);
a lowered ``listener.name.<l>.max.connections`` closes none (it holds new ones).

An ``ip`` client-quota entity's ``connection_creation_rate`` (AlterClientQuotas; the default
``ip`` entity for every other IP) is checked last: above it, the connection is taken back out
of every rate, not counted, and closed after the throttle time, unserved (Kafka's
ConnectionThrottledException and ``throttledSockets``).

The inter-broker listener (Kafka's ``inter.broker.listener.name``, else the listener named after
``security.inter.broker.protocol``: PLAINTEXT), while the broker has other listeners too, is
Kafka's protected listener: the broker-wide ``max.connections`` and creation rate do not apply
to it (its own ``listener.name.<l>.`` limits do), and a lowered ``max.connections`` closes none
of its connections (``protectedListener``). Its connections still count in the broker's total:
one that takes the total past ``max.connections`` makes the other listeners close their least
recently active (Kafka's processors check ``maxConnectionsExceeded`` on every poll; kafkad as
each connection starts). A one-node cluster still has one: Kafka requires it among the
static listeners. kafkad starts without it too, and then has none (a listener added at runtime
under its name is an ordinary one: ``Server.run``).

Deviation: Kafka records every connection in the rate sensors; kafkad records only while a
creation-rate quota is set (broker-wide or on the listener), so with no quota the accept path
costs two dict updates. A quota set at runtime therefore starts from an empty window (Kafka's
may throttle at once if the last window already saw more connections than the new quota).

Host names in ``max.connections.per.ip.overrides`` are resolved as Kafka's ConnectionQuotas
resolves them (``InetAddress.getByName``, keyed by address), in a worker thread (Kafka blocks the
thread applying the config; here that would stall every connection). A host that does not
resolve:

* in the static config: the broker does not start (Kafka's ConnectionQuotas constructor throws
  UnknownHostException and the node shuts down; ``resolve_overrides`` raises UnknownHost, an
  OSError the CLI prints in one line);
* in a dynamic change: IncrementalAlterConfigs accepts and stores it (Kafka's validation,
  ``KafkaConfig.validateValues``, checks the characters only), and applying it fails: the error
  is logged and the previous overrides stay in force, whole (Kafka's
  ``updateMaxConnectionsPerIpOverride`` throws before replacing its map; DynamicBrokerConfig logs
  "Per-broker configs of N could not be applied"). The same at start for a stored dynamic value.
  Deviation: the same failure makes Kafka skip the rest of SocketServer.reconfigure
  (``max.connections``, ``max.connection.creation.rate`` changed in the same update) and the
  reconfigurables after it; kafkad applies those.

A new overrides value applies whole once every host in it is resolved (the old map meanwhile, as
while Kafka's config thread resolves); one of IP literals only applies at once.

Limits are re-read by ``configure`` (at start and after each dynamic config change) and a
change wakes the waiting accepts at once (Kafka's ``counts.notifyAll``). Times come from
``trio.current_time`` (a MockClock in tests).
"""

from __future__ import annotations

import ipaddress
import logging
import math
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import trio

from proxy.accept import accept_retrying
from proxy.connection_quota_config import (
    MAX_CONNECTION_CREATION_RATE,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_IP,
    MAX_CONNECTIONS_PER_IP_OVERRIDES,
    listener_limit,
    parse_overrides,
)
from proxy.quotas.model import CONNECTION_CREATION_RATE, IP, Quotas
from proxy.quotas.throttle import Rate, throttle_time_ms
from wire.values import INT_MAX

IP_SENSOR_EXPIRY_MS = 3600 * 1000  # Kafka's ConnectionQuotaEntity.sensorExpiration for an IP
IP_SENSORS_PRUNE_AT = 4096

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


def _ip_literal(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None


class UnknownHost(OSError):
    """A host of ``max.connections.per.ip.overrides`` that does not resolve (Kafka's
    UnknownHostException)."""

    def __init__(self, host: str, why: str) -> None:
        super().__init__(f"{MAX_CONNECTIONS_PER_IP_OVERRIDES}: unknown host {host}: {why}")
        self.host = host


def _resolve(host: str) -> str:
    """Kafka's ``InetAddress.getByName``: an IP literal as is, "" the loopback address, a host
    name's first address, IPv4 first (Java's default); UnknownHost if it has none. Blocking:
    called in a worker thread."""
    if (ip := _ip_literal(host)) is not None:
        return ip
    if not host:
        return "127.0.0.1"
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise UnknownHost(host, getattr(exc, "strerror", None) or str(exc)) from None
    infos.sort(key=lambda i: i[0] != socket.AF_INET)
    return normalise_ip(str(infos[0][4][0]))


def _resolve_all(parsed: Mapping[str, int]) -> dict[str, int]:
    """The overrides keyed by address (a later host resolving to the same address wins, as in
    Kafka's map); UnknownHost for the first that does not resolve. Blocking."""
    return {_resolve(host): n for host, n in parsed.items()}


async def resolve_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` (checked already: ``validate_values``), each host
    resolved in a worker thread; UnknownHost if one does not resolve. The server calls it on the
    static value before binding: Kafka does not start then."""
    parsed = parse_overrides(text)
    if all(_ip_literal(h) is not None for h in parsed):
        return _resolve_all(parsed)
    return await trio.to_thread.run_sync(_resolve_all, parsed, abandon_on_cancel=True)


class ConnectionThrottled(Exception):
    """The IP is above its ``connection_creation_rate`` quota: the connection is closed after
    ``throttle_ms`` (Kafka's acceptor keeps it in ``throttledSockets`` meanwhile)."""

    def __init__(self, ip: str, throttle_ms: int) -> None:
        super().__init__(f"{ip} throttled for {throttle_ms} ms")
        self.ip, self.throttle_ms = ip, throttle_ms


class _Limit:
    """One listener's (or the broker's) count, connection limit and creation-rate sensor, and
    its connections served and closed since it started (Kafka's socket-server-metrics
    connection-creation-total and connection-close-total: /metrics)."""

    __slots__ = (
        "closed",
        "count",
        "created",
        "max",
        "protected",
        "quota",
        "rate",
        "throttle_ms_total",
        "throttled",
    )

    def __init__(self, samples: int, window_ms: int) -> None:
        self.count = 0
        self.created = self.closed = 0
        self.max = INT_MAX
        self.protected = False  # the inter-broker listener, beside others
        self.quota = INT_MAX
        self.rate = Rate(samples, window_ms)
        self.throttle_ms_total = 0  # connection-accept-throttle-time's inputs
        self.throttled = 0


class ConnectionQuotas:
    def __init__(
        self,
        values: Mapping[str, Any],
        listeners: Iterable[str],
        overrides: tuple[str, Mapping[str, int]] | None = None,
        inter_broker: str | None = None,
    ) -> None:
        """``overrides``: a ``max.connections.per.ip.overrides`` text and its resolved map
        (``resolve_overrides``: the static one) in force until ``values``' own is resolved.
        ``inter_broker``: Kafka's inter-broker listener name (see the module docstring)."""
        self.values = values
        self.inter_broker = inter_broker
        samples, window_s = values["quota.window.num"], values["quota.window.size.seconds"]
        self.max_throttle_ms: int = window_s * 1000
        self.broker = _Limit(samples, window_s * 1000)
        self.listeners = {name: _Limit(samples, window_s * 1000) for name in listeners}
        self.per_ip: dict[str, int] = {}  # IP -> open connections
        self.per_ip_default = INT_MAX
        self.per_ip_overrides: dict[str, int] = dict(overrides[1]) if overrides else {}
        self._overrides_text: str | None = overrides[0] if overrides else None
        # the ip client-quota entities' connection_creation_rate (set_ip_rates)
        self.ip_rates: dict[str, int] = {}
        self.ip_rate_default = INT_MAX
        self._ip_sensors: dict[str, Rate] = {}
        self._prune_at = IP_SENSORS_PRUNE_AT
        self._samples, self._window_ms = samples, window_s * 1000
        self._changed = trio.Event()
        self._waiting = 0  # accepts waiting for a slot or out a throttle
        self._blocked = trio.Event()  # set (and replaced) when an accept starts waiting
        self._resolved = trio.Event()  # set once the overrides' host names are resolved
        self._resolved.set()
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
                self._overrides_text = text
                if all(_ip_literal(h) is not None for h in parsed):
                    self.per_ip_overrides = _resolve_all(parsed)  # no lookup: at once
                else:  # whole, once looked up off the event loop; the old map meanwhile
                    self._resolved = trio.Event()
                    trio.lowlevel.spawn_system_task(self._resolve_overrides, text, parsed)
        self.broker.max = v[MAX_CONNECTIONS]
        self.broker.quota = v[MAX_CONNECTION_CREATION_RATE]
        for name, limit in self.listeners.items():
            limit.max = listener_limit(v, name, MAX_CONNECTIONS)
            limit.quota = listener_limit(v, name, MAX_CONNECTION_CREATION_RATE)
        self._protect()
        self._notify()

    def _protect(self) -> None:
        """Kafka's protectedListener: the inter-broker listener, while there are others."""
        for name, limit in self.listeners.items():
            limit.protected = name == self.inter_broker and len(self.listeners) > 1

    def protected(self, listener: str) -> bool:
        """Whether ``listener``'s connections are outside the broker-wide limits."""
        limit = self.listeners.get(listener)
        return limit is not None and limit.protected

    def add_listener(self, name: str) -> None:
        """Kafka's ConnectionQuotas.addListener: a listener added at runtime gets its own count
        and limits (its ``listener.name.<l>.`` overrides, else the broker-wide ones)."""
        self.listeners[name] = _Limit(self._samples, self._window_ms)
        self.configure()

    def remove_listener(self, name: str) -> None:
        """Kafka's ConnectionQuotas.removeListener: its count and limits are dropped (its
        connections, closing, still leave the broker's and their IP's counts)."""
        self.listeners.pop(name, None)
        self._protect()
        self._notify()  # Kafka's counts.notifyAll: a waiting accept may now have room

    async def _resolve_overrides(self, text: str, parsed: Mapping[str, int]) -> None:
        """The overrides naming hosts, resolved in a worker thread (a slow resolver must not
        stall the broker) and applied whole; dropped if the config changed again meanwhile.
        A host that does not resolve: logged, the previous overrides stay (see the module
        docstring)."""
        done = self._resolved
        try:
            resolved = await trio.to_thread.run_sync(_resolve_all, parsed, abandon_on_cancel=True)
        except UnknownHost as exc:
            if text == self._overrides_text:
                name = MAX_CONNECTIONS_PER_IP_OVERRIDES
                log.error("%s=%s could not be applied: %s", name, text, exc)
            return
        else:
            if text == self._overrides_text:
                self.per_ip_overrides = resolved
        finally:
            done.set()

    async def until_resolved(self) -> None:
        """Returns once the overrides' host names are resolved (tests)."""
        await self._resolved.wait()

    def set_ip_rates(self, quotas: Quotas) -> None:
        """The client quotas' ``ip`` entities (Kafka's ``updateIpConnectionRateQuota``)."""
        rates, default = {}, INT_MAX
        for entity, values in quotas.items():
            if len(entity) != 1 or entity[0][0] != IP or CONNECTION_CREATION_RATE not in values:
                continue
            rate = int(values[CONNECTION_CREATION_RATE])
            if entity[0][1] is None:
                default = rate
            else:
                rates[normalise_ip(entity[0][1])] = rate
        self.ip_rates, self.ip_rate_default = rates, default

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
        recorded = await self._wait_for_slot(limit)
        if self.ip_rates or self.ip_rate_default < INT_MAX:
            self._record_ip(limit, ip, recorded)
        count = self.per_ip.get(ip, 0)
        self.per_ip[ip] = count + 1
        self.broker.count += 1
        limit.count += 1
        most = self.per_ip_overrides.get(ip, self.per_ip_default)
        if count >= most:
            self._uncount(listener, ip)
            raise TooManyConnections(ip, most)
        limit.created += 1  # Kafka counts a connection once a processor registers it

    def dec(self, listener: str, ip: str) -> None:
        """A connection ``inc`` counted has closed."""
        if (limit := self.listeners.get(listener)) is not None:
            limit.closed += 1
        self._uncount(listener, ip)

    def _uncount(self, listener: str, ip: str) -> None:
        count = self.per_ip[ip]
        if count == 1:
            del self.per_ip[ip]
        else:
            self.per_ip[ip] = count - 1
        self.broker.count -= 1
        if (limit := self.listeners.get(listener)) is not None:  # None: removed at runtime
            limit.count -= 1
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
        """Kafka's connectionSlotAvailable."""
        if limit.count >= limit.max:
            return False
        return limit.protected or self.broker.count < self.broker.max

    def _record_ip(self, limit: _Limit, ip: str, recorded: bool) -> None:
        """Kafka's recordIpConnectionMaybeThrottle: above the IP's quota the connection is
        taken back out of every rate it was recorded in, and ConnectionThrottled."""
        quota = self.ip_rates.get(ip, self.ip_rate_default)
        if quota >= INT_MAX:
            return
        now_ms = _now_ms()
        sensor = self._ip_sensors.get(ip)
        if sensor is None:
            if len(self._ip_sensors) >= self._prune_at:
                self._prune_ip_sensors(now_ms)
                self._prune_at = max(IP_SENSORS_PRUNE_AT, 2 * len(self._ip_sensors))
            sensor = self._ip_sensors[ip] = Rate(self._samples, self._window_ms)
        throttle_ms = self._throttle_ms(sensor, quota, now_ms)
        if throttle_ms > 0:
            sensor.record(-1.0, now_ms)
            if recorded:
                if not limit.protected:
                    self.broker.rate.record(-1.0, now_ms)
                limit.rate.record(-1.0, now_ms)
            raise ConnectionThrottled(ip, throttle_ms)

    def _prune_ip_sensors(self, now_ms: int) -> None:
        """Kafka expires an IP's sensor after an hour without a connection."""
        for ip, sensor in list(self._ip_sensors.items()):
            if all(now_ms - s.last_event_ms >= IP_SENSOR_EXPIRY_MS for s in sensor._samples):
                del self._ip_sensors[ip]

    async def _wait_for_slot(self, limit: _Limit) -> bool:
        """Waits out the creation-rate throttle and for a free slot; whether the connection
        was recorded in the broker's and the listener's rates."""
        if limit.quota >= INT_MAX and (limit.protected or self.broker.quota >= INT_MAX):
            # no rate quota: nothing recorded (the fast path; see the module docstring)
            if self._slot_available(limit):
                return False
            start_ms, throttle_ms, recorded = _now_ms(), 0, False
        else:
            start_ms, recorded = _now_ms(), True
            # the inter-broker listener's rate only (Kafka's recordConnectionAndGetThrottleTimeMs)
            throttle_ms = 0 if limit.protected else self._record(self.broker, start_ms)
            throttle_ms = max(throttle_ms, self._record(limit, start_ms))
            if throttle_ms > 0:
                limit.throttle_ms_total += throttle_ms
                limit.throttled += 1
            if throttle_ms <= 0 and self._slot_available(limit):
                return True
        end_ms = start_ms + throttle_ms
        self._waiting += 1
        self._blocked.set()
        self._blocked = trio.Event()
        try:
            while True:
                remaining_ms = end_ms - _now_ms()
                if remaining_ms <= 0 and self._slot_available(limit):
                    return recorded
                changed = self._changed
                with trio.move_on_after(remaining_ms / 1000 if remaining_ms > 0 else math.inf):
                    await changed.wait()
        finally:
            self._waiting -= 1

    def _record(self, limit: _Limit, now_ms: int) -> int:
        return self._throttle_ms(limit.rate, limit.quota, now_ms)

    def _throttle_ms(self, rate: Rate, quota: int, now_ms: int) -> int:
        """Kafka's recordAndGetThrottleTimeMs: record one connection; the throttle time if the
        rate is now above the quota."""
        rate.record(1.0, now_ms)
        if quota >= INT_MAX:
            return 0  # the rate cannot exceed Integer.MAX_VALUE per second
        if quota <= 0:  # Kafka: an infinite throttle time, bounded to one window
            return self.max_throttle_ms
        measured = rate.measure(now_ms)
        if measured <= quota:
            return 0
        # QuotaUtils.boundedThrottleTime
        return min(throttle_time_ms(rate, quota, measured, now_ms), self.max_throttle_ms)


def _now_ms() -> int:
    return int(trio.current_time() * 1000)


def peer_address(stream: trio.abc.Stream) -> tuple[str, str]:
    """The peer's IP, normalised (the connection quotas' key), and ``host:port`` as the logs
    show it; ("", "?") for a stream without a socket (e.g. an in-memory one)."""
    if isinstance(stream, trio.SocketStream):
        try:
            host, port = stream.socket.getpeername()[:2]
        except OSError:
            pass
        else:
            return normalise_ip(str(host)), f"{host}:{port}"
    return "", "?"


async def serve_listener(
    quotas: ConnectionQuotas,
    name: str,
    listener: trio.abc.Listener[trio.abc.Stream],
    handler: Callable[[trio.abc.Stream, str], Awaitable[None]],
    handler_nursery: trio.Nursery,
) -> None:
    """trio.serve_listeners' loop for one listening socket of listener ``name``, each accepted
    connection first passed through ``quotas.inc`` (which may delay it, as Kafka's acceptor
    waits) and counted until its handler returns. The handler is given the peer's
    ``host:port`` (looked up once per accept)."""

    async def run(stream: trio.abc.Stream, ip: str, peer: str) -> None:
        try:
            await handler(stream, peer)
        finally:
            quotas.dec(name, ip)
            await trio.aclose_forcefully(stream)

    async def close_later(stream: trio.abc.Stream, delay_ms: int) -> None:
        try:
            await trio.sleep(delay_ms / 1000)
        finally:
            await trio.aclose_forcefully(stream)

    async with listener, trio.open_nursery() as throttled:
        while True:
            stream = await accept_retrying(listener, log)
            ip, peer = peer_address(stream)
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
            except ConnectionThrottled as exc:
                log.debug("Delaying closing of connection from %s for %d ms", ip, exc.throttle_ms)
                throttled.start_soon(close_later, stream, exc.throttle_ms)
                continue
            except BaseException:  # cancelled while waiting for a slot: shutting down
                await trio.aclose_forcefully(stream)
                raise
            handler_nursery.start_soon(run, stream, ip, peer)
