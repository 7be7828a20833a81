"""The network front: listeners, connection tasks, background tasks, graceful shutdown.

Every client listener (``BrokerConfig.endpoints()``) is bound before the broker reports ready;
each accepted connection carries its listener's name, so answers advertise that listener's
address. ``bound`` is the first listener's address, ``bound_listeners`` every one's. A caller
may hand the server its listeners instead (``Server(config, listeners={name: [...]})``, e.g.
in-memory ones under trio's autojump clock in tests): then nothing is bound, and each name
must be one of ``BrokerConfig.endpoints()`` (its configured port is what it advertises).

Listeners change at runtime (proxy/dynamic_listeners.py: ``listeners`` & co. per broker, and the
ones stored before a restart are bound at start): an added listener is bound and accepting
before the AlterConfigs answer; a removed one stops accepting, its sockets are closed at once
and its open connections cancelled (Kafka's SocketServer.removeListeners).

Shutdown (SIGINT/SIGTERM, or ``Server.stop()``): stop accepting; idle connections are closed
at once, busy ones finish the requests they already read and then close; after
``shutdown.grace.ms`` whatever is left is cancelled. Then the broker snapshots producer state
(``Broker.close``) and the store flushes and closes every segment (``open_store``'s exit).
"""

from __future__ import annotations

import itertools
import logging
import math
import signal
import sys
from collections.abc import Callable, Mapping, Sequence

import trio

from proxy.broker import Broker
from proxy.config import BrokerConfig
from proxy.connection import Connection, NetConfig, serve_connection
from proxy.connection_quota_config import MAX_CONNECTIONS_PER_IP_OVERRIDES
from proxy.connection_quotas import ConnectionQuotas, resolve_overrides, serve_listener
from proxy.dispatch import Dispatcher
from proxy.dynamic_listeners import DynamicListeners, bind
from proxy.dynamic_tls import ListenerTls, existing_listener_refusal
from proxy.http.settings import parse_http_listeners
from proxy.listen_sockets import needs_lookup
from proxy.listeners import Listener
from proxy.sasl.session import SaslSession
from proxy.sasl.settings import SASL_PROTOCOLS, SaslSettings, listener_sasl
from proxy.tls import TLS_PROTOCOLS, TlsSettings
from storage.backends import open_store

log = logging.getLogger("kafkad.server")


StreamListener = trio.abc.Listener[trio.abc.Stream]


class Server:
    def __init__(
        self,
        config: BrokerConfig,
        listeners: Mapping[str, Sequence[StreamListener]] | None = None,
    ) -> None:
        self.config = config
        self.given_listeners = listeners
        self.stopping = trio.Event()
        self.connections: set[Connection] = set()
        self.bound: tuple[str, int] | None = None
        self.bound_listeners: dict[str, tuple[str, int]] = {}
        self.sockets: dict[str, list[StreamListener]] = {}  # each listener's, while it serves
        self.broker: Broker | None = None
        self.console_urls: list[str] = []  # the web console's, if it runs (proxy/http/)
        self.connection_quotas: ConnectionQuotas | None = None

    def stop(self) -> None:
        self.stopping.set()

    async def run(
        self,
        *,
        task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
        on_ready: Callable[[Server], None] | None = None,
    ) -> None:
        cfg = self.config
        async with open_store(cfg.data_dir) as store:
            broker = Broker(cfg, store)
            await broker.start()
            self.broker = broker
            dyn = DynamicListeners(broker.dynamic, cfg.endpoints())
            endpoints = dyn.endpoints  # with those added at runtime before a restart
            broker.listeners_now(endpoints, {})
            values = dyn.values_with(broker.dynamic.layer(broker.dynamic.node))
            listener_tls = ListenerTls(broker.dynamic, endpoints, values)
            tls = listener_tls.settings  # kept current

            def existing(layer: Mapping[str, str]) -> str | None:
                # Kafka checks the listeners both before and after the change
                try:
                    after = {e.name for e in dyn.new_endpoints(layer)}
                except ValueError:
                    return None  # refused by DynamicListeners.validate
                names = frozenset(e.name.lower() for e in dyn.endpoints if e.name in after)
                return existing_listener_refusal(broker.dynamic, names, layer)

            broker.dynamic.validators.append(existing)
            sasl = {
                e.name: listener_sasl(values, e.name)
                for e in endpoints
                if e.protocol in SASL_PROTOCOLS
            }
            # Kafka's ConnectionQuotas resolves the static overrides' hosts as the socket
            # server is made: one that does not resolve stops the start (UnknownHost)
            static_overrides = str(broker.dynamic.static[MAX_CONNECTIONS_PER_IP_OVERRIDES])
            resolved = await resolve_overrides(static_overrides)
            sockets = self.sockets = await self._listeners(broker, endpoints)
            # Kafka starts only with the inter-broker listener among its static listeners;
            # kafkad without it has none (one added at runtime under its name is ordinary)
            inter_broker: str | None = cfg.inter_broker_listener
            if inter_broker not in {e.name for e in cfg.endpoints()}:
                inter_broker = None
            self.bound = next(iter(self.bound_listeners.values()))
            dispatch = Dispatcher(broker)
            # max.connections & co. (proxy/connection_quotas.py), following dynamic changes
            quotas = ConnectionQuotas(
                cfg.values or {},
                sockets,
                overrides=(static_overrides, resolved),
                inter_broker=inter_broker,
            )
            self.connection_quotas = broker.connection_quotas = quotas
            broker.dynamic.listeners.append(quotas.configure)
            broker.dynamic.listeners.append(self._close_excess)
            quotas.set_ip_rates(broker.quotas.quotas)  # and the ip entities' creation rates
            broker.quotas.listeners.append(quotas.set_ip_rates)
            idle_ms = cfg.get("connections.max.idle.ms")
            net = NetConfig(
                max_frame_bytes=cfg.get("socket.request.max.bytes"),
                idle_s=idle_ms / 1000 if idle_ms >= 0 else math.inf,  # Kafka: < 0 never expires
            )
            async with trio.open_nursery() as background:
                background.start_soon(broker.retention_loop)
                if cfg.get("log.cleaner.enable"):
                    background.start_soon(broker.cleaner_loop)
                background.start_soon(broker.groups.run)
                background.start_soon(broker.txns.run)
                background.start_soon(broker.producer_expiration_loop)
                background.start_soon(broker.token_expiry_loop)
                if parse_http_listeners(cfg.get("kafkad.http.listeners")):
                    from proxy.http.server import run_console  # hypercorn only when asked for

                    self.console_urls = await background.start(run_console, broker, cfg)
                async with trio.open_nursery() as conns:
                    # One scope per listener, made before any accept task starts (a scope
                    # cancelled before it is entered cancels at once).
                    accept_scopes = {name: trio.CancelScope() for name in sockets}

                    async def accept_loop(name: str, bound: list[StreamListener]) -> None:
                        async def handle(stream: trio.abc.Stream, peer: str) -> None:
                            await self._serve(
                                stream, peer, dispatch, net, name, tls.get(name), sasl.get(name)
                            )

                        with accept_scopes[name]:
                            async with trio.open_nursery() as each:
                                for listener in bound:
                                    each.start_soon(
                                        serve_listener, quotas, name, listener, handle, conns
                                    )

                    for name, bound in sockets.items():
                        conns.start_soon(accept_loop, name, bound)

                    def listeners_changed(
                        added: tuple[Listener, ...], removed: tuple[Listener, ...]
                    ) -> None:
                        # Kafka's SocketServer.removeListeners/addListeners
                        for e in removed:
                            # cancelled, then closed at once: refused before the answer is sent
                            accept_scopes.pop(e.name).cancel()
                            quotas.remove_listener(e.name)
                            for lst in sockets.pop(e.name, []):
                                if isinstance(lst, trio.SocketListener):
                                    lst.socket.close()
                            self.bound_listeners.pop(e.name, None)
                            listener_tls.remove(e.name)
                            sasl.pop(e.name, None)
                            for conn in list(self.connections):
                                if conn.listener == e.name:
                                    conn.scope.cancel()
                            log.info("listener %s removed: its connections closed", e.name)
                        values = dyn.values_with(broker.dynamic.layer(broker.dynamic.node))
                        for e in added:
                            try:
                                if e.protocol in TLS_PROTOCOLS:
                                    listener_tls.add(e, values)
                                if e.protocol in SASL_PROTOCOLS:
                                    sasl[e.name] = listener_sasl(values, e.name)
                                socks = bind(e, cfg.get("socket.listen.backlog.size"))
                            except (OSError, ValueError) as exc:
                                log.error("listener %s not served: %s", e.name, exc)
                                continue
                            bound: list[StreamListener] = [
                                trio.SocketListener(trio.socket.from_stdlib_socket(x))
                                for x in socks
                            ]
                            port = socks[0].getsockname()[1]
                            self.bound_listeners[e.name] = (socks[0].getsockname()[0], port)
                            quotas.add_listener(e.name)
                            accept_scopes[e.name] = trio.CancelScope()
                            sockets[e.name] = list(bound)
                            conns.start_soon(accept_loop, e.name, bound)
                            log.info("listener %s added: %s", e.name, e.url())
                        ports = {n: p for n, (_, p) in self.bound_listeners.items()}
                        broker.listeners_now(dyn.endpoints, ports)
                        if self.bound_listeners:
                            self.bound = next(iter(self.bound_listeners.values()))

                    dyn.on_change.append(listeners_changed)
                    task_status.started(self.bound)
                    if on_ready is not None:
                        on_ready(self)
                    await self.stopping.wait()
                    log.info("shutting down: no new connections")
                    for scope in accept_scopes.values():
                        scope.cancel()
                    broker.begin_shutdown()
                    for conn in list(self.connections):
                        if not conn.busy:
                            conn.scope.cancel()
                    conns.cancel_scope.deadline = (
                        trio.current_time() + cfg.get("shutdown.grace.ms") / 1000
                    )
                background.cancel_scope.cancel()
            with trio.CancelScope(shield=True):
                await broker.close()
        log.info("stopped: segments flushed and closed")

    def _close_excess(self) -> None:
        """Kafka's Processor.closeExcessConnections: while more connections are open than the
        broker-wide ``max.connections`` (lowered at runtime, or passed by the inter-broker
        listener's, which it does not hold: checked as each connection starts, as Kafka checks
        on every poll), every listener's network threads
        each close their least recently active connection (``Selector.lowestPriorityChannel``),
        one per poll. So the closing is spread over the listeners, not the least active of the
        broker's: here round by round, in each round each listener's least recently active
        (the round's own order: least recently active first), all at once. A connection
        serving a request is its listener's last candidate (its ``idle_at`` is unset).
        The inter-broker listener beside others (Kafka's protected listener,
        proxy/connection_quotas.py) closes none of its connections; they still count.
        A listener's own ``listener.name.<l>.max.connections`` closes nothing when lowered
        (Kafka's ``maxConnectionsExceeded`` reads the broker-wide count only): it holds new
        connections until the listener is under it again."""
        assert self.connection_quotas is not None
        quotas = self.connection_quotas
        open_ = [c for c in self.connections if not c.scope.cancel_called]
        excess = len(open_) - quotas.broker.max
        if excess <= 0:
            return
        lru: dict[str, list[Connection]] = {}
        candidates = [c for c in open_ if not quotas.protected(c.listener)]
        for conn in sorted(candidates, key=lambda c: c.idle_at):
            lru.setdefault(conn.listener, []).append(conn)
        order: list[Connection] = []
        for turn in itertools.zip_longest(*lru.values()):
            order += sorted((c for c in turn if c is not None), key=lambda c: c.idle_at)
        for conn in order[:excess]:
            log.info("closing %s: more than max.connections are open", conn.peer)
            conn.scope.cancel()

    async def _listeners(
        self, broker: Broker, endpoints: tuple[Listener, ...]
    ) -> dict[str, list[StreamListener]]:
        """Every client listener, bound (or as given), in ``endpoints`` order; records each
        one's address in ``bound_listeners`` and tells the broker its port."""
        if self.given_listeners is not None:
            names = {e.name for e in endpoints}
            unknown = sorted(set(self.given_listeners) - names)
            if unknown:
                raise ValueError(f"listeners {unknown} are not configured (have {sorted(names)})")
            given: dict[str, list[StreamListener]] = {}
            for endpoint in endpoints:
                if endpoint.name in self.given_listeners:
                    given[endpoint.name] = list(self.given_listeners[endpoint.name])
                    self.bound_listeners[endpoint.name] = (endpoint.host, endpoint.port)
                    broker.bound(endpoint.name, endpoint.port)
            return given
        backlog = self.config.get("socket.listen.backlog.size")
        sockets: dict[str, list[StreamListener]] = {}
        for endpoint in endpoints:
            try:
                if needs_lookup(endpoint.host):  # off the event loop, as trio's getaddrinfo
                    socks = await trio.to_thread.run_sync(bind, endpoint, backlog)
                else:
                    socks = bind(endpoint, backlog)
            except OSError as exc:  # name the listener that failed (cli: one line)
                for opened in sockets.values():
                    for listener in opened:
                        await trio.aclose_forcefully(listener)
                where = f"{endpoint.host}:{endpoint.port}"
                raise OSError(exc.errno, exc.strerror, where) from exc
            bound = [trio.SocketListener(trio.socket.from_stdlib_socket(x)) for x in socks]
            sockets[endpoint.name] = list(bound)
            sockname = socks[0].getsockname()
            self.bound_listeners[endpoint.name] = (sockname[0], sockname[1])
            broker.bound(endpoint.name, sockname[1])
        return sockets

    async def _serve(
        self,
        stream: trio.abc.Stream,
        peer: str,
        dispatch: Dispatcher,
        net: NetConfig,
        listener: str = "",
        tls: TlsSettings | None = None,
        sasl: SaslSettings | None = None,
    ) -> None:
        """``peer``: its ``host:port`` ("?" if unknown), as ``serve_listener`` looked it up."""
        conn = Connection(stream, peer, listener)
        if sasl is not None:
            assert self.broker is not None
            conn.sasl = SaslSession(
                sasl, self.broker.scram.lookup, token_lookup=self.broker.tokens.scram_lookup
            )
        self.connections.add(conn)
        quotas = self.connection_quotas
        if quotas is not None and quotas.total > quotas.broker.max:
            # Kafka checks on every poll, not only when the limit is lowered: an inter-broker
            # connection taken past max.connections closes another listener's (KIP-402)
            self._close_excess()
        try:
            await serve_connection(conn, dispatch, net, self.stopping, tls)
        finally:
            self.connections.discard(conn)


async def serve_until_signal(config: BrokerConfig) -> None:
    server = Server(config)

    def ready(s: Server) -> None:
        assert s.bound is not None and s.broker is not None
        host, port = s.bound
        b = s.broker
        adv_host, adv_port = b.advertised_address(b.first_listener)
        # listen=/advertise= name the first listener (scripts parse them); with several,
        # listeners= lists every one as NAME://bound->advertised.
        every = ",".join(
            f"{name}://{h}:{p}->{':'.join(map(str, b.advertised_address(name)))}"
            for name, (h, p) in s.bound_listeners.items()
        )
        several = f" listeners={every}" if len(s.bound_listeners) > 1 else ""
        print(
            f"kafkad ready listen={host}:{port} advertise={adv_host}:{adv_port}{several} "
            f"data_dir={config.data_dir}",
            flush=True,
        )

    async with trio.open_nursery() as nursery:

        async def watch_signals() -> None:
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    log.info("received %s", signal.Signals(signum).name)
                    server.stop()
                    return

        nursery.start_soon(watch_signals)
        await server.run(on_ready=ready)
        nursery.cancel_scope.cancel()
    sys.stdout.flush()
