"""TLS toward clients and toward the upstream, for ``kafkad proxy`` (issue 22).

Toward clients the proxy is a TLS server exactly as a kafkad SSL listener is: the same
Kafka ``ssl.*`` names (``ssl.keystore.location``, ``ssl.client.auth``, ...; see
``proxy/tls.py``), given with ``--set`` and turned on by ``--tls``. Every listener the proxy
opens (bootstrap and one per upstream broker) speaks TLS then.

Toward the upstream it is a TLS client, as a Kafka client with ``security.protocol=SSL``:
``upstream.ssl.truststore.location`` (PEM CAs; the system's CAs when unset),
``upstream.ssl.keystore.location`` (a PEM key and chain, for an upstream that requires client
certificates; ``upstream.ssl.key.password`` if the key is encrypted) and
``upstream.ssl.endpoint.identification.algorithm`` (``https``, the default as in Kafka's
clients: the upstream's certificate must name the host the proxy connects to; empty: no
check). Turned on by ``--upstream-tls``.

SASL is not terminated: its frames pass through (``connection.py``), so a client
authenticates to the upstream as itself, over TLS on both legs with SASL_SSL.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path

from proxy.tls import SSL_CONFIGS, TlsConfigError, TlsSettings, server_settings

UPSTREAM_PREFIX = "upstream."
UPSTREAM_SSL = (
    "ssl.truststore.location",
    "ssl.keystore.location",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
)
CLIENT_FACING_SSL = tuple(SSL_CONFIGS)
SETTINGS = (*CLIENT_FACING_SSL, *(UPSTREAM_PREFIX + n for n in UPSTREAM_SSL))


def client_facing(values: Mapping[str, str]) -> TlsSettings:
    """The TLS server settings toward clients from ``ssl.*`` values; TlsConfigError."""
    parsed = {name: parse(default) for name, (parse, default) in SSL_CONFIGS.items()}
    for name, value in values.items():
        if name in SSL_CONFIGS:
            try:
                parsed[name] = SSL_CONFIGS[name][0](value)
            except ValueError as exc:
                raise TlsConfigError(f"{name}: {exc}") from None
    return server_settings(parsed, "PROXY", "SSL")


def upstream_context(values: Mapping[str, str]) -> ssl.SSLContext:
    """The TLS client context toward the upstream from ``upstream.ssl.*``; TlsConfigError."""

    def get(name: str) -> str:
        return values.get(UPSTREAM_PREFIX + name, "")

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    trust = get("ssl.truststore.location")
    try:
        if trust:
            if not Path(trust).is_file():
                raise TlsConfigError(f"upstream.ssl.truststore.location={trust}: no such file")
            ctx.load_verify_locations(cafile=trust)
        else:
            ctx.load_default_certs()
        keystore = get("ssl.keystore.location")
        if keystore:
            if not Path(keystore).is_file():
                raise TlsConfigError(f"upstream.ssl.keystore.location={keystore}: no such file")
            ctx.load_cert_chain(keystore, password=get("ssl.key.password") or None)
    except ssl.SSLError as exc:
        raise TlsConfigError(f"upstream TLS: {exc.reason or exc}") from None
    algorithm = values.get(UPSTREAM_PREFIX + "ssl.endpoint.identification.algorithm", "https")
    if algorithm not in ("https", ""):
        raise TlsConfigError(
            f"upstream.ssl.endpoint.identification.algorithm={algorithm}: 'https' or empty"
        )
    ctx.check_hostname = algorithm == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx
