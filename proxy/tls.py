"""TLS for SSL listeners: Kafka's ``ssl.*`` broker configs, the server's ``ssl.SSLContext``,
and the handshake that turns an accepted TCP stream into a TLS stream (proxy/tls_stream.py) and a
principal.

Configs are Kafka's names and rules (SslConfigs, BrokerSecurityConfigs, DefaultSslEngineFactory):
each ``ssl.X`` may be overridden for one listener as ``listener.name.<name>.ssl.X`` (the name
lower-cased, as Kafka's ListenerName.configPrefix writes it), key by key. The keystore is the
server's key and certificate chain (``ssl.keystore.location``, or inline ``ssl.keystore.key`` +
``ssl.keystore.certificate.chain``; an encrypted key's password in ``ssl.key.password``); the
truststore the CAs that sign client certificates (``ssl.truststore.location`` or inline
``ssl.truststore.certificates``). ``ssl.client.auth``: ``none`` asks for no certificate,
``requested`` asks and accepts none, ``required`` closes a connection without one. A
certificate that does not chain to the truststore fails the handshake in both latter modes. As
in Kafka, a SASL_SSL listener takes ``ssl.client.auth`` only from its listener prefix (the
global one is for SSL listeners; a warning says so).
The handshake runs in the connection's own task, under ``connections.max.idle.ms`` (Kafka's
Selector closes a connection idle that long, handshaking or not), so a client that connects
and says nothing never holds up the accept loop or another connection.

Deviations from Kafka:
- PEM only. ``ssl.keystore.type`` / ``ssl.truststore.type`` default to JKS as in Kafka, and a
  JKS or PKCS12 store is refused with a config error naming PEM (convert with ``keytool`` /
  ``openssl``, or make throwaway PEM files with ``kafkad certs DIR``). Kafka reads only PKCS#8
  PEM keys; OpenSSL also reads the traditional ``RSA/EC PRIVATE KEY`` forms. The type is
  kept as given and compared with ``PEM`` case-sensitively, as Kafka's ``PEM_TYPE.equals``
  (``pem`` is a Java KeyStore type Kafka cannot load; DescribeConfigs shows ``pem``).
- ``ssl.enabled.protocols`` may name TLSv1.2 and TLSv1.3 only (Kafka passes any name on to the
  JVM, whose defaults refuse the older ones at handshake time).
- ``ssl.cipher.suites`` must be empty (OpenSSL's defaults): Java's suite names are not
  OpenSSL's, and a silently ignored list would be weaker than asked for.
- ``ssl.protocol``, ``ssl.provider``, ``ssl.keymanager.algorithm``,
  ``ssl.trustmanager.algorithm`` and ``ssl.secure.random.implementation`` are JVM settings:
  accepted and not used. ``ssl.endpoint.identification.algorithm`` is the client's check of the
  broker's host name; a broker accepts it and does not use it (as Kafka's broker, which never
  checks client host names). ``ssl.engine.factory.class`` (a Java class) is refused.
- An inline key (``ssl.keystore.key``) is handed to OpenSSL through a private temporary file
  (mode 0600, removed at once): the standard library loads keys from files only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import ssl
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from proxy.broker_config_types import listener_prefixed
from proxy.config_ranges import at_least
from proxy.connection_quota_config import PER_LISTENER as QUOTA_PER_LISTENER
from proxy.listeners import LISTENER_PREFIX, listener_value
from proxy.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from proxy.sasl.settings import SASL_CONFIGS, SASL_MECHANISM_CONFIGS
from proxy.ssl_principal import SslPrincipalMapper, certificate_dn, check_rules
from proxy.tls_stream import TlsStream
from wire.values import INT_MAX

log = logging.getLogger("kafkad.tls")

TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
PEM = "PEM"
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def _protocol_list(v: str) -> str:
    names = [p.strip() for p in v.split(",") if p.strip()]
    unknown = [p for p in names if p not in _VERSIONS]
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: kafkad serves TLSv1.2 and TLSv1.3")
    if not names:
        raise ValueError("no protocol enabled (give TLSv1.2, TLSv1.3 or both)")
    return ",".join(names)


def _client_auth(v: str) -> str:
    """Kafka's ValidString.in(required, requested, none): the lower-case names only (its STRING
    values are trimmed; ``REQUIRED`` is refused, as by 4.2's ConfigDef)."""
    v = v.strip()
    if v not in ("required", "requested", "none"):
        raise ValueError("String must be one of: required, requested, none")
    return v


def _bool(v: str) -> bool:
    if v.lower() not in ("true", "false"):
        raise ValueError("expected true or false")
    return v.lower() == "true"


def _empty_only(why: str) -> Callable[[str], str]:
    def parse(v: str) -> str:
        if v:
            raise ValueError(why)
        return v

    return parse


# name -> (parser, default): Kafka's broker-side ssl.* configs and defaults.
SSL_CONFIGS: Mapping[str, tuple[Callable[[str], Any], str]] = {
    "ssl.protocol": (str, "TLSv1.3"),
    "ssl.enabled.protocols": (_protocol_list, "TLSv1.2,TLSv1.3"),
    "ssl.cipher.suites": (
        _empty_only("kafkad uses OpenSSL's default cipher suites; leave it empty"),
        "",
    ),
    "ssl.client.auth": (_client_auth, "none"),
    "ssl.keystore.type": (str, "JKS"),
    "ssl.keystore.location": (str, ""),
    "ssl.keystore.password": (str, ""),
    "ssl.keystore.key": (str, ""),
    "ssl.keystore.certificate.chain": (str, ""),
    "ssl.key.password": (str, ""),
    "ssl.truststore.type": (str, "JKS"),
    "ssl.truststore.location": (str, ""),
    "ssl.truststore.password": (str, ""),
    "ssl.truststore.certificates": (str, ""),
    "ssl.endpoint.identification.algorithm": (str, "https"),
    "ssl.principal.mapping.rules": (check_rules, "DEFAULT"),
    "ssl.provider": (str, ""),
    "ssl.keymanager.algorithm": (str, "SunX509"),
    "ssl.trustmanager.algorithm": (str, "PKIX"),
    "ssl.secure.random.implementation": (str, ""),
    "ssl.engine.factory.class": (
        _empty_only("a Java class; kafkad builds its TLS engine itself"),
        "",
    ),
    # BrokerSecurityConfigs: whether a dynamic keystore update may change the certificate's
    # subject / subject alternative names (proxy/dynamic_tls.py)
    "ssl.allow.dn.changes": (_bool, "false"),
    "ssl.allow.san.changes": (_bool, "false"),
}
# Configs a listener may override with its listener.name.<name>. prefix, each with its parser.
PER_LISTENER: dict[str, Callable[[str], Any]] = {
    **{n: p for n, (p, _) in SSL_CONFIGS.items()},
    **{n: p for n, (p, _) in SASL_CONFIGS.items()},
    **SASL_MECHANISM_CONFIGS,
    # a listener's connection quotas (proxy/connection_quota_config.py), INTs of at least 0
    **dict.fromkeys(QUOTA_PER_LISTENER, at_least(0, INT_MAX)),
}


def per_listener_base(name: str) -> str | None:
    """The config ``listener.name.<listener>.<config>`` overrides (None: not such a name)."""
    parts = listener_prefixed(name)
    return None if parts is None or parts[1] not in PER_LISTENER else parts[1]


class TlsConfigError(ValueError):
    pass


@dataclass(frozen=True)
class TlsSettings:
    listener: str
    context: ssl.SSLContext
    mapper: SslPrincipalMapper
    client_auth: str


def _prefix(listener: str, name: str, values: Mapping[str, Any]) -> str:
    """The name a listener's setting was given under (for error messages)."""
    prefixed = f"{LISTENER_PREFIX}{listener.lower()}.{name}"
    return prefixed if prefixed in values else name


def _check_store(kind: str, get: Callable[[str], Any], named: Callable[[str], str]) -> None:
    """Kafka's createKeystore/createTruststore rules, for PEM."""
    store_type = get(f"ssl.{kind}.type")
    inline = get("ssl.keystore.key") if kind == "keystore" else get("ssl.truststore.certificates")
    location = get(f"ssl.{kind}.location")
    password = get(f"ssl.{kind}.password")
    if store_type != PEM and (location or inline):
        raise TlsConfigError(
            f"{named(f'ssl.{kind}.type')}={store_type}: kafkad reads PEM {kind}s only; set "
            f"{named(f'ssl.{kind}.type')}=PEM with PEM files (convert a {store_type} store with "
            "keytool and openssl, or make throwaway ones with `kafkad certs DIR`)"
        )
    if inline and location:
        raise TlsConfigError(
            f"both {named(f'ssl.{kind}.location')} and the inline "
            f"{named('ssl.keystore.key' if kind == 'keystore' else 'ssl.truststore.certificates')}"
            " are given: give one"
        )
    if password:
        raise TlsConfigError(
            f"{named(f'ssl.{kind}.password')}: a PEM {kind} has no store password"
            + (" (an encrypted key's password is ssl.key.password)" if kind == "keystore" else "")
        )
    if kind == "keystore":
        chain = get("ssl.keystore.certificate.chain")
        if inline and not chain:
            raise TlsConfigError(
                f"{named('ssl.keystore.key')} is given but "
                f"{named('ssl.keystore.certificate.chain')} is not"
            )
        if chain and not inline:
            raise TlsConfigError(
                f"{named('ssl.keystore.certificate.chain')} is given but "
                f"{named('ssl.keystore.key')} is not"
            )


@contextlib.contextmanager
def _private_file(text: str) -> Iterator[str]:
    fd, path = tempfile.mkstemp(prefix="kafkad-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(text)
        yield path
    finally:
        os.unlink(path)


def _load_keystore(
    ctx: ssl.SSLContext, get: Callable[[str], Any], named: Callable[[str], str]
) -> None:
    location = get("ssl.keystore.location")
    where = named("ssl.keystore.location") if location else named("ssl.keystore.key")

    def no_password() -> str:  # called by OpenSSL for an encrypted key (never a tty prompt)
        raise TlsConfigError(f"{where}: the key is encrypted, and ssl.key.password is not set")

    password: str | Callable[[], str] = get("ssl.key.password") or no_password
    try:
        if location:
            if not Path(location).is_file():
                raise TlsConfigError(f"{named('ssl.keystore.location')}={location}: no such file")
            ctx.load_cert_chain(location, password=password)
        else:
            key, chain = get("ssl.keystore.key"), get("ssl.keystore.certificate.chain")
            with _private_file(chain.strip() + "\n" + key.strip() + "\n") as path:
                ctx.load_cert_chain(path, password=password)
    except ssl.SSLError as exc:
        hint = " (is ssl.key.password right?)" if "BAD_DECRYPT" in str(exc) else ""
        raise TlsConfigError(
            f"{where}: cannot load the key and certificate chain: {exc.reason or exc}{hint}"
        ) from None


def _load_truststore(
    ctx: ssl.SSLContext, get: Callable[[str], Any], named: Callable[[str], str]
) -> bool:
    location = get("ssl.truststore.location")
    inline = get("ssl.truststore.certificates")
    try:
        if location:
            if not Path(location).is_file():
                raise TlsConfigError(f"{named('ssl.truststore.location')}={location}: no such file")
            ctx.load_verify_locations(cafile=location)
        elif inline:
            ctx.load_verify_locations(cadata=inline)
        else:
            return False
    except ssl.SSLError as exc:
        where = named("ssl.truststore.location" if location else "ssl.truststore.certificates")
        raise TlsConfigError(f"{where}: cannot load the CA certificates: {exc}") from None
    return True


def server_settings(
    values: Mapping[str, Any], listener: str, protocol: str = "SSL", *, warn: bool = True
) -> TlsSettings:
    """The TLS settings of ``listener`` (an SSL or SASL_SSL one, ``protocol``); raises
    TlsConfigError naming the config that is wrong. ``warn``: log Kafka's warning about a
    global ssl.client.auth that a SASL_SSL listener does not take."""

    def get(name: str) -> Any:
        return listener_value(values, listener, name)

    def named(name: str) -> str:
        return _prefix(listener, name, values)

    _check_store("keystore", get, named)
    _check_store("truststore", get, named)
    if not get("ssl.keystore.location") and not get("ssl.keystore.key"):
        raise TlsConfigError(
            f"listener {listener} is TLS but has no keystore: set ssl.keystore.type=PEM and "
            "ssl.keystore.location (or the inline ssl.keystore.key and "
            "ssl.keystore.certificate.chain)"
        )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_VERSIONS[p] for p in get("ssl.enabled.protocols").split(","))
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    # No TLS 1.3 session tickets: Kafka clients do not resume sessions, and the tickets,
    # written after the handshake, cost a signature each and a Nagle-delayed first reply.
    ctx.num_tickets = 0
    ctx.options |= ssl.OP_NO_RENEGOTIATION  # proxy/tls_stream.py relies on it
    _load_keystore(ctx, get, named)
    has_trust = _load_truststore(ctx, get, named)
    client_auth = get("ssl.client.auth")
    if (
        protocol == "SASL_SSL"
        and f"{LISTENER_PREFIX}{listener.lower()}.ssl.client.auth" not in values
    ):
        # Kafka's ChannelBuilders: only a listener-prefixed ssl.client.auth applies to SASL_SSL
        if client_auth != "none" and warn:
            log.warning(
                "Broker configuration 'ssl.client.auth' is applied only to SSL listeners. "
                "Listener-prefixed configuration can be used to enable SSL client "
                "authentication for SASL_SSL listeners (listener %s: "
                "listener.name.%s.ssl.client.auth).",
                listener,
                listener.lower(),
            )
        client_auth = "none"
    if client_auth != "none" and not has_trust:
        raise TlsConfigError(
            f"{named('ssl.client.auth')}={client_auth} needs a truststore (the CAs that sign "
            "client certificates): set ssl.truststore.type=PEM and ssl.truststore.location "
            "(or ssl.truststore.certificates)"
        )
    ctx.verify_mode = {
        "none": ssl.CERT_NONE,
        "requested": ssl.CERT_OPTIONAL,
        "required": ssl.CERT_REQUIRED,
    }[client_auth]
    mapper = SslPrincipalMapper(get("ssl.principal.mapping.rules"))
    return TlsSettings(listener, ctx, mapper, client_auth)


class HandshakeFailed(Exception):
    """The TLS handshake failed or timed out; the message says why (no secrets)."""


async def accept_tls(
    stream: trio.abc.Stream, settings: TlsSettings, timeout_s: float
) -> tuple[TlsStream, KafkaPrincipal]:
    """Handshake as the server; returns the TLS stream and the client's principal (from its
    certificate, else ANONYMOUS). Raises HandshakeFailed."""
    tls = TlsStream(stream, settings.context)
    with trio.move_on_after(timeout_s) as waited:
        try:
            await tls.do_handshake()
        except trio.BrokenResourceError as exc:
            cause = exc.__cause__
            why = getattr(cause, "reason", None) or str(cause or exc) or "connection lost"
            if isinstance(cause, ssl.SSLCertVerificationError):
                why = f"{why} ({cause.verify_message})"
            raise HandshakeFailed(f"TLS handshake failed: {why}") from None
    if waited.cancelled_caught:
        raise HandshakeFailed(f"TLS handshake not done within {timeout_s:g}s")
    der = tls.getpeercert(binary_form=True)
    if not der:
        return tls, ANONYMOUS
    try:
        dn = certificate_dn(der)
    except ValueError as exc:  # OpenSSL accepted it; cryptography is stricter about DER
        raise HandshakeFailed(f"cannot read the client certificate's subject: {exc}") from None
    try:
        return tls, KafkaPrincipal(USER_TYPE, settings.mapper.name(dn))
    except ValueError as exc:  # NoMatchingRule, or a replacement Java would refuse
        raise HandshakeFailed(
            f"failed to map name for {dn!r} based on SSL principal mapping rules: {exc}"
        ) from None
