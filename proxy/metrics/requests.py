"""Counters fed on the request path: per API (requests by version, errors by code, handler
latency) and per topic (bytes and messages in, bytes out).

The hot path is one ``RequestStats.record`` call per request (``proxy/connection.py``, once the
reply is written; ``proxy/dispatch.py`` for a caller without a ``stats`` list): a list index by
API key, integer increments, one ``bisect`` into fixed latency buckets, and for each error code
in the response one dict increment keyed by the ``ErrorCode`` member. Nothing is
formatted until a scrape reads the counters (``collectors.py``).

Latency is the handler's time (decode done to response object built), not Kafka's
``TotalTimeMs`` (queue + local + remote + send): kafkad has no request queue, and the send is
shared by every reply gathered into one write. The JMX-style quantiles are computed at scrape
time from the cumulative buckets (each reported as its bucket's upper bound), where Kafka's
Yammer histogram uses an exponentially decaying reservoir; the true histogram is exported as
well (``kafkad_request_duration_seconds``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable
from typing import Any

from kio.schema.errors import ErrorCode

# Upper bounds in seconds of the latency buckets; a last bucket (+Inf) follows.
LATENCY_BOUNDS: tuple[float, ...] = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
MAX_VERSION = 32  # versions above are counted under this index (no API has that many)


def api_name(fn_name: str) -> str:
    """Kafka's ApiKeys name from a handler function's name: ``add_partitions_to_txn`` ->
    ``AddPartitionsToTxn``."""
    return "".join(part.capitalize() for part in fn_name.split("_"))


def _top_level(response: Any) -> Iterable[ErrorCode]:
    code = getattr(response, "error_code", None)
    return (code,) if code is not None else ()


def _produce_errors(response: Any) -> Iterable[ErrorCode]:
    # no ``responses``: acks=0, nothing sent (dispatch's NO_RESPONSE)
    topics = getattr(response, "responses", ())
    return [p.error_code for t in topics for p in t.partition_responses]


def _fetch_errors(response: Any) -> Iterable[ErrorCode]:
    top = getattr(response, "error_code", ErrorCode.none)  # v7+
    if top is not ErrorCode.none:
        return (top,)
    return [p.error_code for t in response.responses for p in t.partitions]


# Kafka's AbstractResponse.errorCounts, for the APIs whose errors are per partition; every
# other API counts its top-level error code (if it has one).
_ERRORS_OF: dict[int, Callable[[Any], Iterable[ErrorCode]]] = {0: _produce_errors, 1: _fetch_errors}


class ApiStats:
    """One API key's counters."""

    __slots__ = ("buckets", "by_version", "errors", "errors_of", "max_s", "name", "sum_s")

    def __init__(self, name: str, errors_of: Callable[[Any], Iterable[ErrorCode]]) -> None:
        self.name = name
        self.by_version = [0] * (MAX_VERSION + 1)
        self.buckets = [0] * (len(LATENCY_BOUNDS) + 1)
        self.sum_s = 0.0
        self.max_s = 0.0
        self.errors: dict[ErrorCode, int] = {}
        self.errors_of = errors_of

    @property
    def count(self) -> int:
        return sum(self.buckets)

    def quantile_ms(self, q: float) -> float:
        """The ``q`` quantile of the latency since start, as its bucket's upper bound (the
        largest latency seen for the last bucket); NaN before the first request."""
        total = sum(self.buckets)
        if total == 0:
            return float("nan")
        rank, seen = q * total, 0
        for i, n in enumerate(self.buckets):
            seen += n
            if seen >= rank and n:
                bound = LATENCY_BOUNDS[i] if i < len(LATENCY_BOUNDS) else self.max_s
                return min(bound, self.max_s) * 1000
        return self.max_s * 1000


class RequestStats:
    """Counters per API key, indexed by key (pre-built for every served key)."""

    def __init__(self, apis: dict[int, str]) -> None:
        size = max(apis, default=0) + 1
        self.by_key: list[ApiStats | None] = [None] * size
        for key, name in apis.items():
            self.by_key[key] = ApiStats(name, _ERRORS_OF.get(key, _top_level))

    def record(self, api_key: int, version: int, elapsed_s: float, response: Any) -> None:
        """One answered request (``response`` None: none sent, e.g. acks=0)."""
        s = self.by_key[api_key]
        if s is None:
            return
        s.by_version[version if version < MAX_VERSION else MAX_VERSION] += 1
        s.buckets[bisect_left(LATENCY_BOUNDS, elapsed_s)] += 1
        s.sum_s += elapsed_s
        if elapsed_s > s.max_s:
            s.max_s = elapsed_s
        if response is not None:
            errors = s.errors
            for code in s.errors_of(response):
                errors[code] = errors.get(code, 0) + 1

    def apis(self) -> list[ApiStats]:
        return [s for s in self.by_key if s is not None]


class TopicStats:
    """Per topic: [bytes in, messages in, bytes out] since start (Kafka's BrokerTopicMetrics
    BytesInPerSec, MessagesInPerSec, BytesOutPerSec). Topics deleted since are dropped at the
    next scrape (``forget``), as Kafka removes a deleted topic's metrics; their counts stay in
    ``deleted`` so the all-topics totals never go down (Kafka's all-topics meters keep them)."""

    def __init__(self) -> None:
        self.by_topic: dict[str, list[int]] = {}
        self.deleted = [0, 0, 0]

    def produced(self, topic: str, size: int, records: int) -> None:
        c = self.by_topic.get(topic)
        if c is None:
            c = self.by_topic[topic] = [0, 0, 0]
        c[0] += size
        c[1] += records

    def fetched(self, topic: str, size: int) -> None:
        c = self.by_topic.get(topic)
        if c is None:
            c = self.by_topic[topic] = [0, 0, 0]
        c[2] += size

    def forget(self, live: Callable[[str], bool]) -> None:
        for name in [n for n in self.by_topic if not live(n)]:
            for i, count in enumerate(self.by_topic.pop(name)):
                self.deleted[i] += count


class MarkerStats:
    """Transaction-marker writes as the transaction coordinator sees them: count and
    cumulative latency buckets (``Broker.write_txn_marker``)."""

    def __init__(self) -> None:
        self.buckets = [0] * (len(LATENCY_BOUNDS) + 1)
        self.sum_s = 0.0

    def observe(self, elapsed_s: float) -> None:
        self.buckets[bisect_left(LATENCY_BOUNDS, elapsed_s)] += 1
        self.sum_s += elapsed_s


class CleanerStats:
    """Log-cleaner passes and the bytes they read and wrote (``Broker.cleaner_loop``)."""

    def __init__(self) -> None:
        self.passes = 0
        self.bytes_read = 0
        self.bytes_written = 0

    def observe(self, bytes_read: int, bytes_written: int) -> None:
        self.passes += 1
        self.bytes_read += bytes_read
        self.bytes_written += bytes_written


class BrokerMetrics:
    """Every counter the request path and the background work feed; one per broker."""

    def __init__(self, apis: dict[int, str] | None = None) -> None:
        self.requests = RequestStats(served_api_names() if apis is None else apis)
        self.topics = TopicStats()
        self.markers = MarkerStats()
        self.cleaner = CleanerStats()


def served_api_names() -> dict[int, str]:
    """Kafka's name of every API key kafkad serves."""
    from proxy.registry import api_names

    return {key: api_name(name) for key, name in api_names().items()}
