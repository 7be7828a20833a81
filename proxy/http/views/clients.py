"""Clients: the KIP-714 telemetry clients push (``broker.client_telemetry``, stored by
``proxy/metrics/telemetry.py``); None when telemetry is off (``kafkad.client.telemetry.enable``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from proxy.broker import Broker


@dataclass(frozen=True, slots=True)
class MetricRow:
    name: str
    labels: str
    value: float


@dataclass(frozen=True, slots=True)
class ClientRow:
    client_instance_id: str
    client_id: str
    software: str
    last_push_ms: int
    metrics: tuple[MetricRow, ...]


def client_rows(broker: Broker) -> list[ClientRow] | None:
    """Each client's last push, newest first; None when client telemetry is off."""
    source = broker.client_telemetry
    if not source.enabled:
        return None
    return [
        ClientRow(
            s.client_instance_id,
            s.client_id,
            s.software,
            s.last_push_ms,
            tuple(
                MetricRow(name, ",".join(f"{k}={v}" for k, v in sorted(labels.items())), value)
                for name, labels, value in sorted(s.metrics, key=lambda m: (m[0], sorted(m[1])))
            ),
        )
        for s in sorted(source.snapshot(), key=lambda s: -s.last_push_ms)
    ]
