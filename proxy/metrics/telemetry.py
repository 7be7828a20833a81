"""KIP-714 client telemetry: subscriptions, pushes, and the store of each client's metrics.

Theory of operation
-------------------
A client instance is known by its ``client_instance_id``. GetTelemetrySubscriptions with the
zero id assigns a fresh random one; with a known id it returns the same subscription. Every
instance gets one subscription: all metrics (``"*"``) every ``push_interval_ms``, delta
temporality for counters, the compression types kafkad accepts (zstd, lz4, gzip, snappy, in
Kafka's order of preference) and ``telemetry.max.bytes``. The subscription id is Kafka's:
CRC-32C of the subscribed metric set's text and the interval, XORed with the id's Java hash.

A push is checked in Kafka's order (``ClientMetricsManager.validatePushRequest``):
zero/reserved id -> INVALID_REQUEST; after a terminating push -> INVALID_REQUEST; sooner than
the push interval after the previous push (unless it follows a GetTelemetrySubscriptions, or is
itself terminating) -> THROTTLING_QUOTA_EXCEEDED; another subscription id ->
UNKNOWN_SUBSCRIPTION_ID; a codec id Kafka does not know -> UNSUPPORTED_COMPRESSION_TYPE; a
payload over ``telemetry.max.bytes`` -> TELEMETRY_TOO_LARGE. The request's ``terminating`` flag
is remembered whatever the outcome. The payload, decompressed with the client's codec, is an
OTLP ``MetricsData`` protobuf; one that does not decompress or decode gets INVALID_RECORD
(Kafka's answer when its receiver plugin fails). A GetTelemetrySubscriptions sooner than the
push interval after the last request is throttled the same way.

The store keeps each instance's latest value per series: gauges and cumulative sums replace it,
delta sums (what the subscription asks for) are added up, so ``/metrics`` re-exports
cumulative counters as Prometheus expects; histograms and summaries keep ``_count`` and
``_sum``. It is bounded: at most ``MAX_CLIENTS`` instances (the least recently seen is dropped
first), at most ``MAX_SERIES`` series per instance (later new series are dropped), and an
instance not heard from for max(60 s, 3 push intervals) is forgotten, as Kafka's cache does.

Deviations from Kafka
---------------------
* Kafka serves these APIs only with a metrics-receiver plugin and subscribes clients only to
  configured ``client-metrics`` resources (none by default, so clients push nothing). kafkad is
  its own receiver: with ``kafkad.client.telemetry.enable`` (default true) it advertises both
  APIs and subscribes every client to all metrics every
  ``kafkad.client.telemetry.push.interval.ms`` (default Kafka's 300000). Off, the APIs are not
  advertised and answer UNSUPPORTED_VERSION, as Kafka without a plugin.
* Kafka's get-request throttle check is written so that it never exempts a client whose last
  push failed with UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE; kafkad exempts them
  as the check intends, so such a client gets its new subscription at once.
* An instance is not dropped when its connection closes (Kafka drops it on disconnect): kafkad
  has no per-connection registry; the expiry above bounds the store instead.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from crc32c import crc32c
from kio.schema.errors import ErrorCode
from prometheus_client.core import GaugeMetricFamily, Metric

from wire.compression import NONE, CompressionError, stream_decompress

log = logging.getLogger("kafkad.telemetry")

ZERO_ID = uuid.UUID(int=0)
# Kafka's Uuid.RESERVED: the zero id and the metadata topic's id (0...01)
RESERVED_IDS = frozenset({ZERO_ID, uuid.UUID(int=1)})
ALL_METRICS = "*"
ACCEPTED_COMPRESSION = (4, 3, 1, 2)  # zstd, lz4, gzip, snappy (Kafka's list and order)
KNOWN_COMPRESSION = frozenset({0, 1, 2, 3, 4})  # CompressionType.forId
MIN_EXPIRY_MS = 60_000
MAX_CLIENTS = 4096
MAX_SERIES = 2000
MAX_DECOMPRESSED = 32 * 1024 * 1024
MAX_LABEL_VALUE = 256
INSTANCES_FAMILY = "kafkad_client_telemetry_instances"

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ClientTelemetrySnapshot:
    client_instance_id: str
    client_id: str
    software: str
    last_push_ms: int
    metrics: list[tuple[str, dict[str, str], float]]  # (name, labels, value)


@dataclass
class ClientInstance:
    instance_id: uuid.UUID
    client_id: str
    subscription_id: int
    software: str = ""
    last_get_ms: int = 0
    last_push_ms: int = 0
    last_seen_ms: int = 0
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.none
    series: dict[tuple[str, Labels], float] = field(default_factory=dict)

    def may_get(self, now_ms: int, interval_ms: int) -> bool:
        """Kafka's maybeUpdateGetRequestTimestamp."""
        if now_ms - max(self.last_get_ms, self.last_push_ms) >= interval_ms:
            self.last_get_ms = now_ms
            return True
        return False

    def may_push(self, now_ms: int, interval_ms: int) -> bool:
        """Kafka's maybeUpdatePushRequestTimestamp: a push right after a get is accepted early
        (clients jitter the interval)."""
        ok = self.last_get_ms > self.last_push_ms or now_ms - self.last_push_ms >= interval_ms
        if ok:
            self.last_push_ms = now_ms
        return ok


def java_uuid_hash(u: uuid.UUID) -> int:
    """org.apache.kafka.common.Uuid.hashCode as a signed int."""
    most, least = u.int >> 64, u.int & (2**64 - 1)
    h = most ^ least
    return _int32((h >> 32) ^ (h & 0xFFFFFFFF))


def _int32(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - 2**32 if n >= 2**31 else n


def subscription_id(metrics: list[str], interval_ms: int, instance_id: uuid.UUID) -> int:
    """Kafka's computeSubscriptionId: CRC-32C of ``Set.toString() + interval``, XOR the id's
    hash."""
    text = ("[" + ", ".join(metrics) + "]" + str(interval_ms)).encode()
    return _int32(crc32c(text)) ^ java_uuid_hash(instance_id)


@dataclass(frozen=True)
class Subscription:
    error: ErrorCode
    instance_id: uuid.UUID = ZERO_ID
    subscription_id: int = 0
    push_interval_ms: int = 0
    max_bytes: int = 0
    metrics: tuple[str, ...] = ()
    compression: tuple[int, ...] = ()


class ClientTelemetry:
    """The broker's store of client instances (``broker.client_telemetry``)."""

    def __init__(
        self,
        *,
        enabled: bool,
        push_interval_ms: int,
        max_bytes: int,
        now_ms: Callable[[], int],
        max_clients: int = MAX_CLIENTS,
        max_series: int = MAX_SERIES,
    ) -> None:
        self.enabled = enabled
        self.push_interval_ms = push_interval_ms
        self.max_bytes = max_bytes
        self.now_ms = now_ms
        self.max_clients = max_clients
        self.max_series = max_series
        self.expiry_ms = max(MIN_EXPIRY_MS, 3 * push_interval_ms)
        self.instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        # peer address -> "name version" from the connection's ApiVersions (KIP-511), as
        # Kafka's ClientMetricsInstanceMetadata takes it from the connection's client info
        self.software_by_peer: OrderedDict[str, str] = OrderedDict()

    @classmethod
    def from_values(cls, values: Mapping[str, Any], now_ms: Callable[[], int]) -> ClientTelemetry:
        return cls(
            enabled=values.get("kafkad.client.telemetry.enable", True),
            push_interval_ms=values.get("kafkad.client.telemetry.push.interval.ms", 300_000),
            max_bytes=values.get("telemetry.max.bytes", 1_048_576),
            now_ms=now_ms,
        )

    def software_seen(self, peer: str, name: str | None, version: str | None) -> None:
        """An ApiVersions (v3+) from ``peer`` named the client software."""
        if not self.enabled or not peer or not name:
            return
        self.software_by_peer[peer] = f"{name} {version}" if version else name
        self.software_by_peer.move_to_end(peer)
        while len(self.software_by_peer) > self.max_clients:
            self.software_by_peer.popitem(last=False)

    # -- instances ------------------------------------------------------------------------------

    def _expire(self, now: int) -> None:
        while self.instances:
            oldest = next(iter(self.instances.values()))
            if now - oldest.last_seen_ms < self.expiry_ms:
                break
            del self.instances[oldest.instance_id]

    def _instance(
        self, instance_id: uuid.UUID, client_id: str, now: int, peer: str = ""
    ) -> ClientInstance:
        self._expire(now)
        inst = self.instances.get(instance_id)
        if inst is None:
            sub = subscription_id([ALL_METRICS], self.push_interval_ms, instance_id)
            inst = ClientInstance(instance_id, client_id, sub)
            self.instances[instance_id] = inst
            while len(self.instances) > self.max_clients:
                self.instances.popitem(last=False)
        else:
            self.instances.move_to_end(instance_id)
        inst.last_seen_ms = now
        if peer and peer in self.software_by_peer:
            inst.software = self.software_by_peer[peer]
        return inst

    def _new_id(self) -> uuid.UUID:
        while True:
            u = uuid.uuid4()
            if u not in self.instances and u not in RESERVED_IDS:
                return u

    # -- the two APIs ------------------------------------------------------------------------

    def get_subscription(
        self, instance_id: uuid.UUID | None, client_id: str, peer: str = ""
    ) -> Subscription:
        now = self.now_ms()
        if instance_id is None or instance_id == ZERO_ID:
            instance_id = self._new_id()
        inst = self._instance(instance_id, client_id, now, peer)
        exempt = inst.last_error in (
            ErrorCode.unknown_subscription_id,
            ErrorCode.unsupported_compression_type,
        )
        if not inst.may_get(now, self.push_interval_ms) and not exempt:
            return Subscription(ErrorCode.throttling_quota_exceeded)
        if exempt:
            inst.last_get_ms = now
        inst.last_error = ErrorCode.none
        return Subscription(
            ErrorCode.none,
            instance_id,
            inst.subscription_id,
            self.push_interval_ms,
            self.max_bytes,
            (ALL_METRICS,),
            ACCEPTED_COMPRESSION,
        )

    def push(
        self,
        instance_id: uuid.UUID | None,
        client_id: str,
        subscription: int,
        terminating: bool,
        compression: int,
        payload: bytes,
        peer: str = "",
    ) -> ErrorCode:
        if instance_id is None or instance_id in RESERVED_IDS:
            return ErrorCode.invalid_request
        now = self.now_ms()
        inst = self._instance(instance_id, client_id, now, peer)
        code = self._check_push(inst, subscription, terminating, compression, payload, now)
        inst.terminating = terminating
        if code is ErrorCode.none and payload:
            try:
                data = payload if compression == NONE else _decompress(compression, payload)
                decoded = decode_metrics(data)
            except (CompressionError, ValueError) as exc:
                log.info("client %s (%s): undecodable telemetry: %s", instance_id, client_id, exc)
                code = ErrorCode.invalid_record
            else:
                self._store(inst, decoded)
        if code is not ErrorCode.none:
            inst.last_error = code
            return code
        inst.last_error = ErrorCode.none
        inst.client_id = client_id or inst.client_id
        return ErrorCode.none

    def _check_push(
        self,
        inst: ClientInstance,
        subscription: int,
        terminating: bool,
        compression: int,
        payload: bytes,
        now: int,
    ) -> ErrorCode:
        if inst.terminating:
            return ErrorCode.invalid_request
        if not inst.may_push(now, self.push_interval_ms) and not terminating:
            return ErrorCode.throttling_quota_exceeded
        if subscription != inst.subscription_id:
            return ErrorCode.unknown_subscription_id
        if compression not in KNOWN_COMPRESSION:
            return ErrorCode.unsupported_compression_type
        if len(payload) > self.max_bytes:
            return ErrorCode.telemetry_too_large
        return ErrorCode.none

    def _store(self, inst: ClientInstance, decoded: DecodedMetrics) -> None:
        series = inst.series
        for name, labels, value, delta in decoded.points:
            key = (name, labels)
            if key not in series and len(series) >= self.max_series:
                continue
            series[key] = series.get(key, 0.0) + value if delta else value

    # -- reading ------------------------------------------------------------------------------

    def snapshot(self) -> list[ClientTelemetrySnapshot]:
        """Every live instance that has pushed, oldest first."""
        self._expire(self.now_ms())
        return [
            ClientTelemetrySnapshot(
                client_instance_id=str(inst.instance_id),
                client_id=inst.client_id,
                software=inst.software,
                last_push_ms=inst.last_push_ms,
                metrics=[(name, dict(labels), v) for (name, labels), v in inst.series.items()],
            )
            for inst in self.instances.values()
            if inst.last_push_ms
        ]

    def metric_families(self) -> Iterator[Metric]:
        """The clients' metrics as ``kafkad_client_<name>`` gauges, labelled with
        client_instance_id and client_id (and the data point's own attributes)."""
        families: dict[str, GaugeMetricFamily] = {}
        for snap in self.snapshot():
            ident = {"client_instance_id": snap.client_instance_id, "client_id": snap.client_id}
            for name, labels, value in snap.metrics:
                prom = "kafkad_client_" + _prom_name(name)
                if prom == INSTANCES_FAMILY:  # a client may not shadow the store's own gauge
                    prom = "kafkad_client_attr_" + _prom_name(name)
                fam = families.get(prom)
                if fam is None:
                    fam = families[prom] = GaugeMetricFamily(prom, f"client metric {name}")
                fam.add_sample(prom, {**labels, **ident}, value)
        yield GaugeMetricFamily(
            INSTANCES_FAMILY,
            "Client instances known to the telemetry store",
            value=len(self.instances),
        )
        yield from families.values()


def _decompress(codec: int, payload: bytes) -> bytes:
    """At most MAX_DECOMPRESSED bytes (a small payload may expand enormously)."""
    return b"".join(bytes(p) for p in stream_decompress(codec, payload, MAX_DECOMPRESSED))


_NOT_NAME = re.compile(r"[^a-zA-Z0-9_]")


def _prom_name(name: str) -> str:
    return _NOT_NAME.sub("_", name)


def _label_name(name: str) -> str:
    out = _NOT_NAME.sub("_", name)
    # an empty key, or one Prometheus reserves or kafkad adds itself, would make the whole
    # exposition unparseable or ambiguous
    if (
        not out
        or out[:1].isdigit()
        or out.startswith("__")
        or out in ("client_instance_id", "client_id")
    ):
        out = "attr_" + out
    return out


@dataclass
class DecodedMetrics:
    points: list[tuple[str, Labels, float, bool]]  # (name, labels, value, is a delta)


def _any_value(v: Any) -> str:
    kind = v.WhichOneof("value")
    return "" if kind is None else str(getattr(v, kind))[:MAX_LABEL_VALUE]


def _labels(attributes: Any) -> Labels:
    return tuple(sorted((_label_name(a.key), _any_value(a.value)) for a in attributes))


def decode_metrics(data: bytes) -> DecodedMetrics:
    """An OTLP ``MetricsData`` message as data points; ValueError if it does not parse."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    msg = metrics_pb2.MetricsData()
    try:
        msg.ParseFromString(data)
    except DecodeError as exc:
        raise ValueError(f"not an OTLP MetricsData message: {exc}") from exc
    delta = metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
    out = DecodedMetrics([])
    for rm in msg.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                if kind == "gauge" or kind == "sum":
                    body = getattr(m, kind)
                    is_delta = kind == "sum" and body.aggregation_temporality == delta
                    for p in body.data_points:
                        value = p.as_double if p.WhichOneof("value") == "as_double" else p.as_int
                        out.points.append((m.name, _labels(p.attributes), float(value), is_delta))
                elif kind in ("histogram", "exponential_histogram", "summary"):
                    body = getattr(m, kind)
                    is_delta = getattr(body, "aggregation_temporality", 0) == delta
                    for p in body.data_points:
                        labels = _labels(p.attributes)
                        out.points.append((m.name + "_count", labels, float(p.count), is_delta))
                        out.points.append((m.name + "_sum", labels, float(p.sum), is_delta))
    return out
