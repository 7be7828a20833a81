"""``kafkad proxy`` in front of a kafkad upstream (two processes) with the stock clients.

Every client bootstraps at the proxy and must then reach the upstream only through the ports
the proxy hands out: produce/consume, a consumer group, a transaction read back
read_committed, an upstream with two listeners, each fault kind as a client meets it, and a
recording replayed by ``kafkad replay``. The upstream is kafkad (the session broker, or one
with two listeners); against KAFKAD_BOOTSTRAP the proxy fronts that broker instead.
"""

from __future__ import annotations

import json
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

from compat_tests._support import EXTERNAL, topic_name
from compat_tests.conftest import _LIVE, REPO, BrokerProcess, _spawn, module_broker
from compat_tests.txn_support import create, read_all, values

pytestmark = pytest.mark.timeout(120)
READY = re.compile(
    r"^kafkad proxy ready listen=(?P<host>\S+):(?P<port>\d+) upstream=\S+( http=(?P<http>\S+))?$"
)
START_TIMEOUT_S = 20


class ProxyProcess:
    """A ``kafkad proxy`` subprocess recording into ``record_dir``."""

    def __init__(self, upstream: str, tmp: Path, faults: str = "", *extra: str) -> None:
        self.record_dir = tmp / "recordings"
        self.log_path = tmp / "proxy.stderr.log"
        args = [sys.executable, "-m", "proxy.cli", "proxy", "--upstream", upstream]
        args += ["--listen", "127.0.0.1:0", "--record", str(self.record_dir), *extra]
        if faults:
            args += ["--set", f"kafkad.fault.injection={faults}"]
        self._log = open(self.log_path, "w", encoding="utf-8")  # noqa: SIM115
        self.proc = subprocess.Popen(
            args,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        assert self.proc.stdout is not None
        threading.Thread(target=lambda: lines.put(self.proc.stdout.readline()), daemon=True).start()  # type: ignore[union-attr]
        try:
            line = lines.get(timeout=START_TIMEOUT_S)
        except queue.Empty:
            line = ""
        match = READY.match(line.strip())
        if match is None:
            self.stop()
            raise AssertionError(f"proxy did not start: {line!r}\n{self.log_path.read_text()}")
        self.started = time.monotonic()
        self.bootstrap = f"{match['host']}:{match['port']}"
        self.http = match["http"] or ""  # the observed transaction view, with --http

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode

    def replay(self) -> str:
        files = sorted(str(p) for p in self.record_dir.glob("*.kdrec"))
        out = subprocess.run(
            [sys.executable, "-m", "proxy.cli", "replay", *files],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return out.stdout


@pytest.fixture(scope="module")
def upstream(broker: object, bootstrap: str) -> str:
    return bootstrap


@pytest.fixture(scope="module")
def proxy(upstream: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyProcess]:
    p = ProxyProcess(upstream, tmp_path_factory.mktemp("proxy"), "", "--http", "127.0.0.1:0")
    yield p
    assert p.stop() == 0, p.log_path.read_text()[-5000:]


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def handed_out_ports(bs: str) -> set[int]:
    admin = KafkaAdminClient(bootstrap_servers=bs, client_id="ports")
    try:
        return {b["port"] for b in admin.describe_cluster()["brokers"]}
    finally:
        admin.close()


# -- the five clients through the proxy ------------------------------------------------------


def test_kafka_python_produce_consume_and_a_group(proxy: ProxyProcess, upstream: str) -> None:
    ports = handed_out_ports(proxy.bootstrap)
    assert ports and _port(upstream) not in ports and _port(proxy.bootstrap) not in ports
    topic = create(proxy.bootstrap, topic_name("px"), 2)
    producer = KafkaProducer(bootstrap_servers=proxy.bootstrap)
    for i in range(20):
        producer.send(topic, f"v{i}".encode(), partition=i % 2)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=proxy.bootstrap,
        group_id=topic_name("g"),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=15000,
    )
    got = []
    for msg in consumer:
        got.append(msg.value)
        if len(got) == 20:
            break
    consumer.commit()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(20))
    committed = consumer.committed(next(iter(consumer.assignment())))
    consumer.close()
    assert committed is not None and committed > 0


def test_confluent_transaction_and_read_committed(proxy: ProxyProcess) -> None:
    bs = proxy.bootstrap
    topic = create(bs, topic_name("pxt"), 1)
    tid = topic_name("tid")
    p = Producer({"bootstrap.servers": bs, "transactional.id": tid})
    p.init_transactions(30)
    for n, commit in ((1, True), (2, False), (3, True)):
        p.begin_transaction()
        p.produce(topic, f"txn{n}".encode(), partition=0)
        if commit:
            p.commit_transaction(30)
        else:
            p.flush(10)
            p.abort_transaction(30)
    assert values(read_all(bs, [(topic, 0)], "read_committed")) == [b"txn1", b"txn3"]
    # the transaction view saw it all go by (observed traffic, not broker state)
    with urllib.request.urlopen(proxy.http + "transactions.json", timeout=10) as page:
        view = json.load(page)
    (seen,) = [t for t in view["transactional_ids"] if t["transactional_id"] == tid]
    assert (seen["commits"], seen["aborts"], seen["state"]) == (2, 1, "committed")
    assert seen["producer_id"] >= 0 and seen["last_end_txn_ms"] is not None
    with urllib.request.urlopen(proxy.http + "metrics", timeout=10) as page:
        assert "kafkad_proxy_observed_end_txn_total" in page.read().decode()


def test_aiokafka_produce_and_consume(proxy: ProxyProcess) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = create(proxy.bootstrap, topic_name("pxa"), 1)

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=proxy.bootstrap)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic, f"a{i}".encode(), partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=proxy.bootstrap,
            auto_offset_reset="earliest",
            group_id=topic_name("ga"),
        )
        await consumer.start()
        try:
            got: list[bytes] = []
            while len(got) < 5:
                batch = await consumer.getmany(timeout_ms=10000)
                assert batch, "no records within 10 s"
                got += [m.value for msgs in batch.values() for m in msgs if m.value is not None]
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [f"a{i}".encode() for i in range(5)]


def _kcat(*args: str, stdin: str | None = None) -> str:
    exe = shutil.which("kcat")
    if exe is None:
        pytest.fail("kcat is not installed: run scripts/install-client-tools")
    proc = subprocess.run([exe, *args], input=stdin, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_kcat_metadata_produce_consume(proxy: ProxyProcess, upstream: str) -> None:
    topic = create(proxy.bootstrap, topic_name("pxk"), 1)
    meta = json.loads(_kcat("-b", proxy.bootstrap, "-L", "-J"))
    assert meta["brokers"] and all(
        _port(b["name"].split("/")[0]) != _port(upstream) for b in meta["brokers"]
    )
    _kcat("-b", proxy.bootstrap, "-P", "-t", topic, "-p", "0", stdin="one\ntwo\nthree\n")
    out = _kcat("-b", proxy.bootstrap, "-C", "-t", topic, "-e", "-q")
    assert out.split() == ["one", "two", "three"]


def test_kafkajs_through_the_proxy(proxy: ProxyProcess, upstream: str) -> None:
    from compat_tests.test_kafkajs import run, topic_spec

    topic = topic_name("pxj")
    created, cluster, sent = run(
        proxy.bootstrap,
        {"op": "createTopics", "topics": [topic_spec(topic, 1)]},
        {"op": "describeCluster"},
        {
            "op": "send",
            "topic": topic,
            "messages": [{"key": None, "value": "aGk=", "partition": 0}],
        },
    )
    assert created is True
    assert all(b["port"] != _port(upstream) for b in cluster["brokers"])
    assert sent and sent[0]["errorCode"] == 0
    # and a kafkajs group consumer (FindCoordinator, JoinGroup, SyncGroup, Fetch, commits)
    js = Path(__file__).parent / "kafkajs" / "group_consumer.js"
    member = subprocess.Popen(
        ["node", str(js), proxy.bootstrap, topic, topic_name("gj")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert member.stdout is not None
        events = (json.loads(line) for line in member.stdout if line.strip())
        rec = next(e for e in events if e["ev"] == "rec")  # the test's timeout bounds this
        assert (rec["p"], rec["o"], rec["v"]) == (0, 0, "hi")
    finally:
        member.terminate()
        member.wait(15)
        if member.stdout is not None:
            member.stdout.close()


def test_recording_replays_to_a_timeline(proxy: ProxyProcess) -> None:
    topic = create(proxy.bootstrap, topic_name("pxr"), 1)
    _kcat("-b", proxy.bootstrap, "-P", "-t", topic, "-p", "0", stdin="r1\n")
    text = proxy.replay()
    assert re.search(r"-> Produce v\d+ corr=\d+ client=rdkafka .*acks=-1 topics=" + topic, text)
    assert re.search(r"<- Produce v\d+ corr=\d+ [\d.]+ ms ok", text)
    assert re.search(r"<- Metadata v\d+ corr=\d+ [\d.]+ ms", text)
    assert "handed out 1=127.0.0.1:" in text


# -- an upstream with two listeners -----------------------------------------------------------


@pytest.fixture(scope="module")
def two_listener_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(
        tmp_path_factory,
        "two-listeners",
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
        },
        "needs a kafkad upstream with two listeners",
    )


def test_upstream_with_two_listeners(two_listener_broker: BrokerProcess, tmp_path: Path) -> None:
    listeners = two_listener_broker.listeners
    first = two_listener_broker.bootstrap
    match = re.search(r"OTHER://127\.0\.0\.1:(\d+)->127\.0\.0\.1:(\d+)", listeners)
    other = f"127.0.0.1:{match[2]}" if match else ""
    assert other and other != first, listeners
    # the first --upstream refuses: the proxy bootstraps through the second, OTHER listener
    p = ProxyProcess(f"127.0.0.1:1,{other}", tmp_path)
    try:
        ports = handed_out_ports(p.bootstrap)
        assert _port(other) not in ports and _port(first) not in ports
        topic = create(p.bootstrap, topic_name("px2"), 1)
        producer = Producer({"bootstrap.servers": p.bootstrap})
        producer.produce(topic, b"via-other", partition=0)
        assert producer.flush(30) == 0
        assert values(read_all(p.bootstrap, [(topic, 0)], "read_committed")) == [b"via-other"]
        text = p.replay()
        assert f"upstream {other}" in text and f"upstream {first}" not in text
    finally:
        assert p.stop() == 0


# -- an upstream restarted on another port (broker churn) ------------------------------------


def _refused(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError:
        return True
    return False


def test_upstream_restarted_on_another_port_and_back(tmp_path: Path) -> None:
    """The upstream kafkad restarted on a new port: the listener for its old endpoint is
    released (new connections refused), the new one gets a listener; restarted on the old
    port again, it is handed out at its old proxy port."""
    if EXTERNAL:
        pytest.skip("restarts its own kafkad upstream")
    b = _spawn(tmp_path / "churn", "churn")
    try:
        first = b.bootstrap
        with socket.socket() as spare:  # a port for the restart, named to the proxy up front
            spare.bind(("127.0.0.1", 0))
            second = f"127.0.0.1:{spare.getsockname()[1]}"
        p = ProxyProcess(f"{first},{second}", tmp_path)
        try:
            (before,) = handed_out_ports(p.bootstrap)
            b.stop()
            b.start(port=_port(second))
            (moved,) = handed_out_ports(p.bootstrap)  # bootstraps through `second` now
            assert moved != before
            assert _refused(f"127.0.0.1:{before}")  # the old endpoint's listener: released
            topic = create(p.bootstrap, topic_name("churn"), 1)
            producer = Producer({"bootstrap.servers": p.bootstrap})
            producer.produce(topic, b"after-restart", partition=0)
            assert producer.flush(30) == 0
            b.stop()
            b.start(port=_port(first))
            assert handed_out_ports(p.bootstrap) == {before}  # back: its old proxy port
            assert _refused(f"127.0.0.1:{moved}")
            assert values(read_all(p.bootstrap, [(topic, 0)], "read_committed")) == [
                b"after-restart"
            ]
        finally:
            assert p.stop() == 0, p.log_path.read_text()[-5000:]
    finally:
        b.stop()
        _LIVE.remove(b)


# -- faults as the clients meet them ----------------------------------------------------------


def _idempotent_producer(bs: str, client_id: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bs,
            "client.id": client_id,
            "enable.idempotence": True,
            "linger.ms": 0,
            "retry.backoff.ms": 20,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 200,
        }
    )


def _produce_each(producer: Producer, topic: str, n: int) -> list[object]:
    errors: list[object] = []
    for i in range(n):
        producer.produce(
            topic, f"m{i}".encode(), partition=0, on_delivery=lambda e, _m: errors.append(e)
        )
        producer.flush(30)  # one request per message: every one draws its fault
    return [e for e in errors if e is not None]


@pytest.mark.parametrize(
    "faults",
    [
        "seed=1; produce[victim]:error=not_leader_or_follower@0.5",
        "seed=2; produce[victim]:drop@0.4",
        "seed=3; produce[victim]:drop_after@0.4",
    ],
    ids=["error", "drop", "drop_after"],
)
def test_produce_faults_retried_to_exactly_once(upstream: str, faults: str, tmp_path: Path) -> None:
    p = ProxyProcess(upstream, tmp_path, faults)
    try:
        topic = create(p.bootstrap, topic_name("pxf"), 1)
        producer = _idempotent_producer(p.bootstrap, "victim")
        assert _produce_each(producer, topic, 10) == []
        got = values(read_all(p.bootstrap, [(topic, 0)], "read_uncommitted"))
        assert got == [f"m{i}".encode() for i in range(10)]  # no loss, no duplicate
        text = p.replay()
        if "error=" in faults:
            assert "(answered by the proxy)" in text and "NOT_LEADER_OR_FOLLOWER" in text
        else:
            assert "fault injection: dropped" in text
    finally:
        assert p.stop() == 0


def test_fault_only_for_the_named_client(upstream: str, tmp_path: Path) -> None:
    p = ProxyProcess(upstream, tmp_path, "produce[victim]:error=topic_authorization_failed")
    try:
        topic = create(p.bootstrap, topic_name("pxc"), 1)
        assert _produce_each(_idempotent_producer(p.bootstrap, "bystander"), topic, 2) == []
        errors = _produce_each(_idempotent_producer(p.bootstrap, "victim"), topic, 1)
        assert [e.name() for e in errors] == ["TOPIC_AUTHORIZATION_FAILED"]  # type: ignore[attr-defined]
    finally:
        assert p.stop() == 0


def test_delay_is_seen_as_latency(upstream: str, tmp_path: Path) -> None:
    p = ProxyProcess(upstream, tmp_path, "list_offsets:delay=1500")
    try:
        topic = create(p.bootstrap, topic_name("pxd"), 1)
        consumer = Consumer({"bootstrap.servers": p.bootstrap, "group.id": "unused"})
        start = time.monotonic()
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        assert (low, high) == (0, 0) and time.monotonic() - start >= 1.5
        consumer.close()
    finally:
        assert p.stop() == 0


def test_partition_from_a_broker_for_a_time(upstream: str, tmp_path: Path) -> None:
    p = ProxyProcess(upstream, tmp_path, "partition broker=1 for=4000 client=cut-*")
    try:
        topic = create(p.bootstrap, topic_name("pxp"), 1)  # admin client: not cut
        assert time.monotonic() - p.started < 4, "the test started too late to see the window"
        producer = _idempotent_producer(p.bootstrap, "cut-producer")
        assert _produce_each(producer, topic, 1) == []
        # delivered once the window closed (timed from the proxy's start, a little before
        # ``started``, hence the margin)
        assert time.monotonic() - p.started >= 3.5
        assert values(read_all(p.bootstrap, [(topic, 0)], "read_uncommitted")) == [b"m0"]
        assert "partitioned from broker 1" in p.replay()
    finally:
        assert p.stop() == 0
