"""``/metrics``: the Prometheus text exposition of one broker.

Each broker gets its own ``CollectorRegistry`` (``registry_for``), never prometheus_client's
global one, so several brokers in one process (tests) keep their metrics apart.

Call ``render_metrics`` on the trio thread (not ``trio.to_thread``): the collectors walk the
broker's live dicts without locks, which is safe only because nothing else runs meanwhile. It
costs about 40 µs per partition (120 partitions: ~5 ms, 76 kB), i.e. ~0.5 % of one core at
one scrape a second.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from proxy.metrics.collectors import BrokerCollector

if TYPE_CHECKING:
    from proxy.broker import Broker


def registry_for(broker: Broker) -> CollectorRegistry:
    """The broker's registry, made on first use."""
    registry: CollectorRegistry | None = getattr(broker, "_metrics_registry", None)
    if registry is None:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(BrokerCollector(broker))
        broker._metrics_registry = registry  # type: ignore[attr-defined]
    return registry


def render_metrics(broker: Broker) -> tuple[bytes, str]:
    """The body of a ``GET /metrics`` answer and its content type."""
    return generate_latest(registry_for(broker)), CONTENT_TYPE_LATEST
