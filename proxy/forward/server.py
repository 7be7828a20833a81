"""The forwarding proxy's listeners: one for bootstrap, then one per upstream broker.

Clients bootstrap at ``--listen``; each connection there goes to the first ``--upstream``
address that accepts it. Whenever a response hands out an upstream broker address (see
``proxy/forward/rewrite.py``), the proxy gives that endpoint a listener of its own, on the
listen host and the first free port after ``--listen``'s (a free port when ``--listen`` has
port 0 or that port is taken), before the response goes out, and hands out
``advertise-host:port`` in its place.

A listener is keyed by the upstream broker's node id and endpoint: host, port and the
upstream listener it belongs to (``family``). An upstream answers with the endpoints of the
listener it was asked on, and every connection through the proxy descends from one at
``--listen``, so a proxy fronts one upstream listener, the family ``bootstrap`` (a second
upstream listener takes a second proxy); the security protocol toward the upstream is one for
the whole proxy (``--upstream-tls``). Broker churn: a Metadata or DescribeCluster answer
lists every broker of its listener, so a broker of that family missing from it has left, and
its listener is released at once for new connections: the listening socket closes (a client
connecting there is refused and bootstraps again, as from a broker that went away), while
connections already open through it stay until either side closes them (the upstream broker
closes its own when it goes; cutting them from the proxy would turn a metadata hiccup into
failed requests). A released listener's port is remembered for its key (the last
``REMEMBERED_PORTS``): when the broker comes back, the same port is bound again if free, so a
client holding the old address finds it. Open listeners are at most the brokers of the last
answers: no port leak across restarts or changing node sets.

Partition faults (``partition broker=N for=MS ...``) are timed from the proxy's start: a timer
per rule cancels the open connections to broker N of matching clients when the window opens,
and while it is open a connection's next request closes it (``connection.py``).

TLS (``proxy/forward/security.py``): toward clients the accepted stream is wrapped (the
handshake under ``connect_timeout_s``), toward the upstream the opened one, before the pumps
start; a failed handshake closes that connection only. The transaction view
(``txn_view.py``) is fed by the writer task, which has each transactional request and its
answer in hand; ``--http`` serves it (``http.py``).
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import ssl
import sys
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import trio

from proxy.accept import accept_retrying
from proxy.fault_injection import FaultInjector, PartitionRule, injector_from_config
from proxy.forward.connection import Live, forward_connection
from proxy.forward.record import Recorder
from proxy.forward.rewrite import Endpoint, EndpointKey
from proxy.forward.txn_view import TxnObserver
from proxy.tls import HandshakeFailed, TlsSettings, accept_tls
from proxy.tls_stream import TlsStream

log = logging.getLogger("kafkad.proxy")

REWRITE_CACHE = 256  # rewritten response bodies kept
REMEMBERED_PORTS = 1024  # ports of released listeners kept for their broker's return
BOOTSTRAP = "bootstrap"  # the family of connections through --listen


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    upstreams: tuple[tuple[str, int], ...]
    listen_host: str = "127.0.0.1"
    listen_port: int = 9092
    advertise_host: str = ""  # "" means listen_host
    fault_injection: str = ""  # a kafkad.fault.injection spec
    record_dir: Path | None = None
    connect_timeout_s: float = 10.0
    upstream_timeout_s: float = 300.0
    max_frame_bytes: int = 100 * 1024 * 1024
    client_tls: TlsSettings | None = None  # TLS toward clients (proxy/forward/security.py)
    upstream_tls: ssl.SSLContext | None = None  # TLS toward the upstream
    http: tuple[str, int] | None = None  # the observed transaction view (proxy/forward/http.py)

    @property
    def advertised(self) -> str:
        return self.advertise_host or self.listen_host


@dataclass(frozen=True, slots=True)
class ListenerKey:
    """What a broker listener stands for: an upstream broker's endpoint."""

    family: str  # the upstream listener it was learnt through (BOOTSTRAP or a listener's)
    node_id: int | None
    host: str
    port: int

    @property
    def upstream(self) -> tuple[str, int]:
        return self.host, self.port


@dataclass(slots=True)
class BrokerListener:
    key: ListenerKey
    kind: str  # "brokers" or "controllers" (rewrite.complete_set)
    local: tuple[str, int]  # the address handed out
    scope: trio.CancelScope  # cancelling it closes the listening socket only


class ForwardProxy:
    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.faults: FaultInjector | None = injector_from_config(config.fault_injection)
        self.bound: tuple[str, int] | None = None
        self.listeners: dict[ListenerKey, BrokerListener] = {}  # open ones
        self.released: dict[ListenerKey, int] = {}  # released listeners' ports, oldest first
        self.nodes: dict[tuple[str, int], int] = {}  # upstream address -> node id
        self.live: set[Live] = set()
        self.txns = TxnObserver()  # the transaction view (proxy/forward/txn_view.py)
        # (api key, version, upstream body) -> rewritten body, None for "as is" (connection.py)
        self.rewritten: dict[tuple[int, int, bytes], bytes | None] = {}
        self._lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self._started = 0.0
        self.http_url = ""
        self._seq = 0
        if config.record_dir is not None:
            config.record_dir.mkdir(parents=True, exist_ok=True)

    # -- what connections ask -----------------------------------------------------------

    def describe(self, upstream: tuple[str, int]) -> str:
        node = self.nodes.get(upstream)
        where = f"{upstream[0]}:{upstream[1]}"
        return where if node is None else f"broker {node} ({where})"

    @property
    def local(self) -> dict[tuple[str, int], tuple[str, int]]:
        """Upstream address -> the address handed out for it, of the open listeners."""
        return {b.key.upstream: b.local for b in self.listeners.values()}

    def remember_rewrite(self, key: tuple[int, int, bytes], body: bytes | None) -> None:
        if len(self.rewritten) >= REWRITE_CACHE:  # answers change rarely; start over
            self.rewritten.clear()
        self.rewritten[key] = body

    def elapsed_ms(self) -> float:
        return (trio.current_time() - self._started) * 1000

    def partitioned(self, live: Live) -> bool:
        if self.faults is None or not self.faults.spec.partitions:
            return False
        node = self.nodes.get(live.upstream)
        return self.faults.partitioned(node, live.client_id, self.elapsed_ms())

    async def local_addresses(
        self, endpoints: Iterable[Endpoint], family: str = BOOTSTRAP, complete: str | None = None
    ) -> dict[EndpointKey, tuple[str, int]]:
        """The address handed out for each upstream endpoint (by node id, host, port),
        opening listeners as needed. ``complete`` ("brokers", "controllers"): the endpoints
        are all of that kind in ``family``, and that kind's listeners of the family not among
        them are released."""
        out = {}
        async with self._lock:
            seen = set()
            for e in endpoints:
                if e.node_id is not None:
                    self.nodes[(e.host, e.port)] = e.node_id
                found = self._listener(e)
                if found is None:
                    key = ListenerKey(family, e.node_id, e.host, e.port)
                    found = self.listeners[key] = await self._listen_for(key, complete)
                    # a cached answer without this broker, served again, must release it
                    self.rewritten.clear()
                seen.add(found.key)
                out[(e.node_id, e.host, e.port)] = found.local
            if complete and seen:
                for key, b in list(self.listeners.items()):
                    if key.family == family and b.kind == complete and key not in seen:
                        self._release(b)
        return out

    def _listener(self, e: Endpoint) -> BrokerListener | None:
        """The open listener for ``e`` (learnt through any family)."""
        for key, b in self.listeners.items():
            if (key.node_id, key.host, key.port) == (e.node_id, e.host, e.port):
                return b
        return None

    def _release(self, b: BrokerListener) -> None:
        """Stop accepting for a broker that left; its open connections carry on."""
        del self.listeners[b.key]
        b.scope.cancel()
        self.released.pop(b.key, None)
        self.released[b.key] = b.local[1]
        while len(self.released) > REMEMBERED_PORTS:
            del self.released[next(iter(self.released))]
        self.rewritten.clear()  # cached answers may hand out the released port
        log.info("proxy: %s left, %s:%d released", self.describe(b.key.upstream), *b.local)

    def _next_port(self, key: ListenerKey) -> int:
        """The port to try first for ``key``: its own from before, or the first after
        ``--listen``'s that no listener holds or keeps for its broker (0: any)."""
        cfg = self.config
        if key in self.released:
            return self.released.pop(key)
        if not cfg.listen_port:
            return 0
        taken = {b.local[1] for b in self.listeners.values()} | set(self.released.values())
        port = cfg.listen_port + 1
        while port in taken:
            port += 1
        return port if port < 65536 else 0

    async def _listen_for(self, key: ListenerKey, kind: str | None) -> BrokerListener:
        assert self._nursery is not None
        cfg = self.config
        try:
            listeners = await trio.open_tcp_listeners(self._next_port(key), host=cfg.listen_host)
        except OSError:
            listeners = await trio.open_tcp_listeners(0, host=cfg.listen_host)
        bound = int(listeners[0].socket.getsockname()[1])
        handler = functools.partial(self._serve, targets=(key.upstream,), family=key.family)
        scope = await self._nursery.start(self._accept, listeners, handler)
        log.info("proxy: %s -> %s:%d", self.describe(key.upstream), cfg.advertised, bound)
        return BrokerListener(key, kind or "brokers", (cfg.advertised, bound), scope)

    async def _accept(
        self,
        listeners: list[trio.SocketListener],
        handler: Callable[[trio.SocketStream], Awaitable[None]],
        *,
        task_status: trio.TaskStatus[trio.CancelScope],
    ) -> None:
        """Accept on ``listeners`` until the returned scope is cancelled; connections run in
        the proxy's nursery, so they outlive the listener."""
        assert self._nursery is not None
        with trio.CancelScope() as scope:
            task_status.started(scope)
            async with trio.open_nursery() as accepting:
                for listener in listeners:
                    accepting.start_soon(self._accept_one, listener, handler)
        for listener in listeners:
            await trio.aclose_forcefully(listener)

    async def _accept_one(
        self,
        listener: trio.SocketListener,
        handler: Callable[[trio.SocketStream], Awaitable[None]],
    ) -> None:
        assert self._nursery is not None
        async with listener:
            while True:
                stream = await accept_retrying(listener, log)
                self._nursery.start_soon(_run_handler, handler, stream)

    # -- running ------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[tuple[str, int]]) -> None:
        cfg = self.config
        self._started = trio.current_time()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            listeners = await trio.open_tcp_listeners(cfg.listen_port, host=cfg.listen_host)
            host, port = listeners[0].socket.getsockname()[:2]
            self.bound = (str(host), int(port))
            handler = functools.partial(self._serve, targets=cfg.upstreams, family=BOOTSTRAP)
            nursery.start_soon(trio.serve_listeners, handler, listeners)
            for rule in self.faults.spec.partitions if self.faults else ():
                nursery.start_soon(self._partition_timer, rule)
            if cfg.http is not None:
                from proxy.forward.http import serve_http

                self.http_url = await nursery.start(serve_http, *cfg.http, self.txns)
            task_status.started(self.bound)

    async def _partition_timer(self, rule: PartitionRule) -> None:
        await trio.sleep_until(self._started + rule.after_ms / 1000)
        for live in list(self.live):
            if self.partitioned(live) and self.nodes.get(live.upstream) == rule.broker:
                live.scope.cancel()

    async def _serve(
        self, raw: trio.SocketStream, targets: tuple[tuple[str, int], ...], family: str
    ) -> None:
        peer, here = _names(raw)
        client: trio.abc.Stream = raw
        if self.config.client_tls is not None:
            try:
                client, _principal = await accept_tls(
                    raw, self.config.client_tls, self.config.connect_timeout_s
                )
            except HandshakeFailed as exc:
                log.info("proxy connection %s: %s", peer, exc)
                await trio.aclose_forcefully(raw)
                return
        upstream, address = await self._connect(targets)
        if upstream is None or address is None:
            log.info("proxy: no upstream of %s accepted a connection", targets)
            await trio.aclose_forcefully(client)
            return
        recorder = self._recorder(peer, here, address)
        with trio.CancelScope() as scope:
            live = Live(address, scope, family=family)
            self.live.add(live)
            try:
                await forward_connection(self, client, upstream, live, recorder, peer)
            finally:
                self.live.discard(live)
        if scope.cancelled_caught:  # a partition: make sure both sides see a close
            await trio.aclose_forcefully(client)
            await trio.aclose_forcefully(upstream)

    async def _connect(
        self, targets: tuple[tuple[str, int], ...]
    ) -> tuple[trio.abc.Stream | None, tuple[str, int] | None]:
        tls = self.config.upstream_tls
        for host, port in targets:
            with trio.move_on_after(self.config.connect_timeout_s):
                try:
                    stream = await trio.open_tcp_stream(host, port)
                except (OSError, ValueError) as exc:  # ValueError: a host IDNA cannot encode
                    log.info("proxy: upstream %s:%d refused: %s", host, port, exc)
                    continue
                if tls is None:
                    return stream, (host, port)
                wrapped = TlsStream(stream, tls, server_side=False, server_hostname=host)
                try:
                    await wrapped.do_handshake()
                    return wrapped, (host, port)
                except trio.BrokenResourceError as exc:
                    log.warning("proxy: TLS to upstream %s:%d failed: %s", host, port, exc)
                    await trio.aclose_forcefully(stream)
        return None, None

    def _recorder(self, peer: str, here: str, upstream: tuple[str, int]) -> Recorder | None:
        if self.config.record_dir is None:
            return None
        self._seq += 1
        path = self.config.record_dir / f"{os.getpid()}-{self._seq:06d}.kdrec"
        meta = {
            "client": peer,
            "listener": here,
            "upstream": f"{upstream[0]}:{upstream[1]}",
            "node_id": self.nodes.get(upstream),
        }
        try:
            return Recorder(path, meta)
        except OSError as exc:
            log.error("proxy: cannot record to %s: %s", path, exc)
            return None


async def _run_handler(
    handler: Callable[[trio.SocketStream], Awaitable[None]], stream: trio.SocketStream
) -> None:
    """As trio.serve_listeners runs a connection: the stream is closed however it ends."""
    try:
        await handler(stream)
    finally:
        await trio.aclose_forcefully(stream)


def _names(client: trio.SocketStream) -> tuple[str, str]:
    """The client's address and the listener's, as ``host:port``."""
    try:
        peer = "{}:{}".format(*client.socket.getpeername()[:2])
        here = "{}:{}".format(*client.socket.getsockname()[:2])
    except OSError:
        return "?", "?"
    return peer, here


def raise_open_files() -> int:
    """Raise the soft limit of open files to the hard one: every client connection costs the
    proxy two descriptors (the client's and its upstream's). Returns the limit now."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == resource.RLIM_INFINITY or soft < hard:
        want = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (ValueError, OSError) as exc:
            log.warning("proxy: cannot raise the open files limit from %d: %s", soft, exc)
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


async def serve_until_signal(config: ProxyConfig) -> None:
    limit = raise_open_files()
    log.info("proxy: up to %d open files (two per client connection)", limit)
    proxy = ForwardProxy(config)
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(proxy.run)
        ups = ",".join(f"{h}:{p}" for h, p in config.upstreams)
        http = f" http={proxy.http_url}" if proxy.http_url else ""
        print(f"kafkad proxy ready listen={host}:{port} upstream={ups}{http}", flush=True)
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                log.info("received %s", signal.Signals(signum).name)
                break
        nursery.cancel_scope.cancel()
    sys.stdout.flush()
