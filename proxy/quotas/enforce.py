"""Where the client quotas (``proxy/quotas/throttle.py``) meet requests: the dispatcher's
hooks around the handlers, and one call in the Fetch handler. Byte rates apply to Produce and
Fetch, the request-time quota (``request_percentage``) to every request but the exempt ones
(``EXEMPT_KEYS``, a follower's Fetch and an acks=0 Produce, as Kafka exempts them).

- ``limit_fetch`` (dispatcher, before a Fetch): ``max_bytes`` no more than the quota allows in
  a window, ``min_bytes`` no more than that (Kafka's ``handleFetchRequest``);
- ``charge_fetch`` (the Fetch handler, before its fetch session remembers what it answers, as
  Kafka's ``getResponseSize`` comes before ``updateAndGenerateResponseData``): charges the
  response's size (body plus 4 bytes: ``FetchResponse.sizeOf``); if throttled, the handler
  answers empty with the throttle time and leaves the session as it was
  (``getThrottledResponse``), and the bytes are taken back out;
  the request time so far is charged there too (Kafka's ``handleFetchRequest``: a Fetch over
  either quota is answered empty), the rest of it in ``settle`` without a throttle;
- ``start`` (dispatcher, before the handler, while a request quota exists): the request's
  time counts from there (``proxy/quotas/request_time.py``);
- ``settle`` (dispatcher, after the handler): Produce charges the request's size (the frame
  without its length prefix: Kafka's ``request.sizeInBytes``), every request its time as a
  percentage of a second, and a throttled answer carries the longer throttle time (Kafka's
  ``max(bandwidthThrottleTimeMs, requestThrottleTimeMs)``); any throttle calls ``mute(ms)``,
  so the connection reads nothing more for that long (KIP-219). A Produce with acks=0 has no
  answer but still mutes.

Times come from trio's clock (monotonic; a MockClock in tests). The user is the connection's
principal name, the client id the request header's (null as "").
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable
from typing import Any

import trio
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from proxy.context import RequestContext
from proxy.fetch_topics import replica_id
from proxy.outcomes import NO_RESPONSE
from proxy.quotas.model import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    Quotas,
)
from proxy.quotas.mutation import THROTTLING_MESSAGE, MutationQuotaManager
from proxy.quotas.request_time import TaskClock
from proxy.quotas.throttle import QuotaManager, quota_keys
from wire.codec import encode_response
from wire.values import INT_MAX

PRODUCE_KEY, FETCH_KEY = 0, 1
# Never throttled: WriteTxnMarkers (a cluster action: Kafka's sendResponseExemptThrottle) and
# SASL's own requests (answered by Kafka's authenticator, outside KafkaApis and its quotas).
SASL_HANDSHAKE_KEY, WRITE_TXN_MARKERS_KEY, SASL_AUTHENTICATE_KEY = 17, 27, 36
EXEMPT_KEYS = frozenset({SASL_HANDSHAKE_KEY, WRITE_TXN_MARKERS_KEY, SASL_AUTHENTICATE_KEY})
PERCENT_PER_SECOND = 100.0  # Kafka's nanosToPercentage: a second of work is 100 (%)


class Throttles:
    """The broker's produce, fetch, request-time and controller mutation quota managers,
    following the quota store. The first three sample ``quota.window.num`` windows of
    ``quota.window.size.seconds``; the mutation quota its own ``controller.quota.window.num``
    of ``controller.quota.window.size.seconds`` (Kafka's QuotaConfig)."""

    def __init__(
        self,
        samples: int = 11,
        window_s: int = 1,
        controller_samples: int = 11,
        controller_window_s: int = 1,
    ) -> None:
        self.produce = QuotaManager(samples, window_s)
        self.fetch = QuotaManager(samples, window_s)
        # Kafka's ClientRequestQuotaManager: a throttle is at most one window
        self.request = QuotaManager(samples, window_s, max_throttle_ms=window_s * 1000)
        self.mutation = MutationQuotaManager(controller_samples, controller_window_s)
        self.clock: TaskClock | None = None
        self.enabled = False

    def update(self, quotas: Quotas) -> None:
        self.produce.set_quotas(quota_keys(quotas, PRODUCER_BYTE_RATE))
        self.fetch.set_quotas(quota_keys(quotas, CONSUMER_BYTE_RATE))
        self.request.set_quotas(quota_keys(quotas, REQUEST_PERCENTAGE))
        self.mutation.set_quotas(quota_keys(quotas, CONTROLLER_MUTATION_RATE))
        self.enabled = any(
            m.enabled for m in (self.produce, self.fetch, self.request, self.mutation)
        )
        if self.request.enabled and self.clock is None:
            self.clock = TaskClock()
            trio.lowlevel.add_instrument(self.clock)


def start(throttles: Throttles) -> None:
    """Before the handler: the request's time counts from now (if a request quota exists)."""
    if throttles.clock is not None:
        throttles.clock.start()


def stop(throttles: Throttles) -> float:
    """The request's time as Kafka's request quota counts it (percent of a second)."""
    if throttles.clock is None:
        return 0.0
    return throttles.clock.stop() * PERCENT_PER_SECOND


def _who(ctx: RequestContext) -> tuple[str, str]:
    return ctx.principal.name, ctx.header.client_id or ""


def _from_follower(req: Any) -> bool:
    """A replica's fetch (never throttled)."""
    return replica_id(req) >= 0


def _now_ms() -> int:
    return int(trio.current_time() * 1000)


def fetch_response_size(frame_size: int, version: int) -> int:
    """``FetchResponse.sizeOf`` from an encoded response frame: the body plus 4, i.e. the frame
    less its length prefix and response header (correlation id; v12+ adds empty tagged
    fields)."""
    return frame_size - 4 - (5 if version >= 12 else 4) + 4


def limit_fetch(throttles: Throttles, ctx: RequestContext, req: Any) -> Any:
    if not throttles.fetch.enabled or _from_follower(req):
        return req
    cap = throttles.fetch.max_value_in_window(*_who(ctx))
    window_bytes = INT_MAX if cap >= INT_MAX else int(cap)  # Java's double-to-int
    if window_bytes >= req.max_bytes:
        return req
    return dataclasses.replace(
        req, max_bytes=type(req.max_bytes)(window_bytes), min_bytes=min(req.min_bytes, window_bytes)
    )


def settle(
    throttles: Throttles,
    ctx: RequestContext,
    frame_size: int,
    req: Any,
    answer: Any,
    mute: Callable[[int], None] | None,
) -> Any:
    """The answer to send (with its throttle time) after charging the request's bytes and
    time."""
    api_key = int(ctx.header.api_key)
    user, client_id = _who(ctx)
    spent = stop(throttles)
    now = _now_ms()
    if api_key == PRODUCE_KEY:
        ms = throttles.produce.record(user, client_id, frame_size, now)
        if req.acks != 0:  # Kafka charges no request time to an acks=0 Produce
            ms = max(ms, throttles.request.record(user, client_id, spent, now))
    elif api_key == FETCH_KEY:
        if _from_follower(req):
            return answer
        throttle = getattr(answer, "throttle_time", None)  # set by charge_fetch
        ms = round(throttle.total_seconds() * 1000) if throttle else 0
        if ctx.request_time_charged is None:  # charge_fetch did not charge the request time
            ms = max(ms, throttles.request.record(user, client_id, spent, now))
        else:  # the rest of it, for the next request (Kafka: the network thread's time)
            rest = spent - ctx.request_time_charged
            throttles.request.record_no_throttle(user, client_id, rest, now)
    else:  # (CreateTopics, CreatePartitions, DeleteTopics: their mutation throttle, if any)
        throttle = getattr(answer, "throttle_time", None)
        ms = round(throttle.total_seconds() * 1000) if throttle else 0
        ms = max(ms, throttles.request.record(user, client_id, spent, now))
    return _throttled(answer, ms, mute)


def settle_error(
    throttles: Throttles,
    ctx: RequestContext,
    req: Any,
    response: Any,
    mute: Callable[[int], None] | None,
) -> Any:
    """An error answer to the whole request (Kafka's ``sendErrorResponseMaybeThrottle``): the
    request's time is charged to the request quota and a throttle mutes the connection and is
    in the answer (no bytes are charged: nothing was produced or fetched)."""
    spent = stop(throttles)
    if int(ctx.header.api_key) == FETCH_KEY and _from_follower(req):
        return response
    ms = throttles.request.record(*_who(ctx), spent, _now_ms())
    return _throttled(response, ms, mute)


def _throttled(answer: Any, ms: int, mute: Callable[[int], None] | None) -> Any:
    """A throttle of ``ms`` (if any): the connection muted for it (KIP-219) and the time in the
    answer, when the answer has a throttle field."""
    if ms <= 0:
        return answer
    if mute is not None:
        mute(ms)
    if answer is NO_RESPONSE or not hasattr(answer, "throttle_time"):
        return answer
    return dataclasses.replace(answer, throttle_time=datetime.timedelta(milliseconds=ms))


def charge_fetch(ctx: RequestContext, response: Any) -> i32Timedelta | None:
    """Called by the Fetch handler with the answer it would give, before its fetch session
    remembers anything: charge its size and the request's time so far; the longer throttle
    time if over either quota (the handler then answers empty and leaves the session as it
    was), its bytes taken back out."""
    throttles: Throttles = ctx.broker.throttles
    user, client_id = _who(ctx)
    now = _now_ms()
    ms = size = 0
    if throttles.fetch.enabled:
        size = fetch_response_size(len(encode_response(ctx.header, response)), ctx.version)
        ms = throttles.fetch.record(user, client_id, size, now)
    if throttles.clock is not None:
        ctx.request_time_charged = spent = throttles.clock.elapsed() * PERCENT_PER_SECOND
        ms = max(ms, throttles.request.record(user, client_id, spent, now))
    if ms <= 0:
        return None
    if throttles.fetch.enabled:
        throttles.fetch.unrecord(user, client_id, size, now)
    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))


class MutationQuota:
    """One CreateTopics / CreatePartitions / DeleteTopics request's controller mutation quota
    (``proxy/quotas/mutation.py``): strict from ``strict_since`` (the version)."""

    def __init__(self, ctx: RequestContext, strict_since: int) -> None:
        self._mutation = ctx.broker.throttles.mutation
        self._user, self._client_id = _who(ctx)
        self._strict = ctx.version >= strict_since
        self._last_throttle_ms = 0  # Kafka's AbstractControllerMutationQuota
        self._last_recorded_ms = 0

    @property
    def enabled(self) -> bool:
        return self._mutation.enabled

    def charge(self, partitions: int) -> tuple[ErrorCode, str] | None:
        """THROTTLING_QUOTA_EXCEEDED if this mutation is refused, else None (charged)."""
        if not self._mutation.enabled:
            return None
        now = _now_ms()
        refused, ms = self._mutation.charge(
            self._user, self._client_id, partitions, self._strict, now
        )
        if ms > 0:
            self._last_throttle_ms, self._last_recorded_ms = ms, now
        return (ErrorCode.throttling_quota_exceeded, THROTTLING_MESSAGE) if refused else None

    def throttle_time(self) -> i32Timedelta:
        """The answer's throttle time (the dispatcher mutes the connection for it): the last
        one set, less the time since (Kafka's ``throttleTime``)."""
        ms = 0
        if self._last_throttle_ms:
            ms = max(0, self._last_throttle_ms - (_now_ms() - self._last_recorded_ms))
        return i32Timedelta.parse(datetime.timedelta(milliseconds=min(ms, INT_MAX)))
