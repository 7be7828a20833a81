"""The console over real sockets: a broker started as ``kafkad serve`` starts it (``Server``),
pages answer, bad input gets a clear HTTP error, and nothing reaches the Kafka listener."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import pytest
import trio
import trio.testing
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode

from proxy.broker import Broker
from proxy.http import app as console_app
from proxy.http.stream import DeadlineStream
from proxy.http.views import topics as topic_views
from proxy.server import Server
from tests.proxy.harness import connect, running_broker
from tests.proxy.http.conftest import plain

Reply = tuple[int, dict[str, str], bytes]


def _http(url: str, method: str = "GET", body: bytes | None = None, **headers: str) -> Reply:
    req = urllib.request.Request(url, data=body, method=method, headers=headers)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req, timeout=10) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


async def http(url: str, method: str = "GET", body: bytes | None = None, **headers: str) -> Reply:
    return await trio.to_thread.run_sync(lambda: _http(url, method, body, **headers))


@asynccontextmanager
async def console(**overrides: str) -> AsyncIterator[tuple[Server, str, int]]:
    settings = {"kafkad.http.listeners": "http://:0", **overrides}
    async with running_broker(**settings) as (server, port):
        (url,) = server.console_urls
        assert url.startswith("http://127.0.0.1:")
        yield server, url, port


async def kafka_answers(port: int) -> None:
    async with connect(port) as c:
        assert (await c.request(ApiVersionsRequest())).error_code == ErrorCode.none


async def test_pages_and_bad_input() -> None:
    async with console() as (server, url, port):
        assert server.broker is not None
        (p,) = (await server.broker.topics.create("orders", 1, {})).partitions  # type: ignore[union-attr]
        await plain(p, b"hello <script>")
        for path in (
            "/",
            "/topics/orders",
            "/topics/orders/0",
            "/transactions",
            "/producers",
            "/groups",
            "/clients",
        ):
            status, headers, _ = await http(url + path)
            assert (path, status) == (path, 200)
            assert headers["content-type"] == "text/html; charset=utf-8"
        status, _, body = await http(url + "/topics/orders/0/records?offset=0")
        assert status == 200
        assert b"hello &lt;script&gt;" in body and b"hello <script>" not in body  # escaped
        cases = {
            "/nope": 404,
            "/topics/missing": 404,
            "/topics/orders/1": 404,
            "/topics/orders/x": 404,
            "/topics/orders/%C2%B2": 404,  # "²".isdigit(), but no int(): was a 500
            "/topics/orders/%C2%B2/records": 404,
            "/topics/orders/%D9%A0": 404,  # an Arabic-Indic zero (int() takes it)
            "/topics/orders/0/records?offset=%EF%BC%90": 400,  # a fullwidth zero
            "/topics/orders/0/records?offset=0_0": 400,
            "/topics/orders/0/records?offset=%200": 400,
            "/topics/orders/0/records?offset=abc": 400,
            "/topics/orders/0/records?offset=-1": 400,
            "/topics/orders/0/records?offset=2": 400,
            "/topics/orders/0/records?isolation=dirty": 400,
            "/transactions/unknown": 404,
            "/groups/unknown": 404,
        }
        for path, want in cases.items():
            status, _, body = await http(url + path)
            assert (path, status) == (path, want)
            assert b'id="error"' in body
        assert (await http(url + "/", "POST", b"x"))[0] == 405
        big = b"x" * (console_app.MAX_BODY_BYTES + 1)
        assert (await http(url + "/admin/abort", "POST", big, Origin=url))[0] == 413
        # read-only by default: the admin form is refused
        form = b"topic=orders&partition=0&start_offset=0"
        assert (await http(url + "/admin/abort", "POST", form, Origin=url))[0] == 403
        await kafka_answers(port)


async def test_admin_abort_needs_the_same_origin() -> None:
    async with console(**{"kafkad.http.admin.enable": "true"}) as (server, url, port):
        b = server.broker
        assert b is not None
        (p,) = (await b.topics.create("t", 1, {})).partitions  # type: ignore[union-attr]
        from tests.proxy.http.conftest import Txn

        t = await Txn(b, "hung").init()
        await t.send(p, b"x")
        form = b"topic=t&partition=0&start_offset=0"
        for bad in ({}, {"Origin": "http://evil.example"}, {"Referer": "http://evil.example/"}):
            assert (await http(url + "/admin/abort", "POST", form, **bad))[0] == 403
        assert p.last_stable_offset == 0
        missing = b"topic=t&partition=0&start_offset=5"
        assert (await http(url + "/admin/abort", "POST", missing, Origin=url))[0] == 404
        assert (await http(url + "/admin/abort", "POST", b"topic=t", Origin=url))[0] == 400
        status, headers, _ = await http(url + "/admin/abort", "POST", form, Referer=url + "/t")
        assert (status, headers["location"]) == (303, "/topics/t/0")
        assert p.last_stable_offset == p.high_watermark == 2
        await kafka_answers(port)


async def test_event_stream_tells_of_changes() -> None:
    async with console() as (server, url, _):
        b = server.broker
        assert b is not None
        host, port = url.removeprefix("http://").split(":")
        stream = await trio.open_tcp_stream(host, int(port))
        async with stream:
            await stream.send_all(f"GET /events HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            seen = b""
            with trio.fail_after(10):
                while b"retry: 2000" not in seen:
                    seen += await stream.receive_some()
                assert b"text/event-stream" in seen
                await b.topics.create("new", 1, {})
                while b"data: changed" not in seen:
                    seen += await stream.receive_some()


async def test_a_client_that_stops_reading_is_dropped(autojump_clock: trio.abc.Clock) -> None:
    a, b = trio.socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    writer = DeadlineStream(trio.SocketStream(a), write_timeout=5)
    with trio.fail_after(60):
        with pytest.raises(trio.BrokenResourceError):
            await writer.send_all(b"x" * 10_000_000)  # the peer never reads
    assert writer.dropped
    b.close()


async def test_a_page_that_fails_costs_one_request(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("bug")

    async with console() as (_, url, port):
        monkeypatch.setattr(topic_views, "topic_rows", broken)
        assert (await http(url + "/"))[0] == 500
        assert (await http(url + "/transactions"))[0] == 200
        await kafka_answers(port)


async def test_a_console_that_cannot_bind_leaves_the_broker_up() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        listeners = f"http://127.0.0.1:{busy}"
        async with running_broker(**{"kafkad.http.listeners": listeners}) as (server, port):
            assert server.console_urls == []
            await kafka_answers(port)


async def test_metrics_route() -> None:
    async with console() as (_, url, _):
        status, _, body = await http(url + "/metrics")
        assert status == 200
        assert b"kafka_server_brokertopicmetrics_messagesin_total" in body


def test_serve_without_the_console_imports_neither_hypercorn_nor_jinja2() -> None:
    code = (
        "import sys, proxy.cli, proxy.server\n"
        "assert not {'hypercorn', 'jinja2'} & set(sys.modules), sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=console_app.TEMPLATES.parents[2])


async def test_a_connection_that_fails_leaves_the_console_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hypercorn.trio.tcp_server import TCPServer

    real, failed = TCPServer.run, []

    async def fails_once(self: TCPServer) -> None:
        if not failed:
            failed.append(True)
            raise RuntimeError("bug in one connection")
        await real(self)

    monkeypatch.setattr(TCPServer, "run", fails_once)
    async with console() as (_, url, port):
        with pytest.raises(OSError):
            await http(url + "/")
        assert (await http(url + "/"))[0] == 200
        await kafka_answers(port)


@pytest.mark.timeout(60)  # before the fix the shielded write outlived fail_after: a hang
async def test_shutdown_does_not_wait_for_a_client_that_does_not_read(broker: Broker) -> None:
    """hypercorn writes in a shielded scope, so cancelling the console left a write to a
    client that stops reading in place until the write deadline (10 s by default; here an
    hour): the broker's exit waited for it. The console drops its connections at shutdown."""
    from proxy.http.server import serve_console
    from proxy.http.settings import HttpListener

    in_write = 0
    real_send_all = DeadlineStream.send_all

    async def counted(self: DeadlineStream, data: bytes | bytearray | memoryview) -> None:
        nonlocal in_write
        in_write += 1
        try:
            await real_send_all(self, data)
        finally:
            in_write -= 1

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(DeadlineStream, "send_all", counted)
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                (url,) = await nursery.start(
                    partial(
                        serve_console,
                        broker,
                        (HttpListener("127.0.0.1", 0),),
                        admin=False,
                        hanging_ms=1,
                        write_timeout=3600,
                    )
                )
                host, port = url.removeprefix("http://").split(":")
                client = trio.socket.socket()
                client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                await client.connect((host, int(port)))
                request = f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
                await client.send(request * 5000)  # ~15 MB of pages; never read
                while in_write == 0:
                    await trio.testing.wait_all_tasks_blocked()
                await trio.testing.wait_all_tasks_blocked()
                assert in_write == 1  # blocked writing to the client
                broker.begin_shutdown()
        client.close()


async def test_event_streams_share_one_fingerprint_per_poll(
    broker: Broker, autojump_clock: trio.abc.Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each open stream fingerprinted the whole broker every second: 64 streams on 3,000
    partitions were ~450 ms of the broker's thread per second. One pass per poll now."""
    from proxy.http.views import live

    calls = 0
    real = live.fingerprint

    def counted(b: Broker) -> int:
        nonlocal calls
        calls += 1
        return real(b)

    monkeypatch.setattr(live, "fingerprint", counted)
    app = console_app.ConsoleApp(broker, admin=False, hanging_ms=1)
    request = console_app.Request("GET", "/events", {}, {})

    async def never_disconnects() -> dict[str, object]:
        await trio.sleep_forever()
        raise AssertionError

    async def discard(message: dict[str, object]) -> None:
        pass

    streams, seconds = 20, 30
    with trio.move_on_after(seconds * console_app.EVENT_POLL_S):
        async with trio.open_nursery() as nursery:
            for _ in range(streams):
                nursery.start_soon(app.event_stream, request, never_disconnects, discard)
    assert app.event_streams == 0
    assert calls <= 2 * seconds + 2  # not streams * seconds


async def test_a_rebound_host_name_is_refused() -> None:
    """DNS rebinding: a page on evil.example re-points its name at 127.0.0.1; the browser then
    sends ``Host: evil.example:PORT`` and, for a POST, ``Origin: http://evil.example:PORT``,
    so the page could read every console page and pass the admin form's Origin check."""
    async with console(**{"kafkad.http.admin.enable": "true"}) as (server, url, port):
        b = server.broker
        assert b is not None
        (p,) = (await b.topics.create("t", 1, {})).partitions  # type: ignore[union-attr]
        from tests.proxy.http.conftest import Txn

        t = await Txn(b, "victim").init()
        await t.send(p, b"x")
        console_port = url.rsplit(":", 1)[1]
        evil = f"evil.example:{console_port}"
        for path in ("/", "/transactions", "/metrics"):
            status, _, body = await http(url + path, Host=evil)
            assert (path, status) == (path, 400) and b"victim" not in body
        form = b"topic=t&partition=0&start_offset=0"
        status, _, _ = await http(
            url + "/admin/abort", "POST", form, Host=evil, Origin=f"http://{evil}"
        )
        assert status == 400 and p.last_stable_offset == 0  # still open
        for host in (f"localhost:{console_port}", f"127.0.0.1:{console_port}", "[::1]"):
            assert (await http(url + "/transactions", Host=host))[0] == 200, host
        await kafka_answers(port)


async def test_a_body_that_never_comes_is_answered_408(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that declares a body and sends part of it held a connection and a task until
    it went away (no read deadline in hypercorn); it gets a 408."""
    monkeypatch.setattr(console_app, "BODY_TIMEOUT_S", 0.5)
    async with console() as (_, url, port):
        host, http_port = url.removeprefix("http://").split(":")
        stream = await trio.open_tcp_stream(host, int(http_port))
        async with stream:
            head = f"POST /admin/abort HTTP/1.1\r\nHost: {host}\r\nContent-Length: 10\r\n\r\n"
            await stream.send_all(head.encode() + b"ab")
            seen = b""
            with trio.fail_after(10):
                while b"\r\n\r\n" not in seen:
                    seen += await stream.receive_some()
            assert seen.startswith(b"HTTP/1.1 408 ")
        await kafka_answers(port)


async def test_only_a_hanging_transaction_gets_an_abort_button() -> None:
    """The partition page offered Abort on every open transaction, live ones included: one
    click aborted the first part of a running transaction, whose later batches the
    coordinator's COMMIT then committed alone. Only a hanging one gets the button (the POST
    itself stays what ``kafka-transactions.sh abort`` does)."""
    settings = {"kafkad.http.admin.enable": "true", "kafkad.http.hanging.transaction.ms": "60000"}
    async with console(**settings) as (server, url, _):
        b = server.broker
        assert b is not None
        (p,) = (await b.topics.create("t", 1, {})).partitions  # type: ignore[union-attr]
        from tests.proxy.http.conftest import NOW, Txn

        live = await Txn(b, "live").init()
        await live.send(p, b"now", ts=b.now_ms())  # offset 0: open a moment
        stuck = await Txn(b, "stuck").init()
        await stuck.send(p, b"old", ts=NOW)  # offset 1: open since 2023
        status, _, body = await http(url + "/topics/t/0")
        assert status == 200
        assert body.count(b'action="/admin/abort"') == 1
        assert b'name="start_offset" value="1"' in body
        assert b'name="start_offset" value="0"' not in body


async def test_concurrent_aborts_write_one_marker(broker: Broker) -> None:
    """Five simultaneous aborts of one transaction all found it open before the first marker
    landed: five ABORT markers, five 303s. One writes; the others are told it is gone."""
    from proxy.http.views import records
    from tests.proxy.http.conftest import Txn, topic

    (p,) = await topic(broker, "t")
    t = await Txn(broker, "o").init()
    await t.send(p, b"x")
    app = console_app.ConsoleApp(broker, admin=True, hanging_ms=1)
    form = console_app.Request(
        "POST",
        "/admin/abort",
        {},
        {"host": "127.0.0.1:1", "origin": "http://127.0.0.1:1"},
        b"topic=t&partition=0&start_offset=0",
    )
    statuses = []

    async def abort() -> None:
        try:
            statuses.append((await app.abort(form)).status)
        except console_app.HttpError as exc:
            statuses.append(exc.status)

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(abort)
    assert sorted(statuses) == [303, 404, 404, 404, 404]
    page = await records.record_page(p, 0, committed=False)
    assert [b.marker for b in page.batches] == [None, "ABORT"]


async def test_transactions_page_is_paginated() -> None:
    """3,000 transactional ids made /transactions a 2 MB page rendered on the broker's thread
    (and re-fetched on every change while open); it shows ``PAGE_ROWS`` ids a page."""
    from tests.proxy.http.conftest import Txn

    async with console() as (server, url, _):
        b = server.broker
        assert b is not None
        n = 2 * console_app.PAGE_ROWS + 50
        for i in range(n):
            await Txn(b, f"id-{i:04d}").init()
        pages = []
        for page in range(3):
            status, _, body = await http(url + f"/transactions?page={page}")
            assert status == 200
            pages.append(re.findall(rb'data-txn="(id-\d+)"', body))
            assert f"of {n}".encode() in body
        assert [len(p) for p in pages] == [console_app.PAGE_ROWS, console_app.PAGE_ROWS, 50]
        assert sorted(t for p in pages for t in p) == [f"id-{i:04d}".encode() for i in range(n)]
        for bad in ("3", "-1", "x"):
            assert (await http(url + f"/transactions?page={bad}"))[0] == 400, bad


async def test_a_change_between_render_and_stream_start_is_told(
    broker: Broker, autojump_clock: trio.testing.MockClock
) -> None:
    """The stream took its first fingerprint when it connected, after the page was rendered:
    a change in between (a commit landing while the page loads) was never told, and the page
    stayed stale until the next one. The page now passes the fingerprint it was rendered at."""
    app = console_app.ConsoleApp(broker, admin=False, hanging_ms=1)
    page = await app.topics_page(console_app.Request("GET", "/", {}, {}))
    (since,) = re.findall(rb'EventSource\("/events\?since=(-?\d+)"\)', page.body)
    await broker.topics.create("appeared", 1, {})  # after the render, before the stream
    autojump_clock.jump(console_app.EVENT_POLL_S)  # the render's fingerprint is stale now
    request = console_app.Request("GET", "/events", {"since": [since.decode()]}, {})
    chunks: list[bytes] = []

    async def never_disconnects() -> dict[str, object]:
        await trio.sleep_forever()
        raise AssertionError

    async def keep(message: dict[str, object]) -> None:
        chunks.append(message.get("body", b""))  # type: ignore[arg-type]

    with trio.move_on_after(3 * console_app.EVENT_POLL_S):
        await app.event_stream(request, never_disconnects, keep)
    assert b"data: changed\n\n" in chunks


async def test_a_consumer_protocol_group_is_shown() -> None:
    from coordinator.consumer_group.heartbeat import Heartbeat

    async with console() as (server, url, _):
        assert server.broker is not None
        await server.broker.topics.create("t", 2, {})
        hb = Heartbeat(
            "cg", "m1", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("t",), owned=()
        )
        assert (await server.broker.groups.consumer_heartbeat(hb, 1)).member_epoch == 1
        status, _, body = await http(url + "/groups")
        assert status == 200
        row = b'<tr data-group="cg"><td><a href="/groups/cg">cg</a></td><td>consumer</td>'
        assert row + b"<td>Stable</td>" in body
        status, _, body = await http(url + "/groups/cg")
        assert status == 200
        assert b'group epoch <span id="group-epoch">1</span>' in body
        assert b"<code>m1</code>" in body and b"t-0, t-1" in body
