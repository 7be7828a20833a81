"""Stock clients over an SSL listener with mutual TLS (``ssl.client.auth=required``): a
kafkad subprocess whose only listener is SSL, with certificates from ``kafkad certs``.

Each client produces and consumes with its own TLS settings (the ones the README's "secure
broker" section gives), presenting the client certificate; confluent-kafka also runs a
transactional producer. Bad input (garbage where a ClientHello belongs, a certificate from an
unknown CA, no certificate) closes that connection only: it is logged, and the broker serves
on.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from compat_tests._support import EXTERNAL, topic_name, wait_for
from compat_tests.conftest import _LIVE, BrokerProcess, _spawn
from compat_tests.test_kafkajs import run as kafkajs_run
from proxy.certs import write_certs
from tests.cert_fixtures import cert_dir_fixture

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own SSL broker")

TIMEOUT_S = 30
N = 20


certs = cert_dir_fixture("certs")


@pytest.fixture(scope="module")
def ssl_broker(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[BrokerProcess]:
    settings = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs / "server.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs / "ca.crt"),
        "ssl.client.auth": "required",
    }
    b = _spawn(tmp_path_factory.mktemp("kafkad-ssl"), "ssl", settings)
    yield b
    code = b.stop()
    _LIVE.remove(b)
    assert code == 0, f"broker exit code {code} on SIGTERM\n{b.log_tail()}"


@pytest.fixture
def bootstrap(ssl_broker: BrokerProcess) -> str:
    return ssl_broker.bootstrap


def librdkafka_tls(certs: Path) -> dict[str, str]:
    return {
        "security.protocol": "ssl",
        "ssl.ca.location": str(certs / "ca.crt"),
        "ssl.certificate.location": str(certs / "client.crt"),
        "ssl.key.location": str(certs / "client.key"),
    }


def payloads(tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(N)]


def consume_confluent(
    bootstrap: str, certs: Path, topic: str, n: int, isolation: str = "read_uncommitted"
) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
            **librdkafka_tls(certs),
        }
    )
    c.subscribe([topic])
    got: list[bytes] = []
    try:

        def step() -> bool:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
            return len(got) >= n

        wait_for(step, TIMEOUT_S, f"{n} records from {topic}", step=0)
    finally:
        c.close()
    return got


def test_confluent_kafka_produce_and_consume(bootstrap: str, certs: Path) -> None:
    topic = topic_name("ssl-ck")
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", **librdkafka_tls(certs)})
    for v in payloads("ck"):
        p.produce(topic, v)
    assert p.flush(TIMEOUT_S) == 0
    assert consume_confluent(bootstrap, certs, topic, N) == payloads("ck")


def test_confluent_kafka_transactional_producer(bootstrap: str, certs: Path) -> None:
    topic = topic_name("ssl-txn")
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"tx-{uuid.uuid4().hex[:8]}",
            **librdkafka_tls(certs),
        }
    )
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    for v in payloads("aborted"):
        p.produce(topic, v)
    p.abort_transaction(TIMEOUT_S)
    p.begin_transaction()
    for v in payloads("txn"):
        p.produce(topic, v)
    p.commit_transaction(TIMEOUT_S)
    assert consume_confluent(bootstrap, certs, topic, N, "read_committed") == payloads("txn")


def test_kafka_python_produce_and_consume(bootstrap: str, certs: Path) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    tls = {
        "security_protocol": "SSL",
        "ssl_cafile": str(certs / "ca.crt"),
        "ssl_certfile": str(certs / "client.crt"),
        "ssl_keyfile": str(certs / "client.key"),
    }
    topic = topic_name("ssl-kp")
    producer = KafkaProducer(bootstrap_servers=bootstrap, **tls)
    for v in payloads("kp"):
        producer.send(topic, v)
    producer.flush(TIMEOUT_S)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=TIMEOUT_S * 1000,
        **tls,
    )
    got = []
    for m in consumer:
        got.append(m.value)
        if len(got) == N:
            break
    consumer.close()
    assert got == payloads("kp")


def test_aiokafka_produce_and_consume(bootstrap: str, certs: Path) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    async def main() -> list[bytes]:
        ctx = create_ssl_context(
            cafile=str(certs / "ca.crt"),
            certfile=str(certs / "client.crt"),
            keyfile=str(certs / "client.key"),
        )
        tls = {"security_protocol": "SSL", "ssl_context": ctx}
        topic = topic_name("ssl-aio")
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **tls)
        await producer.start()
        try:
            for v in payloads("aio"):
                await producer.send_and_wait(topic, v)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", **tls
        )
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(TIMEOUT_S):
                async for m in consumer:
                    got.append(m.value)
                    if len(got) == N:
                        break
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(main()) == payloads("aio")


def kcat(bootstrap: str, certs: Path, *args: str, stdin: str | None = None) -> str:
    exe = shutil.which("kcat")
    if exe is None:
        pytest.fail("kcat is not installed: run scripts/install-client-tools")
    tls = [x for k, v in librdkafka_tls(certs).items() for x in ("-X", f"{k}={v}")]
    proc = subprocess.run(
        [exe, "-b", bootstrap, "-m", "10", *tls, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert proc.returncode == 0, f"kcat {args} exited {proc.returncode}: {proc.stderr}"
    return proc.stdout


def test_kcat_produce_and_consume(bootstrap: str, certs: Path) -> None:
    topic = topic_name("ssl-kcat")
    lines = [v.decode() for v in payloads("kcat")]
    kcat(bootstrap, certs, "-P", "-t", topic, stdin="\n".join(lines) + "\n")
    out = kcat(bootstrap, certs, "-C", "-t", topic, "-o", "beginning", "-e", "-q")
    assert out.splitlines() == lines


def test_kcat_with_the_files_kafkad_certs_writes(bootstrap: str, certs: Path) -> None:
    topic = topic_name("ssl-kcatf")
    exe = shutil.which("kcat") or "kcat"
    conf = str(certs / "librdkafka.properties")
    base = [exe, "-F", conf, "-b", bootstrap, "-m", "10"]
    subprocess.run([*base, "-P", "-t", topic], input="x\n", text=True, check=True, timeout=30)
    out = subprocess.run(
        [*base, "-C", "-t", topic, "-e", "-q"], capture_output=True, text=True, timeout=30
    )
    assert out.stdout.splitlines() == ["x"], out.stderr


def test_kafkajs_produce(bootstrap: str, certs: Path) -> None:
    topic = topic_name("ssl-kjs")
    tls = {
        "ca": str(certs / "ca.crt"),
        "cert": str(certs / "client.crt"),
        "key": str(certs / "client.key"),
    }
    messages = [{"key": None, "value": "a2pz", "headers": []} for _ in range(N)]  # "kjs"
    kafkajs_run(
        bootstrap,
        {"op": "createTopics", "topics": [{"topic": topic, "numPartitions": 1}]},
        {"op": "send", "topic": topic, "acks": -1, "messages": messages},
        tls=tls,
    )
    assert consume_confluent(bootstrap, certs, topic, N) == [b"kjs"] * N


def _host_port(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.rpartition(":")
    return host, int(port)


def _refused_by_broker(ctx: ssl.SSLContext, bootstrap: str) -> bool:
    """Connects with ``ctx``; True if the broker ends the connection in or right after the
    handshake (TLS 1.3 reports a refused client certificate at the first read)."""
    with socket.create_connection(_host_port(bootstrap), timeout=10) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                # ApiVersions v0 request
                tls.sendall(b"\x00\x00\x00\x0e\x00\x12\x00\x00\x00\x00\x00\x01\x00\x04test")
                return tls.recv(4) == b""
        except (ssl.SSLError, ConnectionError):
            return True


def test_bad_tls_input_closes_only_that_connection(
    ssl_broker: BrokerProcess, certs: Path, tmp_path: Path
) -> None:
    bootstrap = ssl_broker.bootstrap
    since = ssl_broker.log_size()
    # a client whose connection stays open through all of it
    p = Producer({"bootstrap.servers": bootstrap, **librdkafka_tls(certs)})
    topic = topic_name("ssl-bad")
    p.produce(topic, b"before")
    assert p.flush(TIMEOUT_S) == 0
    # 1. garbage where a ClientHello belongs
    with socket.create_connection(_host_port(bootstrap), timeout=10) as raw:
        raw.sendall(b"\x16\x03\x01\xff\xff" + b"\xa5" * 300)
        while raw.recv(4096):  # perhaps an alert, then EOF (a timeout here fails the test)
            pass
    # 2. a client certificate from a CA the broker does not trust
    other = tmp_path / "other"
    write_certs(other)
    stranger = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    stranger.load_cert_chain(str(other / "client.crt"), str(other / "client.key"))
    assert _refused_by_broker(stranger, bootstrap)
    # 3. no client certificate at all (ssl.client.auth=required)
    assert _refused_by_broker(ssl.create_default_context(cafile=str(certs / "ca.crt")), bootstrap)
    # the broker and the open connection carry on
    p.produce(topic, b"after")
    assert p.flush(TIMEOUT_S) == 0
    assert consume_confluent(bootstrap, certs, topic, 2) == [b"before", b"after"]
    assert not ssl_broker.exited()
    wait_for(lambda: "PEER_DID_NOT_RETURN_A_CERTIFICATE" in ssl_broker.log_tail(since), 10, "log")
    log = ssl_broker.log_tail(since)
    assert "TLS handshake failed: PACKET_LENGTH_TOO_LONG" in log
    assert "CERTIFICATE_VERIFY_FAILED" in log


def test_the_kafkad_cli_with_the_client_properties_kafkad_certs_writes(
    bootstrap: str, certs: Path
) -> None:
    """``--command-config certs/client.properties``: mutual TLS for the kafkad CLI, with the
    Java-style PEM keystore file that ``kafkad certs`` writes."""
    import sys

    from compat_tests.conftest import REPO

    topic = topic_name("ssl-cli")
    args = ["--bootstrap-server", bootstrap, "--command-config", str(certs / "client.properties")]
    made = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "topics", "create", topic, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "topics", "list", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0 and topic in listed.stdout.split()
