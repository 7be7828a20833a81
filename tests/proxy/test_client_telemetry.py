"""KIP-714 client telemetry: the store's rules (a fake clock), the two APIs over raw frames,
and a real librdkafka client pushing its metrics to an in-process broker."""

from __future__ import annotations

import gzip
import time
import uuid
from typing import Any

import confluent_kafka
import trio
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.get_telemetry_subscriptions.v0 import GetTelemetrySubscriptionsRequest
from kio.schema.push_telemetry.v0 import PushTelemetryRequest
from kio.static.primitive import i8, i32
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from proxy.metrics.http import render_metrics
from proxy.metrics.telemetry import (
    ACCEPTED_COMPRESSION,
    ClientTelemetry,
    java_uuid_hash,
    subscription_id,
)
from tests.proxy.harness import connect, running_broker

E = ErrorCode
GZIP, ZSTD = 1, 4


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def store(clock: Clock, **kw: Any) -> ClientTelemetry:
    kw.setdefault("push_interval_ms", 1000)
    return ClientTelemetry(enabled=True, max_bytes=10_000, now_ms=clock, **kw)


def otlp(
    *points: tuple[str, float], delta: bool = True, attrs: dict[str, str] | None = None
) -> bytes:
    data = metrics_pb2.MetricsData()
    scope = data.resource_metrics.add().scope_metrics.add()
    for name, value in points:
        m = scope.metrics.add(name=name)
        m.sum.aggregation_temporality = (
            metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
            if delta
            else metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE
        )
        m.sum.is_monotonic = True
        p = m.sum.data_points.add(as_double=value)
        for k, v in (attrs or {}).items():
            p.attributes.append(
                common_pb2.KeyValue(key=k, value=common_pb2.AnyValue(string_value=v))
            )
    return data.SerializeToString()


def series(t: ClientTelemetry) -> dict[str, float]:
    (snap,) = t.snapshot()
    return {name: v for name, _, v in snap.metrics}


# -- the store ------------------------------------------------------------------------------


def test_subscription_id_is_kafkas() -> None:
    """CRC-32C of "[*]" + interval XOR Uuid.hashCode, as ClientMetricsManager computes it."""
    u = uuid.UUID(int=(0x0123456789ABCDEF << 64) | 0xFEDCBA9876543210)
    # (int)(x >> 32) ^ (int) x of 0x0123456789ABCDEF ^ 0xFEDCBA9876543210 = 0xFFFFFFFFFFFFFFFF
    assert java_uuid_hash(u) == 0
    # crc32c(b"[*]1000") as a signed int, computed independently
    import crc32c

    crc = crc32c.crc32c(b"[*]1000")
    assert subscription_id(["*"], 1000, u) == (crc - 2**32 if crc >= 2**31 else crc)


def test_zero_id_gets_a_new_instance_and_the_same_subscription_after() -> None:
    clock = Clock()
    t = store(clock)
    sub = t.get_subscription(uuid.UUID(int=0), "c1")
    assert sub.error is E.none and sub.instance_id != uuid.UUID(int=0)
    assert sub.metrics == ("*",) and sub.push_interval_ms == 1000 and sub.max_bytes == 10_000
    assert sub.compression == ACCEPTED_COMPRESSION
    # a second get within the push interval is throttled, as Kafka's validateGetRequest
    assert t.get_subscription(sub.instance_id, "c1").error is E.throttling_quota_exceeded
    clock.ms += 1000
    again = t.get_subscription(sub.instance_id, "c1")
    assert (again.error, again.subscription_id) == (E.none, sub.subscription_id)


def test_push_rules_in_kafkas_order() -> None:
    clock = Clock()
    t = store(clock)
    sub = t.get_subscription(None, "c1")
    iid, sid = sub.instance_id, sub.subscription_id
    payload = otlp(("m.count", 1.0))
    assert t.push(uuid.UUID(int=0), "c1", sid, False, 0, payload) is E.invalid_request
    assert t.push(uuid.UUID(int=1), "c1", sid, False, 0, payload) is E.invalid_request
    assert t.push(iid, "c1", sid + 1, False, 0, payload) is E.unknown_subscription_id
    # the client then asks for its subscription again at once: not throttled (the deviation
    # from Kafka's always-true check, see the module docstring)
    assert t.get_subscription(iid, "c1").error is E.none
    clock.ms += 1000
    assert t.push(iid, "c1", sid, False, 5, payload) is E.unsupported_compression_type
    clock.ms += 1000
    assert t.push(iid, "c1", sid, False, 0, b"x" * 10_001) is E.telemetry_too_large
    clock.ms += 1000
    assert t.push(iid, "c1", sid, False, 0, payload) is E.none
    # sooner than the interval after the last push: throttled
    clock.ms += 500
    assert t.push(iid, "c1", sid, False, 0, payload) is E.throttling_quota_exceeded
    # ... unless terminating, and nothing is accepted after a terminating push
    assert t.push(iid, "c1", sid, True, 0, payload) is E.none
    clock.ms += 5000
    assert t.push(iid, "c1", sid, False, 0, payload) is E.invalid_request


def test_push_right_after_get_is_accepted_early() -> None:
    """Clients jitter the interval: a push after a get is taken even inside the interval."""
    clock = Clock()
    t = store(clock)
    sub = t.get_subscription(None, "c1")
    clock.ms += 10
    assert t.push(sub.instance_id, "c1", sub.subscription_id, False, 0, b"") is E.none


def test_malformed_payload_is_invalid_record() -> None:
    clock = Clock()
    t = store(clock)
    sub = t.get_subscription(None, "c1")
    iid, sid = sub.instance_id, sub.subscription_id
    assert t.push(iid, "c1", sid, False, 0, b"\xff\xff\xff\xff") is E.invalid_record
    clock.ms += 1000
    assert t.push(iid, "c1", sid, False, GZIP, b"not gzip") is E.invalid_record
    clock.ms += 1000
    assert t.push(iid, "c1", sid, False, GZIP, gzip.compress(otlp(("a", 2.0)))) is E.none


def test_payload_expanding_past_the_bound_is_invalid_record() -> None:
    """A small zstd payload that expands to 40 MB is cut off at MAX_DECOMPRESSED (32 MiB)."""
    import zstandard

    bomb = zstandard.ZstdCompressor().compress(b"\0" * 40_000_000)
    clock = Clock()
    t = ClientTelemetry(enabled=True, push_interval_ms=1000, max_bytes=1 << 20, now_ms=clock)
    sub = t.get_subscription(None, "c1")
    assert len(bomb) < 1 << 20
    assert t.push(sub.instance_id, "c1", sub.subscription_id, False, ZSTD, bomb) is E.invalid_record


def test_delta_sums_add_up_and_gauges_replace() -> None:
    clock = Clock()
    t = store(clock)
    sub = t.get_subscription(None, "c1")
    iid, sid = sub.instance_id, sub.subscription_id
    for _ in range(3):
        assert (
            t.push(iid, "c1", sid, False, 0, otlp(("d", 2.0)) + otlp(("c", 7.0), delta=False))
            is E.none
        )
        clock.ms += 1000
    assert series(t) == {"d": 6.0, "c": 7.0}


def test_bounded_clients_series_and_expiry() -> None:
    clock = Clock()
    t = store(clock, max_clients=2, max_series=2)
    ids = [t.get_subscription(None, f"c{i}").instance_id for i in range(3)]
    assert list(t.instances) == ids[1:]  # the least recently seen went first
    inst = t.instances[ids[2]]
    payload = otlp(("a", 1.0), ("b", 1.0), ("c", 1.0))
    assert t.push(ids[2], "c2", inst.subscription_id, False, 0, payload) is E.none
    assert sorted(series(t)) == ["a", "b"]
    clock.ms += 60_000  # max(60 s, 3 intervals) without a word: forgotten
    assert t.snapshot() == [] and not t.instances


def test_client_attributes_and_names_keep_the_exposition_parseable() -> None:
    """An empty attribute key gave a label with no name, and a client metric named
    ``telemetry.instances`` a second ``kafkad_client_telemetry_instances`` family: either made
    every scrape of /metrics unparseable."""
    clock = Clock()
    t = store(clock)
    sub = t.get_subscription(None, "c1")
    payload = otlp(("x", 1.0), attrs={"": "v", "9a": "w"}) + otlp(("telemetry.instances", 5.0))
    assert t.push(sub.instance_id, "c1", sub.subscription_id, False, 0, payload) is E.none
    registry = CollectorRegistry(auto_describe=False)

    class Store:
        def collect(self) -> Any:
            return t.metric_families()

    registry.register(Store())
    text = generate_latest(registry).decode()
    families = [f.name for f in text_string_to_metric_families(text)]
    assert len(families) == len(set(families))
    assert "kafkad_client_x" in families and "kafkad_client_telemetry_instances" in families


# -- over the wire ----------------------------------------------------------------------------


def _get(iid: uuid.UUID) -> GetTelemetrySubscriptionsRequest:
    return GetTelemetrySubscriptionsRequest(client_instance_id=iid)


def _push(iid: uuid.UUID, sid: int, codec: int, payload: bytes) -> PushTelemetryRequest:
    return PushTelemetryRequest(
        client_instance_id=iid,
        subscription_id=i32(sid),
        terminating=False,
        compression_type=i8(codec),
        metrics=payload,
    )


async def test_raw_frames_subscribe_push_and_malformed_payload() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        versions = await c.request(
            ApiVersionsRequest(client_software_name="raw", client_software_version="1.0")
        )
        keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert keys[71] == (0, 0) and keys[72] == (0, 0)
        sub = await c.request(_get(uuid.UUID(int=0)))
        assert sub.error_code is E.none and sub.delta_temporality
        assert sub.requested_metrics == ("*",) and tuple(sub.accepted_compression_types) == (
            4,
            3,
            1,
            2,
        )
        iid, sid = sub.client_instance_id, int(sub.subscription_id)
        bad = await c.request(_push(iid, sid, ZSTD, b"\x28\xb5\x2f\xfd garbage"))
        assert bad.error_code is E.invalid_record
        # the broker is unharmed: a new instance subscribes and its first push is stored
        # (a push right after a get is accepted early)
        sub = await c.request(_get(uuid.UUID(int=0)))
        assert sub.error_code is E.none and sub.client_instance_id != iid
        iid, sid = sub.client_instance_id, int(sub.subscription_id)
        good = await c.request(_push(iid, sid, GZIP, gzip.compress(otlp(("x.y", 3.0)))))
        assert good.error_code is E.none
        (snap,) = [s for s in server.broker.client_telemetry.snapshot() if s.metrics]
        assert snap.client_id == "test" and snap.software == "raw 1.0"
        assert snap.metrics == [("x.y", {}, 3.0)]


async def test_telemetry_off_is_not_advertised_and_refused() -> None:
    settings = {"kafkad.client.telemetry.enable": "false"}
    async with running_broker(**settings) as (_, port), connect(port) as c:
        versions = await c.request(
            ApiVersionsRequest(client_software_name="raw", client_software_version="1.0")
        )
        assert not {71, 72} & {k.api_key for k in versions.api_keys}
        sub = await c.request(_get(uuid.UUID(int=0)))
        assert sub.error_code is E.unsupported_version


# -- a real client ---------------------------------------------------------------------------


def _librdkafka_pushes(port: int, deadline_s: float, seen: trio.Event | Any) -> None:
    p = confluent_kafka.Producer(
        {"bootstrap.servers": f"127.0.0.1:{port}", "client.id": "telemetry-test"}
    )
    try:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end and not seen():
            p.produce("telemetry-topic", b"v" * 50)
            p.poll(0.1)
        p.flush(5)
    finally:
        p.flush(1)


async def test_librdkafka_pushes_its_metrics() -> None:
    """confluent-kafka (librdkafka 2.x, enable.metrics.push on by default) subscribes and
    pushes; its metrics show up in the store and on /metrics with its client id."""
    settings = {"kafkad.client.telemetry.push.interval.ms": "500"}
    async with running_broker(**settings) as (server, port):
        store_ = server.broker.client_telemetry

        def seen() -> bool:
            return any(s.metrics for s in store_.snapshot())

        await trio.to_thread.run_sync(_librdkafka_pushes, port, 30.0, seen)
        snaps = [s for s in store_.snapshot() if s.metrics]
        assert snaps, "librdkafka pushed no metrics within 30 s"
        snap = snaps[0]
        assert snap.client_id == "telemetry-test"
        assert snap.software.startswith("confluent-kafka-python")
        names = {name for name, _, _ in snap.metrics}
        assert any(n.startswith("org.apache.kafka.producer.") for n in names), names
        body, content_type = render_metrics(server.broker)
        assert content_type.startswith("text/plain")
        client_samples = [
            s
            for fam in text_string_to_metric_families(body.decode())
            if fam.name.startswith("kafkad_client_org_apache_kafka_producer")
            for s in fam.samples
        ]
        assert client_samples
        assert {s.labels["client_id"] for s in client_samples} == {"telemetry-test"}
        assert {s.labels["client_instance_id"] for s in client_samples} == {snap.client_instance_id}
