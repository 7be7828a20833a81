"""The transaction view of the proxy (``proxy/forward/txn_view.py``, ``http.py``): a
transactional producer's raw requests through the proxy to an in-process kafkad broker, and
what the view, its page and its metrics make of them: commit, abort, fencing by a second
instance, errors, latency; labelled as observed traffic."""

from __future__ import annotations

import json

import trio
from kio.schema.errors import ErrorCode

from proxy.forward.http import respond
from tests.proxy.forward.test_forward import LIMIT_S, broker_and_proxy
from tests.proxy.harness import connect
from tests.proxy.test_broker_requests import create
from tests.proxy.test_txn_apis import add_offsets, add_partitions, end_txn, init

E = ErrorCode


async def test_commits_aborts_and_a_fenced_producer_as_observed() -> None:
    with trio.fail_after(LIMIT_S * 2):
        async with broker_and_proxy() as (proxy, port, _u), connect(port) as c:
            assert await create(c, "t") == E.none
            first = await init(c, "tx-a")
            pid = first.producer_id
            assert await add_partitions(c, 3, "tx-a", pid, 0, {"t": [0]}) == {("t", 0): E.none}
            assert await add_offsets(c, 4, "tx-a", pid, 0, "g") is E.none
            seen = proxy.txns.ids["tx-a"]
            assert (seen.state, seen.partitions, seen.groups) == ("ongoing", {("t", 0)}, {"g"})
            assert proxy.txns.open_transactions() == 1
            assert await end_txn(c, 4, "tx-a", pid, 0, True) is E.none
            assert (seen.state, seen.commits, seen.partitions) == ("committed", 1, set())
            codes = await add_partitions(c, 3, "tx-a", pid, 0, {"t": [0]})
            assert codes == {("t", 0): E.none}, codes
            assert await end_txn(c, 4, "tx-a", pid, 0, False) is E.none
            assert (seen.state, seen.aborts) == ("aborted", 1)

            # a second instance takes tx-b while its transaction is open: the first is fenced
            b = await init(c, "tx-b")
            await add_partitions(c, 3, "tx-b", b.producer_id, 0, {"t": [0]})
            assert (await init(c, "tx-b")).error_code is E.concurrent_transactions
            assert (await init(c, "tx-b")).producer_epoch == 2  # bumped by the abort, then
            assert await end_txn(c, 4, "tx-b", b.producer_id, 0, True) is E.producer_fenced
            seen_b = proxy.txns.ids["tx-b"]
            assert seen_b.state == "fenced" and seen_b.producer_epoch == 2
            assert seen_b.fenced == 2  # the epoch bump over an open txn, then the zombie's EndTxn
            assert seen_b.last_error == "PRODUCER_FENCED"

    t = proxy.txns.totals
    assert (t.commits, t.aborts, t.end_errors, t.fenced) == (1, 1, 1, 2)
    assert proxy.txns.percentile(26, 50) is not None  # EndTxn latency

    status, _ctype, body = respond(proxy.txns, "GET", "/metrics")
    text = body.decode()
    assert status == 200
    assert 'kafkad_proxy_observed_end_txn_total{outcome="commit"} 1.0' in text
    assert 'kafkad_proxy_observed_end_txn_total{outcome="abort"} 1.0' in text
    assert "kafkad_proxy_observed_producer_fenced_total 2.0" in text
    assert 'kafkad_proxy_observed_txn_request_seconds_count{api="EndTxn"} 3.0' in text
    assert "not broker state" in text
    status, _ctype, body = respond(proxy.txns, "GET", "/transactions.json")
    data = json.loads(body)
    assert data["source"].startswith("observed traffic")
    assert [x["transactional_id"] for x in data["transactional_ids"]] == ["tx-b", "tx-a"]
    status, _ctype, body = respond(proxy.txns, "GET", "/")
    assert status == 200 and b'data-txn="tx-b"' in body
    # the console's page (its base template and look), labelled as what it is
    text = body.decode()
    assert (
        "observed through the proxy" in text
        and "Observed through the proxy, not broker state" in text
    )
    assert '<nav><a class="brand" href="/">kafkad proxy</a>' in text and "EventSource" not in text
    assert respond(proxy.txns, "GET", "/nope")[0] == 404
    assert respond(proxy.txns, "POST", "/")[0] == 405


async def test_the_view_is_served_over_http() -> None:
    async with broker_and_proxy(http=("127.0.0.1", 0)) as (proxy, _port, _u):
        host, port = proxy.http_url.removeprefix("http://").rstrip("/").rsplit(":", 1)
        with trio.fail_after(LIMIT_S):
            stream = await trio.open_tcp_stream(host, int(port))
            async with stream:
                await stream.send_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                got = b""
                while chunk := await stream.receive_some(65536):
                    got += chunk
    assert got.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"kafkad_proxy_observed_open_transactions 0.0" in got
