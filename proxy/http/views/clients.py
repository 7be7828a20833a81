"""Clients: the KIP-714 telemetry clients push (stored by ``proxy/metrics/telemetry.py``).

Coded against this interface until that module is merged: ``broker.client_telemetry`` with
``snapshot() -> list[ClientTelemetrySnapshot]``; a broker without it has no client telemetry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class ClientTelemetrySnapshot(Protocol):
    client_instance_id: str
    client_id: str
    software: str
    last_push_ms: int
    metrics: list[tuple[str, dict[str, str], float]]


class ClientTelemetrySource(Protocol):
    def snapshot(self) -> list[ClientTelemetrySnapshot]: ...


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


def client_rows(broker: object) -> list[ClientRow] | None:
    """Each client's last push, newest first; None when the broker keeps no telemetry."""
    source: ClientTelemetrySource | None = getattr(broker, "client_telemetry", None)
    if source is None:
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
