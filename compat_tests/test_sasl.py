"""Stock clients over SASL listeners: a kafkad subprocess with a SASL_PLAINTEXT listener
(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and a SASL_SSL listener (SCRAM-SHA-512, TLS from
``kafkad certs``), SCRAM users stored with ``kafkad add-scram`` before the first start and
PLAIN users from the listener's JAAS config, as Kafka configures them.

Each client authenticates, produces and consumes; a wrong password and an unknown user are
refused with SASL_AUTHENTICATION_FAILED and the broker serves on; a request before
authentication closes that connection only. No password reaches the broker's log.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer

from compat_tests._support import EXTERNAL, topic_name
from compat_tests.conftest import _LIVE, REPO, BrokerProcess
from compat_tests.sasl_support import (
    TIMEOUT_S,
    N,
    consume,
    kafkajs_send_with_token,
    login_errors,
    payloads,
    produce_with_python_token_providers,
)
from compat_tests.test_kafkajs import run as kafkajs_run
from proxy.certs import write_certs

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own SASL broker")

PLAIN_USERS = {"bob": "bob-secret"}
SCRAM_USER, SCRAM_PASSWORD = "alice", "alice-secret"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="bob" password="bob-secret" user_bob="bob-secret";'
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SaslBroker:
    def __init__(self, process: BrokerProcess, plain_port: int, ssl_port: int, certs: Path):
        self.process = process
        self.plain = f"127.0.0.1:{plain_port}"
        self.ssl = f"127.0.0.1:{ssl_port}"
        self.certs = certs


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    tmp = tmp_path_factory.mktemp("kafkad-sasl")
    certs = tmp / "certs"
    write_certs(certs)
    data = tmp / "data"
    added = subprocess.run(
        [
            sys.executable,
            "-m",
            "proxy.cli",
            "add-scram",
            "--data-dir",
            str(data),
            f"SCRAM-SHA-512=[name={SCRAM_USER},password={SCRAM_PASSWORD}]",
            f"SCRAM-SHA-256=[name={SCRAM_USER},password={SCRAM_PASSWORD}]",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert added.returncode == 0, added.stderr
    plain_port, ssl_port = _free_port(), _free_port()
    settings = {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{plain_port},SASL_SSL://127.0.0.1:{ssl_port}",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": (
            "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
        ),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs / "server.pem"),
    }
    process = BrokerProcess(data, tmp / "sasl.stderr.log", settings)
    _LIVE.append(process)
    process.start()
    yield SaslBroker(process, plain_port, ssl_port, certs)
    code = process.stop()
    _LIVE.remove(process)
    assert code == 0, f"broker exit code {code} on SIGTERM\n{process.log_tail()}"
    log = "\n".join(  # the test harness's own "===== start ARGS" lines show the config
        line
        for line in (tmp / "sasl.stderr.log").read_text().splitlines()
        if not line.startswith("===== start")
    )
    for secret in ("bob-secret", SCRAM_PASSWORD, "wrong-password"):
        assert secret not in log, f"a password reached the broker's log: {secret}"


def librdkafka(broker: SaslBroker, mechanism: str, user: str, password: str) -> dict[str, str]:
    if mechanism == "PLAIN" or mechanism == "SCRAM-SHA-256":
        cfg = {"bootstrap.servers": broker.plain, "security.protocol": "sasl_plaintext"}
    else:
        cfg = {
            "bootstrap.servers": broker.ssl,
            "security.protocol": "sasl_ssl",
            "ssl.ca.location": str(broker.certs / "ca.crt"),
        }
    return {**cfg, "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [
        ("PLAIN", "bob", "bob-secret"),
        ("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD),
        ("SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD),  # over SASL_SSL
    ],
)
def test_confluent_kafka_produce_and_consume(
    broker: SaslBroker, mechanism: str, user: str, password: str
) -> None:
    cfg = librdkafka(broker, mechanism, user, password)
    topic = topic_name(f"sasl-{mechanism.lower()}")
    producer = Producer(cfg)
    for v in payloads(topic):
        producer.produce(topic, v)
    assert producer.flush(TIMEOUT_S) == 0
    assert consume(cfg, topic, N) == payloads(topic)


@pytest.mark.parametrize(
    ("mechanism", "user", "password", "message"),
    [
        ("PLAIN", "bob", "wrong-password", "Invalid username or password"),
        ("SCRAM-SHA-256", SCRAM_USER, "wrong-password", "invalid credentials"),
        ("SCRAM-SHA-512", "nobody", "wrong-password", "invalid credentials"),
    ],
)
def test_a_wrong_password_or_unknown_user_is_refused(
    broker: SaslBroker, mechanism: str, user: str, password: str, message: str
) -> None:
    errors = login_errors(librdkafka(broker, mechanism, user, password))
    assert any("Authentication failed" in e and message in e for e in errors), errors
    # and the broker serves everyone else
    good = librdkafka(broker, "PLAIN", "bob", "bob-secret")
    assert Producer(good).list_topics(timeout=TIMEOUT_S).topics is not None


def test_a_request_before_authentication_closes_that_connection(broker: SaslBroker) -> None:
    host, _, port = broker.plain.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        # Metadata v0, no SaslHandshake first
        s.sendall(b"\x00\x00\x00\x0e\x00\x03\x00\x00\x00\x00\x00\x01\x00\x04test\x00\x00\x00\x00")
        assert s.recv(4) == b""  # closed without an answer
    good = librdkafka(broker, "SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD)
    assert Producer(good).list_topics(timeout=TIMEOUT_S).topics is not None


def test_confluent_kafka_oauthbearer_with_an_unsecured_token(broker: SaslBroker) -> None:
    # librdkafka's development mode: an unsecured JWT (alg none) for principal "carl", which
    # Kafka's default validator, and kafkad's, accept
    cfg = {
        "bootstrap.servers": broker.plain,
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": "principal=carl scope=read",
    }
    topic = topic_name("sasl-oauth")
    producer = Producer(cfg)
    for v in payloads(topic):
        producer.produce(topic, v)
    assert producer.flush(TIMEOUT_S) == 0
    assert consume(cfg, topic, N) == payloads(topic)


def test_kafka_python_scram_and_plain(broker: SaslBroker) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    for mechanism, user, password in (
        ("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD),
        ("PLAIN", "bob", "bob-secret"),
    ):
        auth = {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism,
            "sasl_plain_username": user,
            "sasl_plain_password": password,
        }
        topic = topic_name("sasl-kp")
        producer = KafkaProducer(bootstrap_servers=broker.plain, **auth)
        for v in payloads(topic):
            producer.send(topic, v)
        producer.flush(TIMEOUT_S)
        producer.close()
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=broker.plain,
            auto_offset_reset="earliest",
            consumer_timeout_ms=TIMEOUT_S * 1000,
            **auth,
        )
        got = []
        for m in consumer:
            got.append(m.value)
            if len(got) == N:
                break
        consumer.close()
        assert got == payloads(topic), mechanism


def test_aiokafka_scram_over_sasl_ssl(broker: SaslBroker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    async def main(topic: str) -> list[bytes]:
        auth = {
            "security_protocol": "SASL_SSL",
            "ssl_context": create_ssl_context(cafile=str(broker.certs / "ca.crt")),
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": SCRAM_USER,
            "sasl_plain_password": SCRAM_PASSWORD,
        }
        producer = AIOKafkaProducer(bootstrap_servers=broker.ssl, **auth)
        await producer.start()
        try:
            for v in payloads(topic):
                await producer.send_and_wait(topic, v)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=broker.ssl, auto_offset_reset="earliest", **auth
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

    topic = topic_name("sasl-aio")
    assert asyncio.run(main(topic)) == payloads(topic)


def test_kcat_scram_over_sasl_ssl(broker: SaslBroker) -> None:
    exe = shutil.which("kcat")
    if exe is None:
        pytest.fail("kcat is not installed: run scripts/install-client-tools")
    topic = topic_name("sasl-kcat")
    auth = [
        "-b",
        broker.ssl,
        "-X",
        "security.protocol=sasl_ssl",
        "-X",
        f"ssl.ca.location={broker.certs / 'ca.crt'}",
        "-X",
        "sasl.mechanisms=SCRAM-SHA-512",
        "-X",
        f"sasl.username={SCRAM_USER}",
        "-X",
        f"sasl.password={SCRAM_PASSWORD}",
    ]
    lines = [v.decode() for v in payloads(topic)]
    produced = subprocess.run(
        [exe, *auth, "-P", "-t", topic],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        [exe, *auth, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == lines


def test_kafkajs_plain_and_scram(broker: SaslBroker) -> None:
    for mechanism, user, password in (
        ("plain", "bob", "bob-secret"),
        ("scram-sha-256", SCRAM_USER, SCRAM_PASSWORD),
    ):
        topic = topic_name("sasl-kjs")
        messages = [{"key": None, "value": "a2pz", "headers": []} for _ in range(N)]  # "kjs"
        kafkajs_run(
            broker.plain,
            {"op": "createTopics", "topics": [{"topic": topic, "numPartitions": 1}]},
            {"op": "send", "topic": topic, "acks": -1, "messages": messages},
            sasl={"mechanism": mechanism, "username": user, "password": password},
        )
        cfg = librdkafka(broker, "PLAIN", "bob", "bob-secret")
        assert consume(cfg, topic, N) == [b"kjs"] * N


def test_scram_users_managed_with_the_admin_clients_and_kept_across_kill9(
    broker: SaslBroker,
) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )
    from kafka import KafkaAdminClient
    from kafka.admin import UserScramCredentialUpsertion as KpUpsertion

    admin = AdminClient(librdkafka(broker, "PLAIN", "bob", "bob-secret"))
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("carol", info, b"carol-secret")]
    )
    for f in futures.values():
        f.result(TIMEOUT_S)
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(TIMEOUT_S)
    infos = described.scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_256, 4096)]
    # kafka-python's admin client adds a SCRAM-SHA-512 credential for another user
    kp = KafkaAdminClient(
        bootstrap_servers=broker.plain,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="bob",
        sasl_plain_password="bob-secret",
    )
    try:
        result = kp.alter_user_scram_credentials(
            [KpUpsertion("dave", "SCRAM-SHA-512", "dave-secret")]
        )
        assert result.get("dave") is None, result
        assert "dave" in kp.describe_user_scram_credentials()
    finally:
        kp.close()
    # a new user logs in at once, and after a kill -9 too
    for _ in range(2):
        carol = librdkafka(broker, "SCRAM-SHA-256", "carol", "carol-secret")
        assert Producer(carol).list_topics(timeout=TIMEOUT_S).topics is not None
        dave = librdkafka(broker, "SCRAM-SHA-512", "dave", "dave-secret")
        assert Producer(dave).list_topics(timeout=TIMEOUT_S).topics is not None
        broker.process.kill9()
        port = int(broker.plain.rpartition(":")[2])
        broker.process.start(port=port)
    # deleting one: refused afterwards
    admin = AdminClient(librdkafka(broker, "PLAIN", "bob", "bob-secret"))
    for f in admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)]
    ).values():
        f.result(TIMEOUT_S)
    errors: list[str] = []
    gone = {
        **librdkafka(broker, "SCRAM-SHA-256", "carol", "carol-secret"),
        "error_cb": errors.append,
    }
    with pytest.raises(KafkaException):
        Producer(gone).list_topics(timeout=5)


def test_librdkafka_reauthenticates_before_its_session_expires(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """KIP-368: with connections.max.reauth.ms the broker answers the session lifetime, and
    librdkafka re-authenticates on the same connection before it ends: produce goes on for
    several lifetimes without an error or a dropped connection."""
    import time

    from compat_tests.conftest import _spawn

    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        # librdkafka re-authenticates at 85-95 % of the lifetime, and Kafka (and kafkad) allow
        # one re-authentication a second: a 1 s lifetime would be refused on real Kafka too
        "connections.max.reauth.ms": "2000",
    }
    b = _spawn(tmp_path_factory.mktemp("kafkad-reauth"), "reauth", settings)
    try:
        errors: list[str] = []
        producer = Producer(
            {
                "bootstrap.servers": b.bootstrap,
                "security.protocol": "sasl_plaintext",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "bob",
                "sasl.password": "bob-secret",
                "error_cb": lambda e: errors.append(str(e)),
            }
        )
        topic = topic_name("sasl-reauth")
        start = time.monotonic()
        sent = 0
        while time.monotonic() - start < 5:  # two and a half session lifetimes
            producer.produce(topic, b"x")
            assert producer.flush(TIMEOUT_S) == 0
            sent += 1
            producer.poll(0.1)
        assert errors == [] and sent > 10
        assert "session expired" not in b.log_tail()
    finally:
        assert b.stop() == 0
        _LIVE.remove(b)


def test_the_kafkad_cli_with_a_command_config(broker: SaslBroker, tmp_path: Path) -> None:
    """``kafkad topics ... --command-config FILE``, as Kafka's tools take client properties:
    SCRAM over SASL_SSL with Java's JAAS line, and a wrong password as one readable line."""

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "proxy.cli", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def props(password: str) -> Path:
        path = tmp_path / f"client-{password}.properties"
        path.write_text(
            "security.protocol=SASL_SSL\n"
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={broker.certs / 'ca.crt'}\n"
            "sasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{SCRAM_USER}" password="{password}";\n'
        )
        return path

    topic = topic_name("sasl-cli")
    good = props(SCRAM_PASSWORD)
    made = cli(
        "topics", "create", topic, "--bootstrap-server", broker.ssl, "--command-config", str(good)
    )
    assert made.returncode == 0, made.stderr
    listed = cli("topics", "list", "--bootstrap-server", broker.ssl, "--command-config", str(good))
    assert listed.returncode == 0 and topic in listed.stdout.split()
    bad = cli(
        "topics", "list", "--bootstrap-server", broker.ssl, "--command-config", str(props("nope"))
    )
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert "SASL SCRAM-SHA-512 authentication failed" in bad.stderr
    # without --command-config: the broker closes the connection; the line says what to give
    plain = cli("topics", "list", "--bootstrap-server", broker.plain)
    assert plain.returncode == 1 and len(plain.stderr.splitlines()) == 1
    assert "give --command-config" in plain.stderr


def unsecured_jwt(principal: str) -> str:
    """An unsecured JWS (alg none) as Kafka's OAuthBearerUnsecuredLoginCallbackHandler makes."""
    import base64
    import json
    import time

    def b64(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    now = time.time()
    return f"{b64({'alg': 'none'})}.{b64({'sub': principal, 'iat': now, 'exp': now + 3600})}."


def test_kafka_python_and_aiokafka_oauthbearer(broker: SaslBroker) -> None:
    topic = topic_name("sasl-oauth-py")
    produce_with_python_token_providers(
        broker.plain, topic, lambda: unsecured_jwt("erin"), lambda: unsecured_jwt("erin")
    )
    cfg = librdkafka(broker, "PLAIN", "bob", "bob-secret")
    assert consume(cfg, topic, 2 * N) == payloads(topic) * 2


def test_kafkajs_oauthbearer_with_an_unsecured_token(broker: SaslBroker) -> None:
    topic = topic_name("sasl-kjs-oauth")
    kafkajs_send_with_token(broker.plain, topic, unsecured_jwt("frank"))
    cfg = librdkafka(broker, "PLAIN", "bob", "bob-secret")
    assert consume(cfg, topic, N) == [b"kjs"] * N
