"""The kafkad CLI's client properties (kafkad/client/security.py), as Kafka's tools read them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkad.client.errors import ClientError
from kafkad.client.security import from_properties, read_properties
from proxy.certs import write_certs


def test_plaintext_by_default() -> None:
    s = from_properties({})
    assert (s.protocol, s.tls, s.mechanism) == ("PLAINTEXT", None, None)


def test_sasl_credentials_from_java_jaas_or_librdkafka_names() -> None:
    java = from_properties(
        {
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="alice" password="s3cret";',
        }
    )
    assert (java.protocol, java.mechanism, java.username, java.password) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-512",
        "alice",
        "s3cret",
    )
    rdkafka = from_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "bob",
            "sasl.password": "pw",
        }
    )
    assert (rdkafka.mechanism, rdkafka.username, rdkafka.password) == ("PLAIN", "bob", "pw")
    assert "pw" not in repr(rdkafka)  # never printed


@pytest.mark.parametrize(
    ("props", "why"),
    [
        ({"security.protocol": "SSH"}, "security.protocol=SSH"),
        ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.mechanism=GSSAPI"),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
            "SASL needs sasl.jaas.config",
        ),
        (
            {"security.protocol": "SSL", "ssl.truststore.type": "JKS"},
            "reads PEM stores",
        ),
    ],
)
def test_what_it_cannot_do_is_one_clear_error(props: dict[str, str], why: str) -> None:
    with pytest.raises(ClientError, match=why):
        from_properties(props)


def test_the_client_properties_kafkad_certs_writes(tmp_path: Path) -> None:
    write_certs(tmp_path)
    s = from_properties(read_properties(str(tmp_path / "client.properties")))
    assert s.protocol == "SSL" and s.tls is not None and s.mechanism is None
    with pytest.raises(ClientError, match="cannot read --command-config"):
        read_properties(str(tmp_path / "missing.properties"))
