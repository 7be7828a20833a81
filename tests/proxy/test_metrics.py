"""``/metrics`` against a known workload: a real client (confluent-kafka, in a thread) drives
an in-process broker, then ``render_metrics`` is parsed back with prometheus_client's parser
and the values checked."""

from __future__ import annotations

import importlib
import socket
import time
from collections.abc import Callable
from typing import Any

import confluent_kafka
import trio
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from prometheus_client.parser import text_string_to_metric_families

from proxy.metrics.http import render_metrics
from proxy.metrics.requests import RequestStats
from proxy.server import Server
from tests.proxy.harness import connect, running_broker

N, SIZE = 50, 100
DEADLINE_S = 30.0


def scrape(server: Server) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    assert server.broker is not None
    body, content_type = render_metrics(server.broker)
    assert content_type.startswith("text/plain; version=")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for fam in text_string_to_metric_families(body.decode())
        for s in fam.samples
    }


def value(samples: dict[Any, float], name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def conf(port: int, **kw: Any) -> dict[str, Any]:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "enable.metrics.push": False, **kw}


def workload(port: int) -> None:
    admin = AdminClient(conf(port))
    topics = [NewTopic("plain", 1, 1), NewTopic("txn", 1, 1)]
    for f in admin.create_topics(topics).values():
        f.result(10)
    p = confluent_kafka.Producer(conf(port, **{"linger.ms": 5}))
    for i in range(N):
        p.produce("plain", b"v" * SIZE, key=str(i).encode())
    assert p.flush(10) == 0
    c = confluent_kafka.Consumer(
        conf(
            port, **{"group.id": "g1", "auto.offset.reset": "earliest", "enable.auto.commit": False}
        )
    )
    c.subscribe(["plain"])
    got = 0
    end = time.monotonic() + DEADLINE_S
    while got < N and time.monotonic() < end:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    assert got == N
    c.commit(asynchronous=False)
    c.close()
    tp = confluent_kafka.Producer(conf(port, **{"transactional.id": "tx-1"}))
    tp.init_transactions(10)
    tp.begin_transaction()
    for _ in range(4):
        tp.produce("txn", b"c" * SIZE)
    tp.commit_transaction(10)
    tp.begin_transaction()
    for _ in range(3):
        tp.produce("txn", b"o" * SIZE)
    assert tp.flush(10) == 0  # left open: it pins the LSO
    ProducerHolder.open = tp


class ProducerHolder:
    open: Any = None


def more_and_abort(port: int) -> None:
    p = confluent_kafka.Producer(conf(port))
    for _ in range(5):
        p.produce("plain", b"w" * SIZE)
    assert p.flush(10) == 0
    ProducerHolder.open.abort_transaction(10)
    ProducerHolder.open = None  # destroyed now, not retrying a stopped broker until exit


async def until(check: Callable[[], bool]) -> None:
    """Poll broker state changed by background work (timers, the cleaner), with a deadline."""
    with trio.fail_after(DEADLINE_S):
        while True:
            if check():
                return
            await trio.sleep(0.05)


async def test_metrics_of_a_known_workload() -> None:
    async with running_broker(**{"group.initial.rebalance.delay.ms": "0"}) as (server, port):
        await trio.to_thread.run_sync(workload, port)
        m = scrape(server)
        # BrokerTopicMetrics, JMX-exporter names
        assert value(m, "kafka_server_brokertopicmetrics_messagesin_total", topic="plain") == N
        bytes_in = value(m, "kafka_server_brokertopicmetrics_bytesin_total", topic="plain")
        assert bytes_in is not None and bytes_in > N * SIZE
        bytes_out = value(m, "kafka_server_brokertopicmetrics_bytesout_total", topic="plain")
        assert bytes_out is not None and bytes_out >= bytes_in  # everything was fetched once
        # 4 + 3 records, the commit marker is not a produced message
        assert value(m, "kafka_server_brokertopicmetrics_messagesin_total", topic="txn") == 7
        total_in = value(m, "kafka_server_brokertopicmetrics_messagesin_total")
        assert total_in == N + 7
        # requests and errors per API, latency summary and histogram
        produces = sum(
            v
            for (name, labels), v in m.items()
            if name == "kafka_network_requestmetrics_requests_total"
            and dict(labels)["request"] == "Produce"
        )
        assert produces >= 3
        assert (
            value(m, "kafka_network_requestmetrics_errors_total", request="Produce", error="NONE")
            == produces
        )
        assert (
            value(m, "kafka_network_requestmetrics_totaltimems_count", request="Produce")
            == produces
        )
        assert value(m, "kafkad_request_duration_seconds_count", request="Produce") == produces
        assert (
            value(m, "kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.99")
            is not None
        )
        # the open transaction: LSO held at its first offset (4 records + 1 marker before it)
        assert value(m, "kafkad_partition_high_watermark", topic="txn", partition="0") == 8
        assert value(m, "kafkad_partition_last_stable_offset", topic="txn", partition="0") == 5
        assert value(m, "kafkad_partition_lso_lag", topic="txn", partition="0") == 3
        assert value(m, "kafka_log_log_logendoffset", topic="txn", partition="0") == 8
        assert value(m, "kafkad_transactions", state="Ongoing") == 1
        assert value(m, "kafkad_transaction_commits_total") == 1
        assert value(m, "kafkad_transaction_aborts_total") == 0
        markers = value(m, "kafkad_transaction_marker_write_seconds_count")
        assert markers is not None and markers >= 1
        assert value(m, "kafkad_partition_producer_ids", topic="txn", partition="0") == 1
        # the group: Empty after its consumer left (two generations: the join, then the leave
        # that empties it), no lag
        assert value(m, "kafkad_groups", state="Empty") == 1
        assert value(m, "kafkad_group_rebalances_total", group="g1") == 2
        assert value(m, "kafkad_consumer_group_lag", group="g1", topic="plain", partition="0") == 0

        await trio.to_thread.run_sync(more_and_abort, port)
        m = scrape(server)
        assert value(m, "kafkad_consumer_group_lag", group="g1", topic="plain", partition="0") == 5
        assert value(m, "kafkad_transaction_aborts_total") == 1
        assert value(m, "kafkad_transactions", state="Ongoing") == 0
        assert value(m, "kafkad_partition_lso_lag", topic="txn", partition="0") == 0


def _req(api: str, cls: str, **kw: Any) -> Any:
    return getattr(importlib.import_module(f"kio.schema.{api}.v4.request"), cls)(**kw)


async def test_errors_counted_by_code_and_timeout_aborts() -> None:
    settings = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "50"}
    async with running_broker(**settings) as (server, port):
        import datetime

        async with connect(port) as c:
            ms = datetime.timedelta(milliseconds=1)
            r = await c.request(
                _req(
                    "init_producer_id",
                    "InitProducerIdRequest",
                    transactional_id="t",
                    transaction_timeout=10**9 * ms,
                    producer_id=-1,
                    producer_epoch=-1,
                )
            )
            assert r.error_code.name == "invalid_transaction_timeout"
        m = scrape(server)
        assert (
            value(
                m,
                "kafka_network_requestmetrics_errors_total",
                request="InitProducerId",
                error="INVALID_TRANSACTION_TIMEOUT",
            )
            == 1
        )

        def open_txn() -> None:
            p = confluent_kafka.Producer(
                conf(port, **{"transactional.id": "slow", "transaction.timeout.ms": 1000})
            )
            p.init_transactions(10)
            p.begin_transaction()
            p.produce("slow-topic", b"x")
            assert p.flush(10) == 0

        await trio.to_thread.run_sync(open_txn)

        def aborted() -> bool:
            # the timeout abort is counted when started, the abort once CompleteAbort is durable
            m = scrape(server)
            return value(m, "kafkad_transaction_aborts_total") == 1

        await until(aborted)
        m = scrape(server)
        assert value(m, "kafkad_transaction_timeout_aborts_total") == 1
        assert value(m, "kafkad_transaction_commits_total") == 0
        assert value(m, "kafkad_transactions", state="CompleteAbort") == 1


async def test_cleaner_passes_and_bytes() -> None:
    # small segments: Kafka's internal.segment.bytes (segment.bytes must be >= 1 MiB)
    settings = {"log.cleaner.backoff.ms": "50"}
    async with running_broker(**settings) as (server, port):

        def compacted() -> None:
            admin = AdminClient(conf(port))
            t = NewTopic(
                "kv",
                1,
                1,
                config={
                    "cleanup.policy": "compact",
                    "min.cleanable.dirty.ratio": "0.01",
                    "internal.segment.bytes": "1024",
                },
            )
            admin.create_topics([t])["kv"].result(10)
            p = confluent_kafka.Producer(conf(port, **{"linger.ms": 0}))
            for i in range(60):
                p.produce("kv", b"x" * SIZE, key=str(i % 3).encode())
                p.flush(10)

        await trio.to_thread.run_sync(compacted)

        def cleaned() -> bool:
            passes = value(scrape(server), "kafkad_log_cleaner_passes_total")
            return passes is not None and passes >= 1

        await until(cleaned)
        m = scrape(server)
        read = value(m, "kafkad_log_cleaner_read_bytes_total")
        assert read is not None and read > 0


def test_all_topics_totals_do_not_fall_when_a_topic_is_deleted() -> None:
    """The all-topics counters summed only the live topics: deleting a topic made
    ``kafka_server_brokertopicmetrics_*_total`` go down, which Prometheus reads as a reset."""
    from types import SimpleNamespace

    from proxy.metrics.collectors import BrokerCollector
    from proxy.metrics.requests import TopicStats

    stats = TopicStats()
    stats.produced("a", 100, 3)
    stats.produced("b", 50, 2)
    stats.fetched("b", 40)
    broker = SimpleNamespace(metrics=SimpleNamespace(topics=stats), topics={"a": object()})
    totals = {
        s.name: s.value
        for fam in BrokerCollector(broker)._topics()  # type: ignore[arg-type]
        for s in fam.samples
        if not s.labels
    }
    assert totals == {
        "kafka_server_brokertopicmetrics_bytesin_total": 150,
        "kafka_server_brokertopicmetrics_messagesin_total": 5,
        "kafka_server_brokertopicmetrics_bytesout_total": 40,
    }
    assert list(stats.by_topic) == ["a"]


def test_request_stats_quantiles_and_errors() -> None:
    stats = RequestStats({0: "Produce"})
    for ms in (0.05, 0.05, 0.05, 20.0):
        stats.record(0, 9, ms / 1000, object())  # no ``responses``: acks=0, nothing counted
    (api,) = stats.apis()
    assert api.count == 4 and api.by_version[9] == 4 and api.errors == {}
    assert api.quantile_ms(0.5) == 0.1  # the bucket bound (0.1 ms) over 0.05 ms
    assert api.quantile_ms(0.99) == 20.0  # the largest seen, not the bucket's 25 ms


async def test_two_brokers_in_one_process_keep_their_metrics_apart() -> None:
    async with running_broker() as (a, port_a), running_broker() as (b, _):
        async with connect(port_a) as c:
            from kio.schema.api_versions.v3.request import ApiVersionsRequest

            await c.request(
                ApiVersionsRequest(client_software_name="x", client_software_version="1")
            )
        assert (
            value(
                scrape(a),
                "kafka_network_requestmetrics_requests_total",
                request="ApiVersions",
                version="3",
            )
            == 1
        )
        assert (
            value(
                scrape(b),
                "kafka_network_requestmetrics_requests_total",
                request="ApiVersions",
                version="3",
            )
            is None
        )


async def test_consumer_protocol_groups() -> None:
    """KIP-848 groups: members and group epoch in the shared families, their own states, the
    target assignment epoch and the members still reconciling."""
    from kio.schema.errors import ErrorCode

    from tests.proxy.test_broker_requests import create
    from tests.proxy.test_consumer_group_requests import join

    async with running_broker() as (server, port), connect(port) as c:
        assert await create(c, "t", 2) is ErrorCode.none
        assert (await c.request(join("cg", "a"))).member_epoch == 1
        assert (await c.request(join("cg", "b"))).member_epoch == 2  # a must revoke first
        m = scrape(server)
        assert value(m, "kafkad_group_members", group="cg") == 2
        assert value(m, "kafkad_group_rebalances_total", group="cg") == 2
        assert value(m, "kafkad_consumer_group_assignment_epoch", group="cg") == 2
        assert value(m, "kafkad_consumer_group_unreconciled_members", group="cg") == 2
        assert value(m, "kafkad_consumer_groups", state="Reconciling") == 1
        assert value(m, "kafkad_consumer_groups", state="Stable") == 0
        assert value(m, "kafkad_groups", state="Stable") == 0  # classic groups only


async def test_socket_server_metrics_per_listener() -> None:
    # Kafka's socket-server-metrics (JMX exporter: kafka_server_socket_server_metrics_*):
    # connections served count once admitted; one closed at once for its IP's limit is not
    async with running_broker(**{"max.connections.per.ip": "3"}) as (server, port):
        prefix = "kafka_server_socket_server_metrics_connection_"

        def counts() -> tuple[float | None, ...]:
            m = scrape(server)
            return tuple(
                value(m, prefix + n, listener="PLAINTEXT")
                for n in ("count", "creation_total", "close_total")
            )

        assert counts() == (0, 0, 0)
        async with connect(port) as a, connect(port) as b:
            for c in (a, b):
                assert await c.request(ApiVersionsRequest()) is not None
            async with connect(port) as third:
                assert await third.request(ApiVersionsRequest()) is not None
                async with connect(port) as fourth:  # over the IP's limit: closed at once
                    with trio.fail_after(5):
                        assert await fourth.read_frame() is None
                assert counts() == (3, 3, 0)
            await until(lambda: counts() == (2, 3, 1))
        await until(lambda: counts() == (0, 3, 3))


async def test_pipelined_requests_are_counted_when_their_replies_arrive() -> None:
    """The connection records a request's metrics once its reply is written (after the write,
    off the round trip's critical path): a client that has its replies finds them counted, for
    every request of a pipelined batch, and for the requests before a connection it broke."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    from tests.proxy.harness import encode_request

    req = ApiVersionsRequest(client_software_name="x", client_software_version="1")

    def count(broker: Any) -> Any:
        return value(
            scrape(broker),
            "kafka_network_requestmetrics_requests_total",
            request="ApiVersions",
            version="3",
        )

    async with running_broker() as (broker, port), connect(port) as c:
        await c.send_raw(b"".join(encode_request(req, cid) for cid in (1, 2, 3)))
        for _ in range(3):
            assert await c.read_frame() is not None
        assert count(broker) == 3
        # two more, then a frame the broker cannot decode: it answers the two and closes
        await c.send_raw(encode_request(req, 4) + encode_request(req, 5) + b"\0\0\0\4\0\0\0\0")
        assert await c.read_frame() is not None
        assert await c.read_frame() is not None
        assert await c.read_frame() is None
        assert count(broker) == 5


async def test_replies_a_client_holds_are_counted_while_the_write_waits_for_the_socket() -> None:
    """A batch's replies go out in one write; when the kernel takes only part of it, the
    client may already hold whole replies while the broker waits to write the rest: they are
    counted by then (recorded before the wait), as a reply's request always is."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    from tests.proxy.harness import encode_request

    req = ApiVersionsRequest(client_software_name="x", client_software_version="1")
    n = 3000  # ~1.8 MB of replies: more than the socket buffers hold

    def count(broker: Any) -> float:
        found = value(
            scrape(broker),
            "kafka_network_requestmetrics_requests_total",
            request="ApiVersions",
            version="3",
        )
        return found or 0

    async with running_broker() as (broker, port), connect(port) as c:
        c.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        short: list[tuple[int, float]] = []
        async with trio.open_nursery() as nursery:
            frames = b"".join(encode_request(req, cid) for cid in range(1, n + 1))
            nursery.start_soon(c.send_raw, frames)
            for got in range(1, n + 1):
                assert await c.read_frame() is not None
                if got <= 20 or got % 500 == 0:  # (a scrape costs: not after every reply)
                    seen = count(broker)
                    if seen < got:
                        short.append((got, seen))
        assert short == []
