"""Byte-rate quotas per (user, client id): Kafka's ``ClientQuotaManager`` with its default
quota callback, for ``producer_byte_rate`` (Produce) and ``consumer_byte_rate`` (Fetch).
Pure: times are given in milliseconds, nothing sleeps.

Theory of operation
-------------------
Each request is charged to a *sensor* named by its metric tags, a (user, client id) pair in
which either may be blanked. Which pair depends on the quotas configured (Kafka's
``quotaMetricTags``): while only client-id quotas were ever set, ("", client id); only user
quotas, (user, ""); only (user, client-id) quotas, both; otherwise the first of the eight
entity combinations that has a quota decides:

    1 user + client id   2 user + default client id   3 user
    4 default user + client id   5 default user + default client id   6 default user
    7 client id   8 default client id

(1, 2, 4, 5 give (user, client id), 3 and 6 (user, ""), 7 and 8 ("", client id).) The quota of
a sensor is then looked up from its tags (Kafka's ``quotaLimit``): both tags set, in the order
1, 2, 4, 5; only the user, 3 then 6; only the client id, 7 then 8; none found is unlimited.
Like Kafka, the set of quota kinds seen only grows until a restart, and nothing is recorded
until a first quota is set (``enabled``): with no quotas the cost is one attribute test.

A sensor measures a rate (Kafka's ``Rate`` over a ``SampledTotal``): ``quota.window.num``
samples of ``quota.window.size.seconds`` each; a sample is complete when its window has
passed, and a sample with no event for ``samples * window`` is reset. The rate is the total of
the samples over the time since the oldest sample started, but never less than
``samples - 1`` whole windows (so a new client is not throttled for its first burst).

A request records its bytes (Produce: the request's size; Fetch: the response's) and, if the
rate is then above the quota, is throttled for ``round((rate - quota) / quota * window)`` ms:
the time at which the rate falls back to the quota if nothing more is sent. KIP-219: the
response is sent at once carrying that throttle time, and the broker reads nothing more from
the connection until it has passed (``proxy/quotas/enforce.py`` wires this in). A throttled
Fetch is answered empty and its bytes are taken back out of the sensor (Kafka's
``unrecordQuotaSensor``). A Fetch may ask for at most ``quota * (samples - 1) * window``
bytes (``max_value_in_window``).

The same manager serves ``request_percentage`` (Kafka's ``ClientRequestQuotaManager``): the
value recorded is the time spent handling the request as a percentage of a second
(``proxy/quotas/request_time.py``), and the throttle time is capped at one window
(``max_throttle_ms``, Kafka's ``boundedThrottleTime``).

A sensor no request was charged to for an hour is dropped (Kafka's
``InactiveSensorExpirationTimeSeconds``, checked every 30 s as its ``ExpireSensorTask``), so a
broker that saw many client ids once does not keep them all.

Not modelled: Kafka's metrics of these sensors. ``controller_mutation_rate`` has its own token
buckets (``proxy/quotas/mutation.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final

from proxy.quotas.model import CLIENT_ID, USER, Quotas

# Kafka's QuotaTypes
NO_QUOTAS, CLIENT_ID_QUOTAS, USER_QUOTAS, USER_CLIENT_ID_QUOTAS = 0, 1, 2, 4


class _Default:
    def __repr__(self) -> str:
        return "<default>"


DEFAULT: Final = _Default()
Name = str | _Default | None  # None: the entity type is absent
QuotaKey = tuple[Name, Name]  # (user, client id)
UNLIMITED: Final = float(2**63 - 1)  # Long.MAX_VALUE: a sensor with no quota


@dataclass(slots=True)
class _Sample:
    start_ms: int
    last_event_ms: int
    value: float = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_event_ms = now_ms
        self.value = 0.0


@dataclass(slots=True)
class Rate:
    """Kafka's ``Rate`` (per second) over a ``SampledTotal`` with ``samples + 1`` slots."""

    samples: int
    window_ms: int
    _samples: list[_Sample] = field(default_factory=list)
    _current: int = 0

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples[self._current]

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current >= len(self._samples):
                sample = _Sample(now_ms, now_ms)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.reset(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire:
                sample.reset(now_ms)

    def window_size(self, now_ms: int) -> int:
        self._purge(now_ms)
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        elapsed = now_ms - min(s.start_ms for s in self._samples)
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        self._purge(now_ms)
        total = sum(s.value for s in self._samples)
        return total / (self.window_size(now_ms) / 1000)


def _java_round(x: float) -> int:
    return math.floor(x + 0.5)


def throttle_time_ms(rate: Rate, bound: float, measured: float, now_ms: int) -> int:
    """Kafka's ``QuotaUtils.throttleTime``: how long until ``rate``, measured at ``measured``
    (above ``bound``), is back at its bound: ``round((measured - bound) / bound * window)``."""
    return _java_round((measured - bound) / bound * rate.window_size(now_ms))


def _java_long_to_int(x: int) -> int:
    """``(long).toInt``: the low 32 bits, signed (after ``Math.round`` saturated at a long)."""
    x = max(-(2**63), min(x, 2**63 - 1))
    return (x + 2**31) % 2**32 - 2**31


SENSOR_EXPIRY_MS: Final = 3600 * 1000  # Kafka's InactiveSensorExpirationTimeSeconds
EXPIRY_CHECK_MS: Final = 30 * 1000  # Kafka's Metrics ExpireSensorTask period


class QuotaManager:
    """One quota kind (produce or fetch bytes, request time): the quotas and the sensors.
    ``max_throttle_ms``: the longest throttle (None: unbounded; the request quota's is one
    window)."""

    def __init__(
        self, samples: int = 11, window_s: int = 1, max_throttle_ms: int | None = None
    ) -> None:
        self.samples = samples
        self.window_ms = window_s * 1000
        self.max_throttle_ms = max_throttle_ms
        self.types = NO_QUOTAS
        self.quotas: dict[QuotaKey, float] = {}
        self.sensors: dict[tuple[str, str], Rate] = {}
        self._last_record: dict[tuple[str, str], int] = {}
        self._next_expiry_ms: int | None = None

    @property
    def enabled(self) -> bool:
        return self.types != NO_QUOTAS

    def set_quotas(self, quotas: dict[QuotaKey, float]) -> None:
        """Every quota of this kind (Kafka applies them one by one; the kinds seen add up)."""
        for user, client in quotas:
            if user is not None:
                self.types |= USER_CLIENT_ID_QUOTAS if client is not None else USER_QUOTAS
            elif client is not None:
                self.types |= CLIENT_ID_QUOTAS
        self.quotas = dict(quotas)

    def metric_tags(self, user: str, client_id: str) -> tuple[str, str]:
        types, q = self.types, self.quotas
        if types in (NO_QUOTAS, CLIENT_ID_QUOTAS):
            return "", client_id
        if types == USER_QUOTAS:
            return user, ""
        if types == USER_CLIENT_ID_QUOTAS:
            return user, client_id
        if (user, client_id) in q or (user, DEFAULT) in q:
            return user, client_id
        if (user, None) in q:
            return user, ""
        if (DEFAULT, client_id) in q or (DEFAULT, DEFAULT) in q:
            return user, client_id
        if (DEFAULT, None) in q:
            return user, ""
        return "", client_id

    def limit(self, tags: tuple[str, str]) -> float:
        found = self._configured(tags)
        return UNLIMITED if found is None else found

    def _configured(self, tags: tuple[str, str]) -> float | None:
        user, client_id = tags
        order: tuple[QuotaKey, ...] = ()
        if user and client_id:
            order = ((user, client_id), (user, DEFAULT), (DEFAULT, client_id), (DEFAULT, DEFAULT))
        elif user:
            order = ((user, None), (DEFAULT, None))
        elif client_id:
            order = ((None, client_id), (None, DEFAULT))
        for key in order:
            if key in self.quotas:
                return self.quotas[key]
        return None

    def _sensor(self, tags: tuple[str, str], now_ms: int) -> Rate:
        if self._next_expiry_ms is None:
            self._next_expiry_ms = now_ms + EXPIRY_CHECK_MS
        elif now_ms >= self._next_expiry_ms:
            self._next_expiry_ms = now_ms + EXPIRY_CHECK_MS
            self.expire(now_ms)
        self._last_record[tags] = now_ms
        rate = self.sensors.get(tags)
        if rate is None:
            rate = self.sensors[tags] = Rate(self.samples, self.window_ms)
        return rate

    def expire(self, now_ms: int) -> None:
        """Drop the sensors nothing was recorded to for ``SENSOR_EXPIRY_MS``."""
        idle = [t for t, last in self._last_record.items() if now_ms - last > SENSOR_EXPIRY_MS]
        for tags in idle:
            del self._last_record[tags]
            self.sensors.pop(tags, None)

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Charge ``value``; the throttle time in ms (0: within the quota). Kafka's
        ``maybeRecordAndGetThrottleTimeMs``, an int: a time past 2**31 - 1 ms wraps as
        Kafka's ``.toInt`` does, and a negative one throttles nothing (``max`` with the
        request quota's 0 in KafkaApis)."""
        if not self.enabled:
            return 0
        tags = self.metric_tags(user, client_id)
        rate = self._sensor(tags, now_ms)
        rate.record(value, now_ms)
        bound = self.limit(tags)
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        ms = throttle_time_ms(rate, bound, measured, now_ms)
        if self.max_throttle_ms is not None:
            ms = min(ms, self.max_throttle_ms)
        return max(_java_long_to_int(ms), 0)

    def record_no_throttle(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Charge ``value`` without checking the quota (Kafka's ``recordNoThrottle``): it
        counts towards the next request's throttle."""
        if self.enabled:
            self._sensor(self.metric_tags(user, client_id), now_ms).record(value, now_ms)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        self._sensor(self.metric_tags(user, client_id), now_ms).record(-value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float:
        """The most a single Fetch may ask for (Kafka's ``getMaxValueInQuotaWindow``)."""
        if not self.enabled:
            return math.inf
        bound = self._configured(self.metric_tags(user, client_id))
        if bound is None:
            return math.inf
        return bound * (self.samples - 1) * (self.window_ms // 1000)


def quota_keys(quotas: Quotas, key: str) -> dict[QuotaKey, float]:
    """The (user, client id) quotas of ``key`` among the stored client quotas."""
    out: dict[QuotaKey, float] = {}
    for entity, values in quotas.items():
        if key not in values:
            continue
        types = dict(entity)
        if not types.keys() <= {USER, CLIENT_ID}:
            continue

        def name(t: str, types: dict[str, str | None] = types) -> Name:
            if t not in types:
                return None
            n = types[t]
            return DEFAULT if n is None else n

        out[(name(USER), name(CLIENT_ID))] = values[key]
    return out
