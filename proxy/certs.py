"""``kafkad certs DIR``: throwaway TLS material for a local secure broker (not for production).

Writes, into DIR (made if missing; existing files are not overwritten without ``--force``):

- ``ca.crt`` / ``ca.key``: a self-signed CA (the key is needed only to sign more certificates);
- ``server.pem``: the broker's PKCS#8 key and its certificate (for ``localhost``, ``127.0.0.1``
  and ``::1``), one PEM file as Kafka's ``ssl.keystore.type=PEM`` reads it;
- ``client.key`` / ``client.crt`` (and both in ``client.pem``): a client certificate whose
  subject is ``CN=client,O=kafkad`` (the principal ``User:CN=client,O=kafkad`` by default);
- ``server.properties``: an SSL listener on 127.0.0.1:9093 with mutual TLS, for
  ``kafkad serve --config DIR/server.properties`` (Apache Kafka reads the same lines);
- ``client.properties`` (Java clients, Kafka's names) and ``librdkafka.properties`` (kcat -F,
  confluent-kafka).

Keys are EC P-256; the certificates last 365 days. Private key files are mode 0600.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DAYS = 365
CLIENT_SUBJECT = "CN=client,O=kafkad"
FILES = (
    "ca.crt",
    "ca.key",
    "server.pem",
    "client.key",
    "client.crt",
    "client.pem",
    "server.properties",
    "client.properties",
    "librdkafka.properties",
)


@dataclass(frozen=True)
class _Issued:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kafkad"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def _issue(
    subject: x509.Name,
    issuer: _Issued | None,
    *,
    ca: bool = False,
    usage: x509.ObjectIdentifier | None = None,
    sans: list[x509.GeneralName] | None = None,
) -> _Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    signer_key = issuer.key if issuer else key
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.cert.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=DAYS))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(signer_key.public_key()),
            critical=False,
        )
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
    else:
        builder = builder.add_extension(
            x509.KeyUsage(True, False, True, False, False, False, False, False, False),
            critical=True,
        )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return _Issued(key, builder.sign(signer_key, hashes.SHA256()))


def _write(path: Path, data: bytes, private: bool = False) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def write_certs(directory: Path, *, force: bool = False) -> list[Path]:
    """Writes every file of FILES into ``directory``; returns their paths. Raises
    FileExistsError (naming the files) if any exists and not ``force``."""
    directory.mkdir(parents=True, exist_ok=True)
    d = directory.resolve()
    existing = [name for name in FILES if (d / name).exists()]
    if existing and not force:
        raise FileExistsError(f"{d} already has {', '.join(existing)} (use --force to overwrite)")
    ca = _issue(_name("kafkad dev CA"), None, ca=True)
    server = _issue(
        _name("localhost"),
        ca,
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
        sans=[
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("::1")),
        ],
    )
    client = _issue(_name("client"), ca, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    _write(d / "ca.crt", ca.cert_pem())
    _write(d / "ca.key", ca.key_pem(), private=True)
    _write(d / "server.pem", server.key_pem() + server.cert_pem(), private=True)
    _write(d / "client.key", client.key_pem(), private=True)
    _write(d / "client.crt", client.cert_pem())
    _write(d / "client.pem", client.key_pem() + client.cert_pem(), private=True)
    _write(d / "server.properties", _server_properties(d).encode())
    _write(d / "client.properties", _client_properties(d).encode())
    _write(d / "librdkafka.properties", _librdkafka_properties(d).encode())
    return [d / name for name in FILES]


def _server_properties(d: Path) -> str:
    return (
        "# kafkad serve --config THIS_FILE (mutual TLS on 127.0.0.1:9093)\n"
        "listeners=SSL://127.0.0.1:9093\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={d / 'server.pem'}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={d / 'ca.crt'}\n"
        "ssl.client.auth=required\n"
    )


def _client_properties(d: Path) -> str:
    return (
        "# Java clients and Kafka's tools (--command-config / --consumer.config)\n"
        "security.protocol=SSL\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={d / 'ca.crt'}\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={d / 'client.pem'}\n"
    )


def _librdkafka_properties(d: Path) -> str:
    return (
        "# librdkafka: kcat -F THIS_FILE, or these keys in a confluent-kafka config dict\n"
        "security.protocol=ssl\n"
        f"ssl.ca.location={d / 'ca.crt'}\n"
        f"ssl.certificate.location={d / 'client.crt'}\n"
        f"ssl.key.location={d / 'client.key'}\n"
    )
