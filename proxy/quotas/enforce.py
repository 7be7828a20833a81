"""Where the byte-rate quotas (``proxy/quotas/throttle.py``) meet requests: the dispatcher's
two hooks around the Produce and Fetch handlers, and one call in the Fetch handler.

- ``limit_fetch`` (dispatcher, before a Fetch): ``max_bytes`` no more than the quota allows in
  a window, ``min_bytes`` no more than that (Kafka's ``handleFetchRequest``);
- ``charge_fetch`` (the Fetch handler, before its fetch session remembers what it answers, as
  Kafka's ``getResponseSize`` comes before ``updateAndGenerateResponseData``): charges the
  response's size (body plus 4 bytes: ``FetchResponse.sizeOf``); if throttled, the handler
  answers empty with the throttle time and leaves the session as it was
  (``getThrottledResponse``), and the bytes are taken back out;
- ``settle`` (dispatcher, after the handler): Produce charges the request's size (the frame
  without its length prefix: Kafka's ``request.sizeInBytes``) and a throttled answer carries
  the throttle time; for either API a throttle calls ``mute(ms)``, so the connection reads
  nothing more for that long (KIP-219). A Produce with acks=0 has no answer but still mutes.

Times come from trio's clock (monotonic; a MockClock in tests). The user is the connection's
principal name, the client id the request header's (null as "").
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable
from typing import Any

import trio
from kio.static.primitive import i32Timedelta

from proxy.context import RequestContext
from proxy.fetch_topics import replica_id
from proxy.outcomes import NO_RESPONSE
from proxy.quotas.model import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, Quotas
from proxy.quotas.throttle import QuotaManager, quota_keys
from wire.codec import encode_response

PRODUCE_KEY, FETCH_KEY = 0, 1
QUOTA_KEYS = frozenset({PRODUCE_KEY, FETCH_KEY})
INT_MAX = 2**31 - 1


class Throttles:
    """The broker's produce and fetch quota managers, following the quota store."""

    def __init__(self, samples: int = 11, window_s: int = 1) -> None:
        self.produce = QuotaManager(samples, window_s)
        self.fetch = QuotaManager(samples, window_s)
        self.enabled = False

    def update(self, quotas: Quotas) -> None:
        self.produce.set_quotas(quota_keys(quotas, PRODUCER_BYTE_RATE))
        self.fetch.set_quotas(quota_keys(quotas, CONSUMER_BYTE_RATE))
        self.enabled = self.produce.enabled or self.fetch.enabled


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
    """The answer to send (with its throttle time) after charging the request's bytes."""
    api_key = int(ctx.header.api_key)
    user, client_id = _who(ctx)
    if api_key == PRODUCE_KEY:
        ms = throttles.produce.record(user, client_id, frame_size, _now_ms())
        if ms <= 0:
            return answer
        if mute is not None:
            mute(ms)
        if answer is NO_RESPONSE:
            return answer
        return dataclasses.replace(answer, throttle_time=datetime.timedelta(milliseconds=ms))
    if api_key != FETCH_KEY or mute is None:
        return answer
    throttle = getattr(answer, "throttle_time", None)  # set by charge_fetch
    if throttle:
        mute(round(throttle.total_seconds() * 1000))
    return answer


def charge_fetch(ctx: RequestContext, response: Any) -> i32Timedelta | None:
    """Called by the Fetch handler with the answer it would give, before its fetch session
    remembers anything: charge its size; the throttle time if over the quota (the handler
    then answers empty and leaves the session as it was), its bytes taken back out."""
    throttles: Throttles = ctx.broker.throttles
    size = fetch_response_size(len(encode_response(ctx.header, response)), ctx.version)
    user, client_id = _who(ctx)
    now = _now_ms()
    ms = throttles.fetch.record(user, client_id, size, now)
    if ms <= 0:
        return None
    throttles.fetch.unrecord(user, client_id, size, now)
    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))
