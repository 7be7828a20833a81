"""OAUTHBEARER with signed JWTs, as a Kafka broker validates them with
``OAuthBearerValidatorCallbackHandler``: a kafkad subprocess whose SASL_PLAINTEXT listener
checks tokens against a JWKS file this module writes (an RSA and an EC key), an expected
audience and issuer. Stock clients hand out tokens signed here: confluent-kafka's ``oauth_cb``,
kafka-python's and aiokafka's token providers, kafkajs's ``oauthBearerProvider``.

With short-lived tokens librdkafka re-authenticates on its connections (KIP-368) as the
session lifetime the broker answers (the token's time left) runs out. A token signed by
another key, expired, or for another audience is refused (the client sees
Kafka's ``invalid_token`` answer) and the broker serves on; no token reaches the broker's log.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from confluent_kafka import Producer
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from compat_tests import sasl_support
from compat_tests._support import EXTERNAL, topic_name
from compat_tests.conftest import _LIVE, BrokerProcess, BrokerStartError, _spawn
from compat_tests.sasl_support import (
    TIMEOUT_S,
    N,
    kafkajs_send_with_token,
    login_errors,
    payloads,
    produce_with_python_token_providers,
)
from proxy.sasl.oauthbearer_jwt import VALIDATOR_CLASS

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own SASL broker")

AUDIENCE, ISSUER = "kafka-broker", "https://idp.test/"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
STRANGER = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # not in the JWKS
JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;"
PREFIX = "listener.name.sasl_plaintext.oauthbearer."
ISSUED: list[str] = []  # every token handed out, to check none reaches the log


def write_jwks(path: Path) -> None:
    rsa_jwk = {**json.loads(RSAAlgorithm.to_jwk(RSA_KEY.public_key())), "kid": "rsa-1"}
    ec_jwk = {**json.loads(ECAlgorithm.to_jwk(EC_KEY.public_key())), "kid": "ec-1"}
    path.write_text(json.dumps({"keys": [{**rsa_jwk, "use": "sig", "alg": "RS256"}, ec_jwk]}))


def token(sub: str, key: Any = RSA_KEY, kid: str = "rsa-1", **claims: Any) -> str:
    now = int(time.time())
    body = {"sub": sub, "iat": now, "exp": now + 3600, "aud": AUDIENCE, "iss": ISSUER, **claims}
    alg = "ES256" if isinstance(key, ec.EllipticCurvePrivateKey) else "RS256"
    signed = jwt.encode(body, key, algorithm=alg, headers={"kid": kid})
    ISSUED.append(signed)
    return signed


def settings(jwks_url: str) -> dict[str, str]:
    return {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        f"{PREFIX}sasl.jaas.config": JAAS,
        f"{PREFIX}sasl.server.callback.handler.class": VALIDATOR_CLASS,
        f"{PREFIX}sasl.oauthbearer.jwks.endpoint.url": jwks_url,
        f"{PREFIX}sasl.oauthbearer.expected.audience": AUDIENCE,
        f"{PREFIX}sasl.oauthbearer.expected.issuer": ISSUER,
    }


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp("kafkad-oauth-jwt")
    write_jwks(tmp / "jwks.json")
    b = _spawn(tmp, "oauth-jwt", settings((tmp / "jwks.json").as_uri()))
    yield b
    code = b.stop()
    _LIVE.remove(b)
    assert code == 0, f"broker exit code {code} on SIGTERM\n{b.log_tail()}"
    log = b.log_path.read_text()
    for issued in ISSUED:
        assert issued.split(".")[2] not in log, "a token reached the broker's log"


def librdkafka(broker: BrokerProcess, make_token: Any, **extra: Any) -> dict[str, Any]:
    def oauth_cb(_config: str) -> tuple[str, float]:
        return make_token(), time.time() + 3600

    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": oauth_cb,
        **extra,
    }


def consume(broker: BrokerProcess, topic: str, n: int) -> list[bytes]:
    # the reader logs in with the EC key's token
    return sasl_support.consume(
        librdkafka(broker, lambda: token("reader", EC_KEY, "ec-1")), topic, n
    )


def test_confluent_kafka_produces_and_consumes_with_signed_tokens(broker: BrokerProcess) -> None:
    topic = topic_name("oauth-jwt-ck")
    producer = Producer(librdkafka(broker, lambda: token("writer")))
    for v in payloads(topic):
        producer.produce(topic, v)
    assert producer.flush(TIMEOUT_S) == 0
    assert consume(broker, topic, N) == payloads(topic)


@pytest.mark.parametrize(
    ("make_token", "why"),
    [
        (lambda: token("mallory", STRANGER), "Signature verification failed"),  # another key
        (lambda: token("mallory", STRANGER, "unknown"), "no key of the JWKS"),
        (lambda: token("old", exp=int(time.time()) - 120), "expired"),
        (lambda: token("web", aud="web-app"), "audience"),
        (lambda: token("evil", iss="https://evil.test/"), "issuer"),
    ],
)
def test_a_refused_token_fails_with_invalid_token_and_the_broker_serves_on(
    broker: BrokerProcess, make_token: Any, why: str
) -> None:
    since = broker.log_size()
    errors = login_errors(librdkafka(broker, make_token))
    assert any("invalid_token" in e for e in errors), errors
    refused = [x for x in broker.log_tail(since).splitlines() if "token refused" in x]
    assert refused and why in refused[0], refused
    good = Producer(librdkafka(broker, lambda: token("writer")))
    assert good.list_topics(timeout=TIMEOUT_S).topics is not None


def test_confluent_kafka_reauthenticates_with_fresh_short_lived_tokens(
    broker: BrokerProcess,
) -> None:
    # KIP-368: SaslAuthenticate answers the token's time left; librdkafka fetches a new token
    # and re-authenticates on the same connection before the broker would close it
    lines: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("rdkafka-reauth")
    logger.addHandler(Capture())
    logger.setLevel(logging.DEBUG)
    lifetimes: list[int] = []

    def short(_config: str) -> tuple[str, float]:
        now = int(time.time())
        return token("writer", iat=now, exp=now + 6), now + 6

    topic = topic_name("oauth-jwt-reauth")
    cfg = {**librdkafka(broker, lambda: ""), "oauth_cb": short, "debug": "security"}
    producer = Producer({**cfg, "logger": logger})
    failed: list[Any] = []
    sent, start = 0, time.monotonic()
    while time.monotonic() - start < 15:
        producer.produce(topic, b"r", on_delivery=lambda e, _m: failed.append(e) if e else None)
        sent += 1
        producer.poll(0.2)
    assert producer.flush(TIMEOUT_S) == 0 and failed == []
    for line in lines:
        m = re.search(r"Received session lifetime (\d+) ms", line)
        if m:
            lifetimes.append(int(m.group(1)))
    assert lifetimes and max(lifetimes) <= 6000, lifetimes  # the token's, not years
    assert any("Auth in state REAUTH" in x for x in lines)
    assert consume(broker, topic, sent) == [b"r"] * sent


def test_kafka_python_and_aiokafka_token_providers(broker: BrokerProcess) -> None:
    topic = topic_name("oauth-jwt-py")
    produce_with_python_token_providers(
        broker.bootstrap, topic, lambda: token("kp"), lambda: token("aio", EC_KEY, "ec-1")
    )
    assert consume(broker, topic, 2 * N) == payloads(topic) * 2


def test_kafkajs_token_provider(broker: BrokerProcess) -> None:
    topic = topic_name("oauth-jwt-kjs")
    kafkajs_send_with_token(broker.bootstrap, topic, token("kjs"))
    assert consume(broker, topic, N) == [b"kjs"] * N


def test_an_https_jwks_endpoint_stops_the_start_with_a_message(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    tmp = tmp_path_factory.mktemp("kafkad-oauth-https")
    with pytest.raises(BrokerStartError) as exc:
        _spawn(tmp, "oauth-https", settings("https://idp.test/keys"))
    _LIVE.pop()
    assert "reads the JWKS from a file: URL only" in str(exc.value)
