"""Delegation tokens (KIP-48) against a real kafkad process on a SASL_PLAINTEXT listener.

No stock client here can do the whole flow: confluent-kafka (librdkafka), kafka-python,
aiokafka and kafkajs have no admin call for CreateDelegationToken (38) .. Describe (41), and
none sends SCRAM's ``tokenauth=true`` extension (librdkafka's SCRAM builds its client-first
message without extensions; ``sasl.oauthbearer.extensions`` is OAUTHBEARER's). So the token is
created, and used, over a raw socket with kio's classes and scramp's client (the extension
appended to client-first, and so to the AuthMessage, as Kafka's ScramSaslClient does); stock
clients show the rest: librdkafka produces as the token's owner, and librdkafka given the
token id and HMAC as a plain SCRAM user is refused (as Kafka refuses it: without the
extension the token id is no user). The token survives ``kill -9``.
"""

from __future__ import annotations

import base64
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from kio.schema.create_delegation_token.v3.request import CreateDelegationTokenRequest
from kio.schema.describe_delegation_token.v3.request import DescribeDelegationTokenRequest
from kio.schema.errors import ErrorCode
from kio.schema.expire_delegation_token.v2.request import ExpireDelegationTokenRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from scramp import ScramClient

from compat_tests._support import EXTERNAL, topic_name
from compat_tests.conftest import _LIVE, REPO, BrokerProcess
from tests.proxy.harness import decode_response, encode_request
from wire.values import ms64

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own SASL broker")

TIMEOUT_S = 30


class Raw:
    """One blocking connection speaking kio's classes."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=TIMEOUT_S)
        self.next_id = 1

    def request(self, req: Any) -> Any:
        cid, self.next_id = self.next_id, self.next_id + 1
        self.sock.sendall(encode_request(req, cid))
        (size,) = struct.unpack(">i", self._read(4))
        got, resp = decode_response(int(req.__api_key__), int(req.__version__), self._read(size))
        assert got == cid
        return resp

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "the broker closed the connection"
            buf += chunk
        return buf

    def login(self, mechanism: str, user: str, password: str, tokenauth: bool) -> Any:
        """SaslHandshake + the SCRAM exchange; the final SaslAuthenticate answer."""
        assert self.request(SaslHandshakeRequest(mechanism=mechanism)).error_code == 0
        client = ScramClient([mechanism], user, password)
        first = client.get_client_first()
        if tokenauth:  # Kafka's ScramExtensions, part of client-first-message-bare
            first += ",tokenauth=true"
            client.client_first_bare += ",tokenauth=true"
        server_first = self.request(SaslAuthenticateRequest(auth_bytes=first.encode()))
        if server_first.error_code != 0:  # an unknown user or token fails here, as in Kafka
            return server_first
        client.set_server_first(server_first.auth_bytes.decode())
        final = self.request(SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()))
        if final.error_code == 0:
            client.set_server_final(final.auth_bytes.decode())  # checks the server's signature
        return final

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    data = tmp_path / "data"
    added = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "add-scram", "--data-dir", str(data)]
        + [f"SCRAM-SHA-{n}=[name=alice,password=alice-secret]" for n in (256, 512)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert added.returncode == 0, added.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "delegation.token.secret.key": "the-token-secret",
    }
    process = BrokerProcess(data, tmp_path / "broker.log", settings)
    _LIVE.append(process)
    process.start()
    process.address = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
    yield process
    process.stop()
    _LIVE.remove(process)


def _token_login(address: str, token_id: str, hmac: bytes, mechanism: str) -> tuple[Raw, Any]:
    conn = Raw(address)
    return conn, conn.login(mechanism, token_id, base64.b64encode(hmac).decode(), True)


def test_a_token_created_then_used_and_kept_across_kill9(broker: BrokerProcess) -> None:
    address: str = broker.address  # type: ignore[attr-defined]
    topic = topic_name("dtok")
    # a stock client works as alice
    producer = Producer(
        {
            "bootstrap.servers": address,
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        }
    )
    producer.produce(topic, b"from alice")
    assert producer.flush(TIMEOUT_S) == 0

    alice = Raw(address)
    assert alice.login("SCRAM-SHA-256", "alice", "alice-secret", False).error_code == 0
    made = alice.request(
        CreateDelegationTokenRequest(
            owner_principal_type=None,
            owner_principal_name=None,
            renewers=(),
            max_lifetime=ms64(-1),
        )
    )
    assert made.error_code == ErrorCode.none and made.principal_name == "alice"
    seen = alice.request(DescribeDelegationTokenRequest(owners=None))
    assert [t.token_id for t in seen.tokens] == [made.token_id]
    alice.close()

    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        conn, ok = _token_login(address, made.token_id, made.hmac, mechanism)
        assert ok.error_code == ErrorCode.none, ok.error_message
        assert ok.session_lifetime.total_seconds() > 86_000  # the token's expiry
        meta = conn.request(
            MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        assert topic in [t.name for t in meta.topics]
        conn.close()

    # librdkafka cannot send tokenauth=true: the token id is then an unknown SCRAM user
    errors: list[str] = []
    stock = Producer(
        {
            "bootstrap.servers": address,
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": made.token_id,
            "sasl.password": base64.b64encode(made.hmac).decode(),
            "error_cb": lambda e: errors.append(str(e)),
        }
    )
    with pytest.raises(KafkaException):
        stock.list_topics(timeout=5)
    for _ in range(20):  # error_cb is served by poll
        if errors:
            break
        stock.poll(0.25)
    assert any("invalid credentials" in e for e in errors), errors

    broker.kill9()
    broker.restart()
    conn, ok = _token_login(address, made.token_id, made.hmac, "SCRAM-SHA-512")
    assert ok.error_code == ErrorCode.none, ok.error_message
    conn.close()

    alice = Raw(address)
    assert alice.login("SCRAM-SHA-512", "alice", "alice-secret", False).error_code == 0
    gone = alice.request(ExpireDelegationTokenRequest(hmac=made.hmac, expiry_time_period=ms64(-1)))
    assert gone.error_code == ErrorCode.none
    alice.close()
    conn, failed = _token_login(address, made.token_id, made.hmac, "SCRAM-SHA-256")
    assert failed.error_code == ErrorCode.sasl_authentication_failed
    conn.close()
