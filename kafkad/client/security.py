"""How the ``kafkad`` client CLI connects: Kafka's client configs from ``--command-config FILE``
(the option Kafka's own tools take), so the ``client.properties`` that ``kafkad certs`` writes,
or an application's, works as it is.

Read: ``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); TLS from the Java names
with PEM stores (``ssl.truststore.location``, ``ssl.keystore.location`` holding key and
certificate, ``ssl.key.password``; or inline: ``ssl.truststore.certificates``,
``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``) or librdkafka's (``ssl.ca.location``,
``ssl.certificate.location``, ``ssl.key.location``); ``ssl.endpoint.identification.algorithm``
empty turns host-name checking off, as in Kafka. SASL: ``sasl.mechanism`` PLAIN,
SCRAM-SHA-256 or SCRAM-SHA-512, the credentials from ``sasl.jaas.config``
(``username="..." password="..."``, Java's form) or ``sasl.username`` / ``sasl.password``
(librdkafka's). Not supported here: OAUTHBEARER, GSSAPI, JKS/PKCS12 stores (said so).
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafkad.client.errors import ClientError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class Security:
    protocol: str = "PLAINTEXT"
    tls: ssl.SSLContext | None = None
    check_hostname: bool = True
    mechanism: str | None = None
    username: str = ""
    password: str = field(default="", repr=False)


def read_properties(path: str) -> dict[str, str]:
    from proxy.properties_file import ConfigError, parse_properties

    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ClientError(f"cannot read --command-config {path}: {exc.strerror or exc}") from exc
    try:
        return parse_properties(text, f"--command-config {path}")
    except ConfigError as exc:
        raise ClientError(str(exc)) from exc


def from_properties(props: Mapping[str, str]) -> Security:
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise ClientError(f"security.protocol={protocol}: one of {', '.join(PROTOCOLS)}")
    tls = _tls(props) if protocol in ("SSL", "SASL_SSL") else None
    mechanism = None
    username = password = ""
    if protocol.startswith("SASL"):
        mechanism = props.get("sasl.mechanism", props.get("sasl.mechanisms", "GSSAPI")).upper()
        if mechanism not in MECHANISMS:
            raise ClientError(
                f"sasl.mechanism={mechanism}: the kafkad CLI speaks {', '.join(MECHANISMS)}"
            )
        username, password = _credentials(props)
    check = props.get("ssl.endpoint.identification.algorithm", "https") != ""
    return Security(protocol, tls, check, mechanism, username, password)


def _tls(props: Mapping[str, str]) -> ssl.SSLContext:
    for name in ("ssl.truststore.type", "ssl.keystore.type"):
        if props.get(name, "PEM").upper() != "PEM":
            raise ClientError(f"{name}={props[name]}: the kafkad CLI reads PEM stores")
    ca_name = _first(
        props, "ssl.truststore.location", "ssl.ca.location", "ssl.truststore.certificates"
    )
    ca = props.get(ca_name) if ca_name else None
    try:
        if ca_name == "ssl.truststore.certificates":  # Kafka's inline PEM certificates
            ctx = ssl.create_default_context(cadata=pem_lines(ca or ""))
        else:
            ctx = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
    except (OSError, ssl.SSLError) as exc:  # a missing file, or no PEM certificate in it
        shown = "(inline)" if ca_name == "ssl.truststore.certificates" else ca
        raise ClientError(f"{ca_name}={shown}: cannot load CA certificates: {_why(exc)}") from exc
    cert_name = _first(props, "ssl.keystore.location", "ssl.certificate.location")
    password = props.get("ssl.key.password") or None
    if cert_name:
        cert, key = props[cert_name], props.get("ssl.key.location") or None
        try:
            ctx.load_cert_chain(cert, key, password)
        except (OSError, ssl.SSLError) as exc:
            where = f"{cert_name}={cert}" + (f", ssl.key.location={key}" if key else "")
            raise ClientError(f"{where}: cannot load the key and certificate: {_why(exc)}") from exc
    elif props.get("ssl.keystore.key") or props.get("ssl.keystore.certificate.chain"):
        _load_inline_keystore(ctx, props, password)
    return ctx


def _load_inline_keystore(
    ctx: ssl.SSLContext, props: Mapping[str, str], password: str | None
) -> None:
    """Kafka's inline PEM keystore (``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``),
    through a private temporary file (OpenSSL loads a key from a file only)."""
    key, chain = props.get("ssl.keystore.key", ""), props.get("ssl.keystore.certificate.chain", "")
    if not (key and chain):
        raise ClientError(
            "an inline keystore needs ssl.keystore.key and ssl.keystore.certificate.chain"
        )
    fd, path = tempfile.mkstemp(prefix="kafkad-cli-", suffix=".pem")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(pem_lines(chain) + pem_lines(key))
        ctx.load_cert_chain(path, password=password)
    except (OSError, ssl.SSLError, UnicodeError) as exc:
        raise ClientError(
            f"ssl.keystore.key / ssl.keystore.certificate.chain: cannot load the key and "
            f"certificate: {_why(exc)}"
        ) from exc
    finally:
        os.unlink(path)


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


def pem_lines(text: str) -> str:
    """Inline PEM as OpenSSL reads it: a value written on one line, or with ``\\``
    continuation lines as Kafka's docs show it, arrives with spaces for its line breaks;
    Kafka's PEM parser ignores whitespace inside a block, so each block is re-wrapped here."""
    out = []
    for kind, body in _PEM_BLOCK.findall(text):
        b64 = "".join(body.split())
        lines = [b64[i : i + 64] for i in range(0, len(b64), 64)]
        out.append("\n".join([f"-----BEGIN {kind}-----", *lines, f"-----END {kind}-----"]) + "\n")
    return "".join(out) or text


def _first(props: Mapping[str, str], *names: str) -> str | None:
    """The first of ``names`` set to a non-empty value."""
    return next((n for n in names if props.get(n)), None)


def _why(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)


def _credentials(props: Mapping[str, str]) -> tuple[str, str]:
    if "sasl.username" in props:
        return props["sasl.username"], props.get("sasl.password", "")
    jaas = props.get("sasl.jaas.config", "")
    if not jaas:
        raise ClientError("SASL needs sasl.jaas.config (or sasl.username and sasl.password)")
    from proxy.sasl.settings import parse_jaas

    try:
        _module, options = parse_jaas(jaas)
    except ValueError as exc:
        raise ClientError(f"sasl.jaas.config: {exc}") from exc
    return options.get("username", ""), options.get("password", "")


def authenticate(
    security: Security,
    exchange: Callable[[int, int, Mapping[str, object]], object],
    address: str,
) -> None:
    """SaslHandshake v1 then SaslAuthenticate until the mechanism is done; ``exchange`` sends a
    request (api key, version, fields) and returns the decoded response."""
    assert security.mechanism is not None
    shook: object = exchange(17, 1, {"mechanism": security.mechanism})
    if getattr(shook, "error_code", 0):
        offered = ", ".join(getattr(shook, "mechanisms", ()))
        if not offered:  # ILLEGAL_SASL_STATE: a PLAINTEXT or SSL listener (KafkaApis answers so)
            raise ClientError(
                f"{address} is not a SASL listener: security.protocol="
                f"{security.protocol} does not match it"
            )
        raise ClientError(
            f"{address} does not accept SASL {security.mechanism} (it offers {offered})"
        )

    def step(token: bytes) -> bytes:
        resp = exchange(36, 1, {"auth_bytes": token})
        if getattr(resp, "error_code", 0):
            why = getattr(resp, "error_message", None) or "authentication failed"
            raise ClientError(f"{address}: SASL {security.mechanism} authentication failed: {why}")
        return bytes(getattr(resp, "auth_bytes", b""))

    if security.mechanism == "PLAIN":
        step(f"\0{security.username}\0{security.password}".encode())
        return
    from scramp import ScramClient

    client = ScramClient([security.mechanism], security.username, security.password)
    client.set_server_first(step(client.get_client_first().encode()).decode())
    client.set_server_final(step(client.get_client_final().encode()).decode())
