"""The kafkad CLI's client properties (kafkad/client/security.py), as Kafka's tools read them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace

import pytest

from kafkad.client.errors import ClientError
from kafkad.client.security import authenticate, from_properties, pem_lines, read_properties
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


@pytest.mark.parametrize(
    ("props", "why"),
    [
        (
            {"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent/ca.crt"},
            "ssl.truststore.location=/nonexistent/ca.crt: cannot load CA certificates: "
            "No such file or directory",
        ),
        (
            {"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"},
            "ssl.ca.location=/nonexistent/ca.pem: cannot load CA",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "ssl.certificate.location": "/nonexistent/c.crt",
                "ssl.key.location": "/nonexistent/c.key",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "u",
            },
            "ssl.certificate.location=/nonexistent/c.crt, ssl.key.location=/nonexistent/c.key: "
            "cannot load the key and certificate",
        ),
    ],
)
def test_a_tls_file_that_cannot_be_read_is_named(props: dict[str, str], why: str) -> None:
    # was "unexpected FileNotFoundError: [Errno 2] No such file or directory", naming no file
    with pytest.raises(ClientError, match=re.escape(why)):
        from_properties(props)


def test_a_file_that_is_no_pem_is_named(tmp_path: Path) -> None:
    junk = tmp_path / "ca.jks"
    junk.write_bytes(b"\xfe\xed\xfe\xed not PEM")
    with pytest.raises(ClientError, match=r"ssl.truststore.location=.*ca.jks: cannot load CA"):
        from_properties({"security.protocol": "SSL", "ssl.truststore.location": str(junk)})
    with pytest.raises(ClientError, match=r"ssl.keystore.location=.*ca.jks: cannot load the key"):
        from_properties({"security.protocol": "SSL", "ssl.keystore.location": str(junk)})


def test_sasl_against_a_listener_without_sasl_says_so() -> None:
    # kafkad and Kafka answer SaslHandshake on a PLAINTEXT/SSL listener with ILLEGAL_SASL_STATE
    # and no mechanisms: "it offers " with nothing after it was the message before
    sasl = from_properties(
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u"}
    )

    def exchange(api_key: int, version: int, fields: Mapping[str, object]) -> object:
        assert api_key == 17
        return SimpleNamespace(error_code=34, mechanisms=())

    with pytest.raises(ClientError, match="h:1 is not a SASL listener") as info:
        authenticate(sasl, exchange, "h:1")
    assert "offers" not in str(info.value)

    def offers(api_key: int, version: int, fields: Mapping[str, object]) -> object:
        return SimpleNamespace(error_code=33, mechanisms=("SCRAM-SHA-512",))

    with pytest.raises(ClientError, match=r"does not accept SASL PLAIN \(it offers SCRAM-SHA-512"):
        authenticate(sasl, offers, "h:1")


def test_inline_pem_stores_as_kafka_takes_them(tmp_path: Path) -> None:
    # ssl.truststore.certificates and ssl.keystore.key + ssl.keystore.certificate.chain, on one
    # line with \n escapes or with continuation lines (which leave spaces for line breaks)
    write_certs(tmp_path)
    ca = (tmp_path / "ca.crt").read_text().strip()
    crt = (tmp_path / "client.crt").read_text().strip()
    key = (tmp_path / "client.key").read_text().strip()
    for join in ("\\n", " \\\n    "):
        text = "security.protocol=SSL\n" + "".join(
            f"{name}={join.join(value.splitlines())}\n"
            for name, value in (
                ("ssl.truststore.certificates", ca),
                ("ssl.keystore.key", key),
                ("ssl.keystore.certificate.chain", crt),
            )
        )
        path = tmp_path / "inline.properties"
        path.write_text(text)
        s = from_properties(read_properties(str(path)))
        assert s.tls is not None and len(s.tls.get_ca_certs()) == 1
    assert pem_lines(" ".join(ca.splitlines())) == ca + "\n"
    with pytest.raises(
        ClientError, match=r"needs ssl\.keystore\.key and ssl\.keystore\.certificate"
    ):
        from_properties({"security.protocol": "SSL", "ssl.keystore.key": key})
    with pytest.raises(ClientError, match=r"ssl\.truststore\.certificates=\(inline\): cannot load"):
        from_properties({"security.protocol": "SSL", "ssl.truststore.certificates": "junk"})
