"""The console's ASGI app: routing, bad input, the event stream and the admin form.

Bad input never reaches the broker: an unknown page, topic, partition, transactional id or
group is 404; an offset that is not a number or outside [log start, high watermark] is 400; a
request body over ``MAX_BODY_BYTES`` is 413 (before it is read, by Content-Length, or as soon
as the bytes read pass it), one not in within ``BODY_TIMEOUT_S`` is 408 (else a client that
declares a body and sends part of it holds a connection and a task forever); another method
than the route's is 405. A bug in a page costs that request a 500 and a log line. The admin
POST needs the admin switch (else 403) and must come from a page of the console itself: its
``Origin`` (or, without one, its ``Referer``) must be this host (else 403), which a
cross-site form cannot forge. A console on loopback only also
refuses (400) a ``Host`` that names neither an IP address nor localhost: a page on another
site whose name it re-points at 127.0.0.1 (DNS rebinding) is same-origin by that name, and
would otherwise read every page and pass the ``Origin`` check.

Live updates: ``/events`` is a server-sent event stream that sends ``data: changed`` whenever
``views.live.fingerprint`` moves (polled every ``EVENT_POLL_S``) and a comment line to keep it
open; the page's script then reloads its own ``<main>``. One event is in flight at a time per
client (nothing queues), at most ``MAX_EVENT_STREAMS`` streams are open (more get 503), and a
client that stops reading is dropped by the connection's write deadline (``stream.py``). The
fingerprint (a pass over every partition, transactional id and group) is computed once per
poll for all streams, not once per stream.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import re
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import trio

from proxy.http.views import clients, groups, live, partition, records, topics, transactions

if TYPE_CHECKING:
    from proxy.broker import Broker

log = logging.getLogger("kafkad.http")

TEMPLATES = Path(__file__).with_name("templates")
MAX_BODY_BYTES = 16 * 1024
BODY_TIMEOUT_S = 10.0
MAX_EVENT_STREAMS = 64
PAGE_ROWS = 200  # transactional ids (and hanging rows) on one page of /transactions
EVENT_POLL_S = 1.0
EVENT_KEEPALIVE_S = 15.0

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes = b""

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)


# ASCII digits only: str.isdigit() is true of "²" (which int() then refuses: a 500), and int()
# takes Arabic-Indic digits, "1_0" and blanks.
WHOLE_NUMBER = re.compile(r"-?[0-9]{1,19}")


def int_arg(text: str | None, what: str, default: int | None = None) -> int:
    if text is None or text == "":
        if default is None:
            raise HttpError(400, f"{what} is missing")
        return default
    if WHOLE_NUMBER.fullmatch(text) is None:
        raise HttpError(400, f"{what} {text!r} is not a whole number")
    return int(text)


class ConsoleApp:
    def __init__(
        self,
        broker: Broker,
        *,
        admin: bool,
        hanging_ms: int,
        now_ms: Callable[[], int] | None = None,
        loopback_only: bool = True,
    ) -> None:
        self.broker = broker
        self.admin = admin
        self.loopback_only = loopback_only
        self.hanging_ms = hanging_ms
        self.now_ms = now_ms or broker.now_ms
        self.event_streams = 0
        # One admin abort at a time: the lookup of the open transaction and its marker write
        # are one step, so a second click (or tab) finds it gone instead of writing a second
        # ABORT for a producer with no transaction open.
        self.abort_lock = trio.Lock()
        self._fingerprint: tuple[float, int] | None = None  # (trio time, value): shared
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(TEMPLATES),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.env.filters["ms"] = format_ms
        self.env.globals["quote"] = lambda s: urllib.parse.quote(str(s), safe="")
        self.routes: list[tuple[str, re.Pattern[str], Callable[..., Awaitable[Response]]]] = [
            ("GET", re.compile(r"/"), self.topics_page),
            ("GET", re.compile(r"/topics/(?P<topic>[^/]+)"), self.topic_page),
            ("GET", re.compile(r"/topics/(?P<topic>[^/]+)/(?P<index>[^/]+)"), self.partition_page),
            (
                "GET",
                re.compile(r"/topics/(?P<topic>[^/]+)/(?P<index>[^/]+)/records"),
                self.records_page,
            ),
            ("GET", re.compile(r"/transactions"), self.transactions_page),
            ("GET", re.compile(r"/transactions/(?P<tid>.+)"), self.transaction_page),
            ("POST", re.compile(r"/admin/abort"), self.abort),
            ("GET", re.compile(r"/producers"), self.producers_page),
            ("GET", re.compile(r"/groups"), self.groups_page),
            ("GET", re.compile(r"/groups/(?P<gid>.+)"), self.group_page),
            ("GET", re.compile(r"/clients"), self.clients_page),
            ("GET", re.compile(r"/metrics"), self.metrics),
        ]

    # -- ASGI ------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        request = Request(
            scope["method"],
            scope["path"],
            urllib.parse.parse_qs(scope["query_string"].decode("latin-1")),
            headers,
        )
        if self.loopback_only and not loopback_host(headers.get("host")):
            await send_response(
                send, self.error(400, "the Host header must name this console's address")
            )
            return
        if request.method == "GET" and request.path == "/events":
            await self.event_stream(request, receive, send)
            return
        try:
            with trio.move_on_after(BODY_TIMEOUT_S) as reading:
                request.body = await read_body(request, receive)
            if reading.cancelled_caught:
                raise HttpError(408, f"the request body did not come in {BODY_TIMEOUT_S} s")
            response = await self.dispatch(request)
        except HttpError as exc:
            response = self.error(exc.status, exc.message)
        except Exception:
            log.exception("console: %s %s failed", request.method, request.path)
            response = self.error(500, "internal error (logged)")
        await send_response(send, response)

    async def dispatch(self, request: Request) -> Response:
        allowed = []
        for method, pattern, view in self.routes:
            m = pattern.fullmatch(request.path)
            if m is None:
                continue
            if method != request.method:
                allowed.append(method)
                continue
            return await view(request, **m.groupdict())  # ASGI paths arrive decoded
        if allowed:
            raise HttpError(405, f"{request.method} is not allowed here")
        raise HttpError(404, f"no page {request.path}")

    def render(self, template: str, code: int = 200, **context: Any) -> Response:
        body = self.env.get_template(template).render(
            admin=self.admin, now_ms=self.now_ms(), fingerprint=self.fingerprint(), **context
        )
        return Response(code, body.encode())

    def error(self, status: int, message: str) -> Response:
        return self.render("error.html", status, status=status, message=message, title=str(status))

    # -- pages -----------------------------------------------------------------------------

    async def topics_page(self, request: Request) -> Response:
        rows = topics.topic_rows(self.broker, self.now_ms())
        return self.render("topics.html", title="Topics", topics=rows)

    async def topic_page(self, request: Request, topic: str) -> Response:
        row = topics.topic_row(self.broker, topic, self.now_ms())
        if row is None:
            raise HttpError(404, f"no topic {topic!r}")
        return self.render("topic.html", title=topic, topic=row)

    def _index(self, topic: str, index: str) -> int:
        if WHOLE_NUMBER.fullmatch(index) is None or index.startswith("-"):
            raise HttpError(404, f"no partition {index!r} of {topic!r}")
        return int(index)

    async def partition_page(self, request: Request, topic: str, index: str) -> Response:
        detail = await partition.partition_detail(
            self.broker, topic, self._index(topic, index), self.now_ms(), self.hanging_ms
        )
        if detail is None:
            raise HttpError(404, f"no partition {topic}-{index}")
        return self.render("partition.html", title=str(detail.row.tp), p=detail)

    async def records_page(self, request: Request, topic: str, index: str) -> Response:
        p = self.broker.topics.partition(topic, self._index(topic, index))
        if p is None or p.deleted:
            raise HttpError(404, f"no partition {topic}-{index}")
        isolation = request.arg("isolation", "raw")
        if isolation not in ("raw", "read_committed"):
            raise HttpError(400, f"isolation {isolation!r}: raw or read_committed")
        offset = int_arg(request.arg("offset"), "offset", p.log_start_offset)
        try:
            page = await records.record_page(p, offset, committed=isolation == "read_committed")
        except records.BadOffset as exc:
            raise HttpError(400, str(exc)) from None
        return self.render(
            "records.html", title=f"{p.tp} records", tp=p.tp, page=page, isolation=isolation
        )

    async def transactions_page(self, request: Request) -> Response:
        """``PAGE_ROWS`` ids a page (``?page=N`` from 0): the page reloads itself on every
        change, and thousands of rows were megabytes rendered on the broker's thread."""
        now = self.now_ms()
        page = int_arg(request.arg("page"), "page", 0)
        total = len(self.broker.txns.cache)
        if page < 0 or (page > 0 and page * PAGE_ROWS >= total):
            raise HttpError(400, f"page {page}: there are {total} transactional ids")
        rows = await transactions.txn_rows(
            self.broker, now, self.hanging_ms, page * PAGE_ROWS, PAGE_ROWS
        )
        stuck = await transactions.hanging_on_partitions(self.broker, now, self.hanging_ms)
        return self.render(
            "transactions.html",
            title="Transactions",
            txns=rows,
            page=page,
            first=page * PAGE_ROWS,
            total=total,
            last_page=max(total - 1, 0) // PAGE_ROWS,
            stuck=stuck[:PAGE_ROWS],
            stuck_more=max(len(stuck) - PAGE_ROWS, 0),
        )

    async def transaction_page(self, request: Request, tid: str) -> Response:
        row = await transactions.find_txn(self.broker, tid, self.now_ms(), self.hanging_ms)
        if row is None:
            raise HttpError(404, f"no transactional id {tid!r}")
        history = await transactions.txn_history(self.broker, tid)
        return self.render("transaction.html", title=tid, txn=row, history=history)

    async def abort(self, request: Request) -> Response:
        if not self.admin:
            raise HttpError(403, "the console is read-only (kafkad.http.admin.enable=false)")
        check_same_origin(request)
        form = urllib.parse.parse_qs(request.body.decode("latin-1"))
        topic = (form.get("topic") or [""])[0]
        index = int_arg((form.get("partition") or [""])[0], "partition")
        start = int_arg((form.get("start_offset") or [""])[0], "start_offset")
        if self.broker.topics.partition(topic, index) is None:
            raise HttpError(404, f"no partition {topic}-{index}")
        async with self.abort_lock:
            code = await transactions.abort_open_transaction(self.broker, topic, index, start)
        if code is None:
            raise HttpError(404, f"no open transaction starts at offset {start} on {topic}-{index}")
        if code.value != 0:
            raise HttpError(409, f"the ABORT marker was refused: {code.name}")
        where = f"/topics/{urllib.parse.quote(topic, safe='')}/{index}"
        return Response(303, b"", headers=[("location", where)])

    async def producers_page(self, request: Request) -> Response:
        rows = partition.producers_by_partition(self.broker)
        return self.render("producers.html", title="Producers", partitions=rows)

    async def groups_page(self, request: Request) -> Response:
        return self.render(
            "groups.html", title="Consumer groups", groups=groups.group_rows(self.broker)
        )

    async def group_page(self, request: Request, gid: str) -> Response:
        row = groups.group_row(self.broker, gid)
        if row is None:
            raise HttpError(404, f"no group {gid!r}")
        return self.render("group.html", title=gid, group=row)

    async def clients_page(self, request: Request) -> Response:
        return self.render(
            "clients.html", title="Clients", clients=clients.client_rows(self.broker)
        )

    async def metrics(self, request: Request) -> Response:
        try:  # proxy/metrics/ (issue 18, points 2-3) renders the Prometheus text
            from proxy.metrics.http import render_metrics  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise HttpError(404, "no /metrics in this build") from None
        body, content_type = render_metrics(self.broker)
        return Response(200, body, content_type)

    # -- server-sent events ----------------------------------------------------------------

    async def event_stream(self, request: Request, receive: Receive, send: Send) -> None:
        if self.event_streams >= MAX_EVENT_STREAMS:
            await send_response(send, self.error(503, "too many event streams open"))
            return
        self.event_streams += 1
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"text/event-stream"),
                        (b"cache-control", b"no-store"),
                    ],
                }
            )
            async with trio.open_nursery() as nursery:

                async def until_disconnect() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    nursery.cancel_scope.cancel()

                nursery.start_soon(until_disconnect)
                since = request.arg("since")
                ok = since is not None and WHOLE_NUMBER.fullmatch(since) is not None
                await self._events(send, int(since) if ok and since is not None else None)
                nursery.cancel_scope.cancel()
        finally:
            self.event_streams -= 1

    def fingerprint(self) -> int:
        """``live.fingerprint``, at most once per half poll period whatever the streams."""
        now = trio.current_time()
        if self._fingerprint is None or now - self._fingerprint[0] >= EVENT_POLL_S / 2:
            self._fingerprint = (now, live.fingerprint(self.broker))
        return self._fingerprint[1]

    async def _events(self, send: Send, since: int | None) -> None:
        """``since``: the fingerprint the page was rendered at (a change between the render
        and the stream's start is then still told)."""
        seen = self.fingerprint() if since is None else since
        quiet = 0.0
        await send({"type": "http.response.body", "body": b"retry: 2000\n\n", "more_body": True})
        while not self.broker.shutting_down.is_set():
            await trio.sleep(EVENT_POLL_S)
            now = self.fingerprint()
            if now != seen:
                seen, quiet = now, 0.0
                chunk = b"data: changed\n\n"
            elif (quiet := quiet + EVENT_POLL_S) >= EVENT_KEEPALIVE_S:
                quiet, chunk = 0.0, b": keep-alive\n\n"
            else:
                continue
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def loopback_host(host: str | None) -> bool:
    """Whether a ``Host`` header names a loopback console: an IP address or localhost (no
    header: not a browser, which always sends one)."""
    if host is None:
        return True
    try:
        name = urllib.parse.urlsplit("//" + host).hostname
    except ValueError:
        return False
    if name is None:
        return False
    if name.rstrip(".") == "localhost":
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def check_same_origin(request: Request) -> None:
    host = request.headers.get("host", "")
    origin = request.headers.get("origin")
    if origin is None:
        referer = urllib.parse.urlsplit(request.headers.get("referer", ""))
        origin = f"{referer.scheme}://{referer.netloc}" if referer.netloc else None
    if origin != f"http://{host}":
        raise HttpError(403, "cross-origin request refused (the form must come from this console)")


async def read_body(request: Request, receive: Receive) -> bytes:
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
        raise HttpError(413, f"request body over {MAX_BODY_BYTES} bytes")
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        body += message.get("body", b"")
        if len(body) > MAX_BODY_BYTES:
            raise HttpError(413, f"request body over {MAX_BODY_BYTES} bytes")
        if not message.get("more_body"):
            break
    return bytes(body)


async def send_response(send: Send, response: Response) -> None:
    headers = [
        (b"content-type", response.content_type.encode()),
        (b"content-length", str(len(response.body)).encode()),
        (b"cache-control", b"no-store"),
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", b"DENY"),
    ] + [(k.encode(), v.encode("latin-1")) for k, v in response.headers]
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body})


def format_ms(ms: int | None) -> str:
    """Epoch milliseconds as UTC time; -1/None as a dash."""
    if ms is None or ms < 0:
        return "-"
    t = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}Z"
