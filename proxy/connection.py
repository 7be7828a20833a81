"""One task per client connection.

Kafka serves a connection's requests one at a time and answers each, in request order, as
soon as it is done; clients pipeline several requests. We decode every complete frame already
received, handle them in order, and write their responses together with one ``send_all``
(perf-notes rule 2), inside a shielded scope with a deadline so a cancellation never leaves
half a frame on the wire. Before a request that may park (a long-poll Fetch, JoinGroup, ...:
``Dispatcher.may_park``) the replies gathered so far are sent first, so a Metadata or a
Heartbeat pipelined just before a long poll is answered at once, not after the poll.

On a TLS listener the connection's task first does the handshake (``proxy/tls.py``), which
also sets the connection's principal; a failed handshake closes this connection only. On a
SASL listener each request first goes through the connection's SASL state
(``proxy/sasl/session.py``): before authentication only ApiVersions, SaslHandshake and
SaslAuthenticate pass, anything else fails the session (answered with its API's
ILLEGAL_SASL_STATE error reply once SaslAuthenticate is expected); a failed exchange is
answered and the connection closed after ``connection.failed.authentication.delay.ms``. Until
the client is authenticated (and while it re-authenticates) a frame may be at most
``sasl.server.max.receive.size`` bytes (Kafka's SaslServerAuthenticator reads them so): a
larger one fails the authentication unanswered, closed after the same delay.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import trio
from kio.schema.errors import ErrorCode

from proxy.conn_io import WriteTimedOut, connection_io
from proxy.dispatch import Dispatcher, StatsEntry
from proxy.outcomes import CloseConnection
from proxy.principal import ANONYMOUS, KafkaPrincipal
from proxy.sasl.session import Close, Refuse, Reply, SaslSession
from proxy.tls import HandshakeFailed, TlsSettings, accept_tls
from wire.errors import FramingError, ProtocolError
from wire.framing import FrameDecoder, Want

log = logging.getLogger("kafkad.connection")


@dataclass
class NetConfig:
    max_frame_bytes: int = 104857600  # socket.request.max.bytes
    idle_s: float = 600.0  # connections.max.idle.ms
    write_s: float = 30.0


class Connection:
    """A connection the server can stop between requests at shutdown."""

    def __init__(self, stream: trio.abc.Stream, peer: str, listener: str = "") -> None:
        self.stream = stream
        self.peer = peer
        self.listener = listener  # the listener's name: answers advertise its address
        # Who the client is (proxy/principal.py): its certificate's mapped DN on an SSL
        # listener with client auth, else ANONYMOUS; a SASL layer sets it after authenticating.
        self.principal: KafkaPrincipal = ANONYMOUS
        # On a SASL listener: the authentication state (proxy/sasl/session.py), which admits
        # each request before it is dispatched and sets the principal once authenticated.
        self.sasl: SaslSession | None = None
        self.busy = False
        self.scope = trio.CancelScope()
        # When connections.max.idle.ms closes it (trio clock): set as each read starts to wait,
        # inf while a request is served. The run's IdleReaper enforces it.
        self.idle_at = math.inf


class IdleReaper:
    """connections.max.idle.ms for every connection of a trio run, from one task.

    Setting the connection scope's deadline around each read cost two trips through trio's
    deadline bookkeeping per request (~4 us, 5.6% of a Produce round trip at acks=all). A read
    now appends the connection to its timeout's queue (``queue``: connection -> ``idle_at``)
    and takes it out when the bytes come, so each queue is in ``idle_at`` order (one timeout,
    a monotonic clock): Kafka's IdleExpiryManager, an access-ordered LinkedHashMap. This task
    sleeps until the earliest head of the queues, cancels the scopes of the connections whose
    time has come and sleeps again: each wake-up looks at the due connections and at one more
    per queue, never at every connection (many connections whose reads come almost
    ``connections.max.idle.ms`` apart would otherwise make it a walk over all of them per
    read). It is exact, as a deadline would be. A read whose ``idle_at`` is before the task's
    wake-up (the first idle connection, or a shorter timeout's queue) moves the wake-up.
    """

    def __init__(self) -> None:
        self.queues: dict[float, OrderedDict[Connection, float]] = {}
        self.wake_at = -math.inf  # the task's first scan sees every idle_at set before it runs
        self._sleep = trio.CancelScope()

    def queue(self, idle_s: float) -> OrderedDict[Connection, float]:
        """The queue of the connections waiting under ``idle_s``: a read adds its connection
        (absent: so at the end) with its ``idle_at`` and pops it when it ends."""
        found = self.queues.get(idle_s)
        if found is None:
            found = self.queues[idle_s] = OrderedDict()
        return found

    def waiting(self, at: float) -> None:
        """A connection's ``idle_at`` was set to ``at``: wake up by then."""
        if at < self.wake_at:
            self.wake_at = at
            self._sleep.deadline = at

    async def run(self) -> None:
        while True:
            now = trio.current_time()
            wake_at = math.inf
            for queue in self.queues.values():
                while queue:
                    conn, at = next(iter(queue.items()))
                    if at > now:
                        wake_at = min(wake_at, at)
                        break
                    del queue[conn]
                    conn.idle_at = math.inf
                    conn.scope.cancel()
            # (nothing is awaited between the scan and the new deadline: no read is missed)
            self._sleep = trio.CancelScope(deadline=wake_at)
            self.wake_at = wake_at
            with self._sleep:
                await trio.sleep_forever()


_REAPER: trio.lowlevel.RunVar[IdleReaper] = trio.lowlevel.RunVar("kafkad_idle_reaper")


def idle_reaper() -> IdleReaper:
    """This trio run's reaper, started (as a system task) on first use."""
    try:
        return _REAPER.get()
    except LookupError:
        reaper = IdleReaper()
        _REAPER.set(reaper)
        trio.lowlevel.spawn_system_task(reaper.run, name="kafkad idle reaper")
        return reaper


async def _after_sasl(conn: Connection, send_ready: Callable[[], Awaitable[None]]) -> None:
    """After a request on a SASL listener: take the principal once authenticated; after a
    failed exchange, send the answer, wait ``connection.failed.authentication.delay.ms``
    (Kafka's delayed close, which slows down password guessing) and close."""
    session = conn.sasl
    assert session is not None
    if session.principal is not None:
        conn.principal = session.principal
    if session.failed:
        await send_ready()
        await trio.sleep(session.settings.failed_delay_ms / 1000)
        log.info(
            "closing connection peer=%s listener=%s: SASL authentication failed: %s",
            conn.peer,
            conn.listener,
            session.failure,
        )
        raise CloseConnection(f"SASL authentication failed: {session.failure}")


async def serve_connection(
    conn: Connection,
    dispatch: Dispatcher,
    cfg: NetConfig,
    stopping: trio.Event,
    tls: TlsSettings | None = None,
) -> None:
    decoder = FrameDecoder(cfg.max_frame_bytes)
    stream = conn.stream
    io = connection_io(stream)
    log.debug("connection opened peer=%s", conn.peer)
    reason = "closed by peer"
    replies: list[bytes] = []
    muted_until: list[float] = []  # KIP-219: a quota's throttle ends then (trio clock)
    # The metrics entries of the requests handled since the last write (Dispatcher.handle's
    # ``stats``), recorded once their replies are written: off the critical path of the round
    # trip, yet before anything else runs (on the raw socket nothing is awaited after the last
    # os.write, so no other task, e.g. a /metrics scrape, sees the reply without its entry).
    # A send that may wait records them before its first wait (``io.send``'s ``before_wait``):
    # a raw socket's write the kernel took only part of (the client may hold whole replies of
    # it meanwhile), a TLS stream's send_all (which may checkpoint after its last bytes).
    stats: list[StatsEntry] = []
    record = dispatch.record

    def mute(ms: int) -> None:
        muted_until.append(trio.current_time() + ms / 1000)

    def record_stats() -> None:
        for entry in stats:
            record(*entry)
        stats.clear()

    async def send_ready() -> None:
        """Send and clear ``replies`` in one write, then record ``stats``; raises
        WriteTimedOut."""
        try:
            if replies:
                data = replies[0] if len(replies) == 1 else b"".join(replies)
                replies.clear()
                await io.send(data, cfg.write_s, record_stats if stats else None)
        finally:
            if stats:
                record_stats()

    async def next_frame() -> bytes | Want:
        session = conn.sasl
        if session is None or session.authenticated:
            decoder.max_frame = cfg.max_frame_bytes
            return decoder.next_frame()
        decoder.max_frame = session.settings.max_receive_size
        try:
            return decoder.next_frame()
        except FramingError as exc:  # Kafka: InvalidReceiveException, an authentication failure
            await send_ready()
            await trio.sleep(session.settings.failed_delay_ms / 1000)
            why = f"SASL authentication failed: invalid receive size: {exc}"
            log.info("closing connection peer=%s listener=%s: %s", conn.peer, conn.listener, why)
            raise CloseConnection(why) from None

    reaper = idle_reaper()
    idle_s = cfg.idle_s
    waiting = reaper.queue(idle_s)
    with conn.scope:
        try:
            if tls is not None:
                # In this connection's task, so a slow or silent client holds up no one else;
                # under connections.max.idle.ms, as Kafka's Selector closes an idle connection
                # whether or not its handshake is done.
                conn.stream, conn.principal = await accept_tls(stream, tls, cfg.idle_s)
                stream = conn.stream
                io = connection_io(stream)
                log.debug("TLS connection peer=%s principal=%s", conn.peer, conn.principal)
            # (the async next_frame only on a SASL listener: a plain one's limit never changes)
            frame = decoder.next_frame() if conn.sasl is None else await next_frame()
            while True:
                if frame is Want.EOF:
                    break
                if frame is Want.MORE:
                    if stopping.is_set():
                        reason = "broker shutting down"
                        break
                    # connections.max.idle.ms: the reaper cancels conn.scope at idle_at
                    reason = "idle timeout"  # if the reaper ends the wait
                    at = conn.idle_at = waiting[conn] = trio.current_time() + idle_s
                    if at < reaper.wake_at:
                        reaper.waiting(at)
                    await io.receive(decoder)
                    conn.idle_at = math.inf
                    waiting.pop(conn, None)  # (None: the reaper took it out as it came due)
                    if conn.scope.cancel_called:  # timed out as the bytes came: close anyway
                        break
                    reason = "closed by peer"
                    frame = decoder.next_frame() if conn.sasl is None else await next_frame()
                    continue
                conn.busy = True
                try:
                    while isinstance(frame, bytes):
                        if conn.sasl is not None:
                            route = conn.sasl.route(frame, int(trio.current_time() * 1000))
                            if isinstance(route, Close):
                                await send_ready()
                                log.info(
                                    "closing connection peer=%s listener=%s: %s",
                                    conn.peer,
                                    conn.listener,
                                    route.reason,
                                )
                                raise CloseConnection(route.reason)
                            if isinstance(route, Refuse):  # the session failed on it
                                if route.answer:
                                    code = ErrorCode.illegal_sasl_state
                                    answer = dispatch.error_answer(frame, code)
                                    if answer is not None:
                                        replies.append(answer)
                                await _after_sasl(conn, send_ready)  # closes after the delay
                            if isinstance(route, Reply):  # a raw token (SaslHandshake v0)
                                replies.append(route.frame)
                                await _after_sasl(conn, send_ready)
                                frame = await next_frame()
                                continue
                        reply = await dispatch.handle(
                            frame,
                            conn.peer,
                            send_ready,
                            conn.listener,
                            conn.principal,
                            conn.sasl,
                            mute,
                            stats,
                        )
                        if reply is not None:
                            replies.append(reply)
                        if muted_until:  # the answer goes now; the next request waits
                            await send_ready()
                            with trio.move_on_at(max(muted_until)):
                                await stopping.wait()  # (a shutdown does not wait for it)
                            muted_until.clear()
                        if conn.sasl is not None:
                            await _after_sasl(conn, send_ready)
                        frame = decoder.next_frame() if conn.sasl is None else await next_frame()
                    await send_ready()
                finally:
                    conn.busy = False
                if frame is Want.EOF:
                    break
                # frame is Want.MORE: loop to read (without asking the decoder again)
        except HandshakeFailed as exc:
            reason = str(exc)
            log.info("closing connection peer=%s listener=%s: %s", conn.peer, conn.listener, exc)
        except WriteTimedOut:
            reason = "write timed out"
        except (CloseConnection, ProtocolError) as exc:
            # the requests before this one are answered (Kafka would have answered them)
            if isinstance(exc, ProtocolError):
                reason = f"protocol error: {exc!r}"
                log.warning("closing connection peer=%s: %s", conn.peer, reason)
            else:
                reason = f"closed by handler: {exc}"
            if replies:
                lost = (trio.BrokenResourceError, trio.ClosedResourceError, WriteTimedOut)
                with contextlib.suppress(*lost):
                    await send_ready()
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            reason = f"connection lost: {exc!r}"
        except Exception:  # a bug outside any handler: it costs this connection, not the broker
            log.exception("closing connection peer=%s: internal error", conn.peer)
            reason = "internal error"
        finally:
            conn.idle_at = math.inf
            waiting.pop(conn, None)
            if stats:  # (a send that failed or never came: they count all the same)
                record_stats()
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
    log.debug("connection closed peer=%s reason=%s", conn.peer, reason)
