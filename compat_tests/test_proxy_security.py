"""``kafkad proxy`` with TLS on both legs and SASL passed through: stock clients over
SASL_SSL to the proxy, in front of a kafkad upstream whose listener is SASL_SSL too (the
SASL broker of ``test_sasl.py``: SCRAM-SHA-512 over TLS). The proxy terminates TLS on each
leg and forwards the SASL exchange unchanged, so the client authenticates to the upstream."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, KafkaProducer

from compat_tests._support import topic_name
from compat_tests.sasl_support import TIMEOUT_S, consume, login_errors, payloads
from compat_tests.test_proxy import ProxyProcess
from compat_tests.test_sasl import SCRAM_PASSWORD, SCRAM_USER, SaslBroker
from compat_tests.test_sasl import broker as broker  # the SASL_SSL upstream (module fixture)

pytestmark = pytest.mark.timeout(120)


def tls_proxy(upstream: SaslBroker, tmp: Path) -> ProxyProcess:
    certs = upstream.certs
    return ProxyProcess(
        upstream.ssl,
        tmp,
        "",
        "--tls",
        "--set",
        "ssl.keystore.type=PEM",
        "--set",
        f"ssl.keystore.location={certs / 'server.pem'}",
        "--upstream-tls",
        "--set",
        f"upstream.ssl.truststore.location={certs / 'ca.crt'}",
    )


def test_sasl_ssl_clients_through_a_tls_proxy(broker: SaslBroker, tmp_path: Path) -> None:
    proxy = tls_proxy(broker, tmp_path)
    try:
        ca = str(broker.certs / "ca.crt")
        cfg = {
            "bootstrap.servers": proxy.bootstrap,
            "security.protocol": "sasl_ssl",
            "ssl.ca.location": ca,
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": SCRAM_USER,
            "sasl.password": SCRAM_PASSWORD,
        }
        topic = topic_name("proxy-sasl-ssl")
        producer = Producer(cfg)
        for v in payloads(topic):
            producer.produce(topic, v)
        assert producer.flush(TIMEOUT_S) == 0
        assert consume(cfg, topic, len(payloads(topic))) == payloads(topic)

        auth = {
            "bootstrap_servers": proxy.bootstrap,
            "security_protocol": "SASL_SSL",
            "ssl_cafile": ca,
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": SCRAM_USER,
            "sasl_plain_password": SCRAM_PASSWORD,
        }
        other = topic_name("proxy-sasl-ssl-kp")
        kp = KafkaProducer(**auth)
        for v in payloads(other):
            kp.send(other, v)
        kp.flush(TIMEOUT_S)
        kp.close()
        consumer = KafkaConsumer(
            other, auto_offset_reset="earliest", consumer_timeout_ms=TIMEOUT_S * 1000, **auth
        )
        got = [m.value for _, m in zip(payloads(other), consumer, strict=False)]
        consumer.close()
        assert got == payloads(other)

        errors = login_errors({**cfg, "sasl.password": "wrong-password"})
        assert any("Authentication failed" in e for e in errors), errors  # the upstream's
    finally:
        assert proxy.stop() == 0, proxy.log_path.read_text()[-5000:]
    log = proxy.log_path.read_text()
    assert SCRAM_PASSWORD not in log and "wrong-password" not in log
    assert "TLS handshake failed" not in log
