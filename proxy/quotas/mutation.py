"""``controller_mutation_rate`` (KIP-599): Kafka's ``ControllerMutationQuotaManager``. Pure:
times are given in milliseconds.

Each (user, client id) sensor, chosen as for the other quotas (``QuotaManager.metric_tags``),
holds a token bucket (Kafka's ``TokenBucket``): it refills at the quota (partitions per second)
up to a burst of ``samples * window * quota`` and starts full. CreateTopics, CreatePartitions
and DeleteTopics charge it one token per partition created or deleted, topic by topic:

- *strict* (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+): a topic is refused with
  THROTTLING_QUOTA_EXCEEDED, and nothing charged, if the bucket is already below zero; else it
  is charged in full, even past zero (a large topic is never refused while tokens remain);
- *permissive* (older versions, whose clients do not know that error): every topic is charged
  and accepted.

Either way, if the bucket went below zero the answer carries the time it takes to refill to
zero (``-tokens / quota`` seconds; Kafka deducts the time spent since, which kafkad's requests
do not wait for), and the connection is muted for it (KIP-219).
"""

from __future__ import annotations

from dataclasses import dataclass

from proxy.quotas.throttle import QuotaManager


@dataclass(slots=True)
class TokenBucket:
    tokens: float
    last_ms: int

    def refill(self, quota: float, burst: float, now_ms: int) -> float:
        self.tokens = min(burst, self.tokens + quota * (now_ms - self.last_ms) / 1000)
        self.last_ms = now_ms
        return self.tokens


THROTTLING_MESSAGE = "The throttling quota has been exceeded."


class MutationQuotaManager(QuotaManager):
    """The controller mutation quotas: a token bucket per sensor."""

    def __init__(self, samples: int = 11, window_s: int = 1) -> None:
        super().__init__(samples, window_s)
        self.buckets: dict[tuple[str, str], TokenBucket] = {}

    def charge(self, user: str, client_id: str, permits: int, strict: bool, now_ms: int) -> int:
        """Charge ``permits`` partitions: -1 if refused (strict, bucket already below zero),
        else the throttle time in ms (0: within the quota)."""
        if not self.enabled:
            return 0
        tags = self.metric_tags(user, client_id)
        self._sensor(tags, now_ms)  # for the idle expiry of its tags
        quota = self._configured(tags)
        if quota is None:
            return 0
        burst = self.samples * (self.window_ms / 1000) * quota
        bucket = self.buckets.get(tags)
        if bucket is None:
            bucket = self.buckets[tags] = TokenBucket(burst, now_ms)
        tokens = bucket.refill(quota, burst, now_ms)
        if strict and tokens < 0:
            return -1
        bucket.tokens = min(burst, tokens - permits)
        return self.throttle_ms(user, client_id, now_ms)

    def throttle_ms(self, user: str, client_id: str, now_ms: int) -> int:
        """The time until the sensor's bucket is back to zero (0 if it is not below)."""
        tags = self.metric_tags(user, client_id)
        bucket, quota = self.buckets.get(tags), self._configured(tags)
        if bucket is None or quota is None or quota <= 0:
            return 0
        tokens = bucket.refill(quota, self.samples * (self.window_ms / 1000) * quota, now_ms)
        return max(0, round(-tokens / quota * 1000)) if tokens < 0 else 0

    def expire(self, now_ms: int) -> None:
        super().expire(now_ms)
        for tags in [t for t in self.buckets if t not in self.sensors]:
            del self.buckets[tags]
