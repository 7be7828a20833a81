"""``controller_mutation_rate`` (KIP-599): Kafka's ``ControllerMutationQuotaManager``. Pure:
times are given in milliseconds.

Each (user, client id) sensor, chosen as for the other quotas (``QuotaManager.metric_tags``),
holds a token bucket (Kafka's ``TokenBucket``): it refills at the quota (partitions per second)
up to a burst of ``samples * window * quota`` and starts full. CreateTopics, CreatePartitions
and DeleteTopics charge it one token per partition created or deleted, topic by topic:

- *strict* (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+): a topic is refused with
  THROTTLING_QUOTA_EXCEEDED, and nothing charged, if the bucket is already below zero; else it
  is charged in full, even past zero (a large topic is never refused while tokens remain), and
  without a throttle (Kafka's ``checkQuotas`` comes before the record, which does not check);
- *permissive* (older versions, whose clients do not know that error): every topic is charged
  and accepted.

The throttle time, when a strict topic is refused or a permissive charge left the bucket below
zero, is the time it takes to refill to zero (``-tokens / quota`` seconds, Kafka's
``throttleTimeMs``); the answer carries the last one less the time spent since (Kafka's
``AbstractControllerMutationQuota.throttleTime``), and the connection is muted for it
(KIP-219).
"""

from __future__ import annotations

from dataclasses import dataclass

from proxy.quotas.throttle import QuotaManager, _java_round


@dataclass(slots=True)
class TokenBucket:
    tokens: float
    last_ms: int

    def refill(self, quota: float, burst: float, now_ms: int) -> float:
        self.tokens = min(burst, self.tokens + quota * (now_ms - self.last_ms) / 1000)
        self.last_ms = now_ms
        return self.tokens


THROTTLING_MESSAGE = "The throttling quota has been exceeded."


def _throttle_ms(tokens: float, quota: float) -> int:
    """Kafka's ``ControllerMutationQuotaManager.throttleTimeMs``: Math.round(-value/bound*1000)."""
    return _java_round(-tokens / quota * 1000)


class MutationQuotaManager(QuotaManager):
    """The controller mutation quotas: a token bucket per sensor."""

    def __init__(self, samples: int = 11, window_s: int = 1) -> None:
        super().__init__(samples, window_s)
        self.buckets: dict[tuple[str, str], TokenBucket] = {}

    def charge(
        self, user: str, client_id: str, permits: int, strict: bool, now_ms: int
    ) -> tuple[bool, int]:
        """Charge ``permits`` partitions: (refused, throttle time in ms). Refused only if
        strict and the bucket is already below zero (nothing charged); the throttle time is
        set when refused, or when a permissive charge leaves the bucket below zero."""
        if not self.enabled:
            return False, 0
        tags = self.metric_tags(user, client_id)
        self._sensor(tags, now_ms)  # for the idle expiry of its tags
        quota = self._configured(tags)
        if quota is None or quota <= 0:
            return False, 0
        burst = self.samples * (self.window_ms / 1000) * quota
        bucket = self.buckets.get(tags)
        if bucket is None:
            bucket = self.buckets[tags] = TokenBucket(burst, now_ms)
        tokens = bucket.refill(quota, burst, now_ms)
        if strict:
            if tokens < 0:  # Sensor.checkQuotas on a TokenBucket
                return True, _throttle_ms(tokens, quota)
            bucket.tokens = min(burst, tokens - permits)
            return False, 0
        bucket.tokens = min(burst, tokens - permits)  # record with checkQuotas after it
        return False, _throttle_ms(bucket.tokens, quota) if bucket.tokens < 0 else 0

    def expire(self, now_ms: int) -> None:
        super().expire(now_ms)
        for tags in [t for t in self.buckets if t not in self.sensors]:
            del self.buckets[tags]
