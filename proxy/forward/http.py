"""``kafkad proxy --http HOST:PORT``: the observed transaction view as a page and as metrics.

``/`` (or ``/transactions``) is an HTML page, ``/transactions.json`` the same data, and
``/metrics`` the Prometheus text exposition (``metrics_text``). Every name and every page says
what this is: transactions as observed in the traffic through the proxy
(``proxy/forward/txn_view.py``), not the upstream cluster's state.

The page is the broker console's (``proxy/http/``): its template
``observed_transactions.html`` extends the console's ``base.html`` (same look; a nav of the
proxy's own pages; no event stream), with the banner "observed through the proxy". The
server is a deliberately small HTTP/1.1 one (GET only, one request per connection, the
request head read within ``READ_TIMEOUT_S`` and at most ``MAX_HEAD`` bytes,
``Connection: close``): the console's app serves a kafkad broker's own state, which a proxy
does not have. The metric names follow its ``kafkad_...`` convention for kafkad's own
machinery (``proxy/metrics/__init__.py``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import jinja2
import trio
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily
from prometheus_client.registry import Collector

from proxy.forward.txn_view import (
    ADD_OFFSETS,
    ADD_PARTITIONS,
    END_TXN,
    INIT_PRODUCER_ID,
    TXN_OFFSET_COMMIT,
    TxnObserver,
)

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

log = logging.getLogger("kafkad.proxy")

READ_TIMEOUT_S = 5.0
MAX_HEAD = 16 * 1024
OBSERVED = "observed in the traffic through kafkad proxy, not broker state"
API_NAMES = {
    INIT_PRODUCER_ID: "InitProducerId",
    ADD_PARTITIONS: "AddPartitionsToTxn",
    ADD_OFFSETS: "AddOffsetsToTxn",
    END_TXN: "EndTxn",
    TXN_OFFSET_COMMIT: "TxnOffsetCommit",
}


class ObservedCollector(Collector):
    def __init__(self, txns: TxnObserver) -> None:
        self.txns = txns

    def collect(self) -> Iterator[Metric]:
        t = self.txns.totals
        end = CounterMetricFamily(
            "kafkad_proxy_observed_end_txn",
            f"EndTxn requests answered, by outcome ({OBSERVED})",
            labels=["outcome"],
        )
        end.add_metric(["commit"], t.commits)
        end.add_metric(["abort"], t.aborts)
        end.add_metric(["error"], t.end_errors)
        yield end
        yield CounterMetricFamily(
            "kafkad_proxy_observed_producer_fenced",
            f"producers seen fenced: PRODUCER_FENCED / INVALID_PRODUCER_EPOCH answers, or a "
            f"new InitProducerId while a transaction was open ({OBSERVED})",
            value=t.fenced,
        )
        yield CounterMetricFamily(
            "kafkad_proxy_observed_init_producer_id",
            f"InitProducerId requests of transactional producers answered ({OBSERVED})",
            value=t.init_producer_id,
        )
        yield GaugeMetricFamily(
            "kafkad_proxy_observed_open_transactions",
            f"transactional ids whose last request began a transaction not yet ended ({OBSERVED})",
            value=self.txns.open_transactions(),
        )
        yield GaugeMetricFamily(
            "kafkad_proxy_observed_transactional_ids",
            f"transactional ids seen ({OBSERVED})",
            value=len(self.txns.ids),
        )
        latency = SummaryMetricFamily(
            "kafkad_proxy_observed_txn_request_seconds",
            f"time from forwarding a transactional request to its answer ({OBSERVED})",
            labels=["api"],
        )
        for key, name in API_NAMES.items():
            count = t.latency_count.get(key, 0)
            latency.add_metric([name], count, t.latency_sum_ms.get(key, 0.0) / 1000)
        yield latency


def registry(txns: TxnObserver) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(ObservedCollector(txns))
    return reg


def _latency(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} ms"


@functools.cache
def _templates() -> jinja2.Environment:
    """The console's templates (``proxy/http/templates``), for the page in its look."""
    from proxy.http.app import TEMPLATES, format_ms

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["ms"] = format_ms
    env.filters["latency"] = _latency
    return env


def page(snapshot: dict[str, Any], now_ms: int | None = None) -> str:
    """The HTML page of the view: the console's transactions page as the proxy sees them
    (``observed_transactions.html``), labelled "observed through the proxy"."""
    return (
        _templates()
        .get_template("observed_transactions.html")
        .render(
            title="Observed transactions",
            t=snapshot["totals"],
            txns=snapshot["transactional_ids"],
            admin=False,
            fingerprint=None,  # no event stream: the page is reloaded for newer traffic
            now_ms=int(time.time() * 1000) if now_ms is None else now_ms,
        )
    )


def respond(txns: TxnObserver, method: str, path: str) -> tuple[int, str, bytes]:
    """(status, content type, body) for one request."""
    if method != "GET":
        return 405, "text/plain", b"GET only\n"
    path = path.split("?", 1)[0]
    if path == "/metrics":
        return 200, CONTENT_TYPE_LATEST, generate_latest(registry(txns))
    if path in ("/", "/transactions"):
        return 200, "text/html; charset=utf-8", page(txns.snapshot()).encode()
    if path == "/transactions.json":
        return 200, "application/json", json.dumps(txns.snapshot(), indent=1).encode()
    return 404, "text/plain", b"not found\n"


REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}


async def handle(stream: trio.SocketStream, txns: TxnObserver) -> None:
    async with stream:
        head = b""
        with trio.move_on_after(READ_TIMEOUT_S):
            while b"\r\n\r\n" not in head and len(head) < MAX_HEAD:
                data = await stream.receive_some(4096)
                if not data:
                    break
                head += data
        parts = head.split(b"\r\n", 1)[0].split()
        if len(parts) != 3:
            status, ctype, body = 400, "text/plain", b"bad request\n"
        else:
            status, ctype, body = respond(txns, parts[0].decode("latin-1"), parts[1].decode())
        reply = (
            f"HTTP/1.1 {status} {REASONS[status]}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode() + body
        with (
            trio.move_on_after(READ_TIMEOUT_S),
            contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError),
        ):
            await stream.send_all(reply)


async def serve_http(
    host: str, port: int, txns: TxnObserver, *, task_status: trio.TaskStatus[str]
) -> None:
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()
    url = f"http://{bound[0]}:{bound[1]}/"
    log.info("proxy: observed transactions at %s", url)
    task_status.started(url)

    async def one(stream: trio.SocketStream) -> None:
        try:
            await handle(stream, txns)
        except Exception:  # one page's failure is not the proxy's
            log.exception("proxy http: a request failed")

    await trio.serve_listeners(one, listeners)
