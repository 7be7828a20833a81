"""Runs the console in the broker's nursery: hypercorn's trio HTTP/1.1 connection handling
(``TCPServer``) on listeners bound here, one task per connection.

Containment: the console can never take the broker down. A bind failure or any crash is
logged and ends only the console; each connection's writes have a deadline
(``stream.DeadlineStream``), so a client that stops reading is dropped; at shutdown the
console's tasks are cancelled at once (nothing it holds needs flushing).

hypercorn's ``serve`` binds from its own config and writes with no deadline, so its worker
loop is replaced by the few lines below (pinned hypercorn: the three internals used,
``TCPServer``, ``WorkerContext`` and ``wrap_app``, are the ones ``hypercorn.trio.run`` uses).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING

import trio

from proxy.http.settings import HttpListener, parse_http_listeners

if TYPE_CHECKING:
    from proxy.broker import Broker
    from proxy.config import BrokerConfig

log = logging.getLogger("kafkad.http")

WRITE_TIMEOUT_S = 10.0
KEEP_ALIVE_S = 5.0


async def run_console(
    broker: Broker,
    config: BrokerConfig,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The console as the broker's configs ask for it (``proxy/server.py`` starts it)."""
    await serve_console(
        broker,
        parse_http_listeners(config.get("kafkad.http.listeners")),
        admin=config.get("kafkad.http.admin.enable"),
        hanging_ms=config.get("kafkad.http.hanging.transaction.ms"),
        task_status=task_status,
    )


async def serve_console(
    broker: Broker,
    listeners: tuple[HttpListener, ...],
    *,
    admin: bool,
    hanging_ms: int,
    write_timeout: float = WRITE_TIMEOUT_S,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until the broker shuts down. Reports the bound URLs ([] if it could not start)."""
    started = False
    try:
        # Imported here: a broker without the console never pays for hypercorn and jinja2.
        from hypercorn.config import Config
        from hypercorn.trio.tcp_server import TCPServer
        from hypercorn.trio.worker_context import WorkerContext
        from hypercorn.typing import ConnectionState
        from hypercorn.utils import wrap_app

        from proxy.http.app import ConsoleApp
        from proxy.http.stream import DeadlineStream

        app = ConsoleApp(
            broker,
            admin=admin,
            hanging_ms=hanging_ms,
            loopback_only=all(lst.loopback for lst in listeners),
        )
        config = Config()
        config.accesslog = None
        config.errorlog = log
        config.keep_alive_timeout = KEEP_ALIVE_S
        config.h11_max_incomplete_size = 16 * 1024  # request line + headers: 400 beyond
        wrapped = wrap_app(app, config.wsgi_max_body_size, "asgi")  # type: ignore[arg-type]
        context = WorkerContext(None)

        bound: list[trio.SocketListener] = []
        urls: list[str] = []
        try:
            for lst in listeners:
                if not lst.loopback:
                    log.warning(
                        "web console listens beyond loopback on %s (no authentication)", lst
                    )
                for sock_listener in await trio.open_tcp_listeners(lst.port, host=lst.host):
                    bound.append(sock_listener)
                    host, port = sock_listener.socket.getsockname()[:2]
                    urls.append(str(HttpListener(host, port)))
        except OSError as exc:
            for b in bound:
                b.socket.close()
            log.error("web console not started: cannot bind %s: %s", lst, exc.strerror or exc)
            return

        connections: set[DeadlineStream] = set()

        async def handle(stream: trio.SocketStream) -> None:
            conn = DeadlineStream(stream, write_timeout)
            connections.add(conn)
            try:
                await TCPServer(wrapped, config, context, ConnectionState({}), conn)  # type: ignore[arg-type]
            except Exception:  # one connection's failure is not the console's
                log.exception("web console: a connection failed")
                await trio.aclose_forcefully(stream)
            finally:
                connections.discard(conn)

        async with trio.open_nursery() as nursery:
            for b in bound:
                nursery.start_soon(
                    partial(trio.serve_listeners, handle, [b], handler_nursery=nursery)
                )
            log.info("web console on %s%s", ", ".join(urls), " (admin)" if admin else "")
            started = True
            task_status.started(urls)
            await broker.shutting_down.wait()
            for conn in connections:  # hypercorn's shielded writes ignore the cancel below
                conn.drop()
            nursery.cancel_scope.cancel()
    except Exception:
        log.exception("web console stopped (the broker goes on)")
    finally:
        if not started:
            task_status.started([])
