"""SSL listeners: the server's side of TLS, driven by the standard library's ``ssl`` client.

The broker runs over in-memory listeners under trio's autojump clock (real TLS bytes, no
sockets), with throwaway certificates from ``kafkad certs`` (``proxy/certs.py``). Each test
that breaks one connection (garbage, an unknown CA, no certificate where one is required, a
silent client) checks that the broker logs why and that another connection is unharmed.
"""

from __future__ import annotations

import dataclasses
import logging
import ssl
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from proxy.config import load_config
from proxy.context import RequestContext
from proxy.principal import ANONYMOUS, KafkaPrincipal
from proxy.properties_file import ConfigError
from proxy.registry import REGISTRY, entry
from proxy.server import Server
from tests.cert_fixtures import cert_dir_fixture
from tests.proxy.harness import RawClient
from tests.proxy.test_server_timeouts import MemoryListener, closed_at, memory_broker

certs = cert_dir_fixture("certs")


# Another CA and its client certificate: unknown to the broker.
other_certs = cert_dir_fixture("other")


def ssl_settings(certs: Path, **more: str) -> dict[str, str]:
    return {
        "listeners": "SSL://127.0.0.1:9093",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs / "server.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs / "ca.crt"),
        **more,
    }


def _load(overrides: dict[str, str]):  # type: ignore[no-untyped-def]
    return load_config(
        listen=None,
        advertise=None,
        data_dir="memory://",
        config_file=None,
        overrides=overrides,
        environ={},
    )


def tls_broker(
    overrides: dict[str, str],
) -> AbstractAsyncContextManager[tuple[Server, MemoryListener]]:
    return memory_broker(listen=None, **overrides)


def client_context(
    certs: Path,
    *,
    cert_from: Path | None = None,
    version: ssl.TLSVersion | None = None,
) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    if cert_from is not None:
        ctx.load_cert_chain(str(cert_from / "client.crt"), str(cert_from / "client.key"))
    if version is not None:
        ctx.minimum_version = ctx.maximum_version = version
    return ctx


async def tls_client(listener: MemoryListener, ctx: ssl.SSLContext) -> trio.SSLStream:  # type: ignore[type-arg]
    stream = trio.SSLStream(await listener.connect(), ctx, server_hostname="localhost")
    await stream.do_handshake()
    return stream


async def is_refused(listener: MemoryListener, ctx: ssl.SSLContext) -> bool:
    """Whether the broker ends a TLS connection with ``ctx`` instead of answering: in the
    handshake, or at the first read (with TLS 1.3 a refused client certificate shows only
    then)."""
    try:
        client = RawClient(await tls_client(listener, ctx))  # type: ignore[arg-type]
        await client.request(ApiVersionsRequest())
    except (trio.BrokenResourceError, AssertionError, EOFError):
        return True
    return False


async def answers(stream: trio.abc.Stream) -> bool:
    resp = await RawClient(stream).request(ApiVersionsRequest())  # type: ignore[arg-type]
    return bool(resp.error_code == 0)


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
async def test_tls_1_2_and_1_3_are_served(
    autojump_clock: trio.testing.MockClock, certs: Path, version: ssl.TLSVersion
) -> None:
    async with tls_broker(ssl_settings(certs)) as (server, listener):
        stream = await tls_client(listener, client_context(certs, version=version))
        assert stream.version() == {"TLSv1_2": "TLSv1.2", "TLSv1_3": "TLSv1.3"}[version.name]
        assert await answers(stream)
        (conn,) = server.connections
        assert conn.principal == ANONYMOUS  # ssl.client.auth=none


async def test_ssl_enabled_protocols_limits_the_versions(
    autojump_clock: trio.testing.MockClock, certs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = ssl_settings(certs, **{"ssl.enabled.protocols": "TLSv1.3"})
    async with tls_broker(settings) as (_, listener):
        with pytest.raises(trio.BrokenResourceError):
            await tls_client(listener, client_context(certs, version=ssl.TLSVersion.TLSv1_2))
        assert await answers(await tls_client(listener, client_context(certs)))


async def test_a_garbage_handshake_closes_that_connection_only(
    autojump_clock: trio.testing.MockClock, certs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "kafkad.connection")
    async with tls_broker(ssl_settings(certs)) as (server, listener):
        good = await tls_client(listener, client_context(certs))
        junk = await listener.connect()
        # a plaintext Kafka request where a ClientHello belongs, then plain garbage
        await junk.send_all(b"\x00\x00\x00\x0e\x00\x12\x00\x00\x00\x00\x00\x01\x00\x04test")
        assert await closed_at(RawClient(junk)) is not None  # type: ignore[arg-type]
        junk2 = await listener.connect()
        await junk2.send_all(b"\x16\x03\x01\xff\xff" + b"\xa5" * 300)
        assert await closed_at(RawClient(junk2)) is not None  # type: ignore[arg-type]
        assert await answers(good)
        assert await answers(await tls_client(listener, client_context(certs)))
        assert len(server.connections) == 2
    failures = [r for r in caplog.records if "TLS handshake failed" in r.getMessage()]
    assert len(failures) == 2, caplog.text


async def test_a_client_certificate_from_an_unknown_ca_is_refused(
    autojump_clock: trio.testing.MockClock,
    certs: Path,
    other_certs: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "kafkad.connection")
    settings = ssl_settings(certs, **{"ssl.client.auth": "required"})
    async with tls_broker(settings) as (_server, listener):
        good = await tls_client(listener, client_context(certs, cert_from=certs))
        for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            ctx = client_context(certs, cert_from=other_certs, version=version)
            assert await is_refused(listener, ctx)
        assert await answers(good)
    refused = [r for r in caplog.records if "CERTIFICATE_VERIFY_FAILED" in r.getMessage()]
    assert len(refused) == 2, caplog.text
    assert "unable to get local issuer certificate" in caplog.text


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
async def test_client_auth_required_refuses_a_client_without_a_certificate(
    autojump_clock: trio.testing.MockClock,
    certs: Path,
    caplog: pytest.LogCaptureFixture,
    version: ssl.TLSVersion,
) -> None:
    caplog.set_level(logging.INFO, "kafkad.connection")
    settings = ssl_settings(certs, **{"ssl.client.auth": "required"})
    async with tls_broker(settings) as (_, listener):
        assert await is_refused(listener, client_context(certs, version=version))
        assert await answers(await tls_client(listener, client_context(certs, cert_from=certs)))
    assert "PEER_DID_NOT_RETURN_A_CERTIFICATE" in caplog.text


async def test_the_principal_is_the_mapped_certificate_dn(
    autojump_clock: trio.testing.MockClock, certs: Path
) -> None:
    settings = ssl_settings(
        certs,
        **{
            "ssl.client.auth": "requested",
            "ssl.principal.mapping.rules": "RULE:^CN=(.*?),O=(.*)$/$1@$2/U,DEFAULT",
        },
    )
    async with tls_broker(settings) as (server, listener):
        with_cert = await tls_client(listener, client_context(certs, cert_from=certs))
        assert await answers(with_cert)
        (conn,) = server.connections
        assert conn.principal == KafkaPrincipal("User", "CLIENT@KAFKAD")
        assert str(conn.principal) == "User:CLIENT@KAFKAD"
        await with_cert.aclose()
        await trio.sleep(1)
        # requested: a client without a certificate is let in as ANONYMOUS
        without = await tls_client(listener, client_context(certs))
        assert await answers(without)
        (conn,) = server.connections
        assert conn.principal == ANONYMOUS


async def test_the_default_rule_gives_the_rfc2253_dn_and_handlers_see_it(
    autojump_clock: trio.testing.MockClock, certs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[KafkaPrincipal] = []
    api_versions = entry(18)

    async def spy(ctx: RequestContext, body: Any) -> Any:
        seen.append(ctx.principal)
        return await api_versions.fn(ctx, body)

    monkeypatch.setitem(REGISTRY, 18, dataclasses.replace(api_versions, fn=spy))
    settings = ssl_settings(certs, **{"ssl.client.auth": "required"})
    async with tls_broker(settings) as (server, listener):
        assert await answers(await tls_client(listener, client_context(certs, cert_from=certs)))
        (conn,) = server.connections
        assert str(conn.principal) == "User:CN=client,O=kafkad"
    assert seen == [KafkaPrincipal("User", "CN=client,O=kafkad")]


async def test_shutdown_does_not_wait_for_a_handshake(
    autojump_clock: trio.testing.MockClock, certs: Path
) -> None:
    async with tls_broker(ssl_settings(certs)) as (server, listener):
        silent = RawClient(await listener.connect())  # type: ignore[arg-type]
        await trio.sleep(1)
        server.stop()
        # closed with the idle connections at once, not after shutdown.grace.ms (10 s)
        assert await closed_at(silent) == pytest.approx(trio.current_time(), abs=0.01)
        assert trio.current_time() < 2


async def test_a_dn_no_rule_maps_closes_the_connection(
    autojump_clock: trio.testing.MockClock, certs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "kafkad.connection")
    settings = ssl_settings(
        certs,
        **{"ssl.client.auth": "required", "ssl.principal.mapping.rules": "RULE:^CN=x$/x/"},
    )
    async with tls_broker(settings) as (_, listener):
        assert await is_refused(listener, client_context(certs, cert_from=certs))
    assert "No rules apply to CN=client,O=kafkad" in caplog.text


async def test_a_silent_client_is_closed_at_the_idle_timeout_and_blocks_no_one(
    autojump_clock: trio.testing.MockClock, certs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "kafkad.connection")
    settings = ssl_settings(certs, **{"connections.max.idle.ms": "5000"})
    async with tls_broker(settings) as (_, listener):
        silent = RawClient(await listener.connect())  # type: ignore[arg-type]
        start = trio.current_time()
        # while the silent one hangs in its handshake, others connect and are served
        assert await answers(await tls_client(listener, client_context(certs)))
        assert await closed_at(silent) - start == pytest.approx(5.0, abs=0.01)
    assert "TLS handshake not done within 5s" in caplog.text


async def test_inline_pem_keystore_and_truststore(
    autojump_clock: trio.testing.MockClock, certs: Path
) -> None:
    pem = (certs / "server.pem").read_text()
    key_end = pem.index("-----END PRIVATE KEY-----") + len("-----END PRIVATE KEY-----")
    settings = {
        "listeners": "SSL://127.0.0.1:9093",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": pem[:key_end],
        "ssl.keystore.certificate.chain": pem[key_end:],
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": (certs / "ca.crt").read_text(),
        "ssl.client.auth": "required",
    }
    async with tls_broker(settings) as (_server, listener):
        assert await answers(await tls_client(listener, client_context(certs, cert_from=certs)))


async def test_the_listener_prefix_wins_over_the_global_setting(
    autojump_clock: trio.testing.MockClock, certs: Path
) -> None:
    settings = ssl_settings(
        certs,
        **{
            "listeners": "SECURE://127.0.0.1:9093",
            "listener.security.protocol.map": "SECURE:SSL",
            "ssl.client.auth": "none",
            "listener.name.secure.ssl.client.auth": "required",
        },
    )
    async with tls_broker(settings) as (_, listener):
        assert await is_refused(listener, client_context(certs))


# --- configuration: Kafka's rules, clear errors -------------------------------------------


def _error(overrides: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as err:
        _load(overrides)
    return str(err.value)


def _encrypted_key(certs: Path, tmp_path: Path, password: bytes) -> Path:
    from cryptography.hazmat.primitives import serialization

    pem = (certs / "server.pem").read_bytes()
    key = serialization.load_pem_private_key(pem, None)
    enc = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password),
    )
    cert = pem[pem.index(b"-----BEGIN CERTIFICATE-----") :]
    out = tmp_path / "encrypted.pem"
    out.write_bytes(enc + cert)
    return out


def test_config_rules(certs: Path, tmp_path: Path) -> None:
    base = ssl_settings(certs)
    jks = _error({**base, "ssl.keystore.type": "JKS"})
    assert "ssl.keystore.type=JKS: kafkad reads PEM keystores only" in jks
    default_type = {k: v for k, v in base.items() if k != "ssl.keystore.type"}
    assert "kafkad reads PEM keystores only" in _error(default_type)  # Kafka's default: JKS
    assert "PEM truststores only" in _error({**base, "ssl.truststore.type": "PKCS12"})
    # Kafka compares the type with "PEM" exactly (DefaultSslEngineFactory's PEM_TYPE.equals):
    # "pem" is a Java KeyStore type it cannot load
    assert "ssl.keystore.type=pem: kafkad reads PEM keystores only" in _error(
        {**base, "ssl.keystore.type": "pem"}
    )
    assert "a PEM keystore has no store password" in _error({**base, "ssl.keystore.password": "x"})
    assert "ssl.keystore.key is given but ssl.keystore.certificate.chain is not" in _error(
        {k: v for k, v in base.items() if k != "ssl.keystore.location"} | {"ssl.keystore.key": "x"}
    )
    assert "both ssl.keystore.location and the inline ssl.keystore.key" in _error(
        {**base, "ssl.keystore.key": "k", "ssl.keystore.certificate.chain": "c"}
    )
    assert "no such file" in _error({**base, "ssl.keystore.location": str(tmp_path / "nope")})
    no_trust = {k: v for k, v in base.items() if "truststore" not in k}
    assert "ssl.client.auth=required needs a truststore" in _error(
        {**no_trust, "ssl.client.auth": "required"}
    )
    assert "has no keystore" in _error({"listeners": "SSL://127.0.0.1:9093"})
    assert "String must be one of: required, requested, none" in _error(
        {**base, "ssl.client.auth": "yes"}
    )
    assert "kafkad serves TLSv1.2 and TLSv1.3" in _error(
        {**base, "ssl.enabled.protocols": "TLSv1.1"}
    )
    assert "OpenSSL's default cipher suites" in _error(
        {**base, "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}
    )
    assert "Invalid rule" in _error({**base, "ssl.principal.mapping.rules": "default"})
    # a per-listener name is parsed as its config; an unknown one is refused
    assert "listener.name.ssl.ssl.client.auth=maybe" in _error(
        {**base, "listener.name.ssl.ssl.client.auth": "maybe"}
    )
    assert "unknown config listener.name.ssl.ssl.nope" in _error(
        {**base, "listener.name.ssl.ssl.nope": "1"}
    )
    # a per-listener keystore error names the prefixed config
    assert "listener.name.ssl.ssl.keystore.type=JKS" in _error(
        {**base, "listener.name.ssl.ssl.keystore.type": "JKS"}
    )
    # an encrypted key: ssl.key.password
    encrypted = str(_encrypted_key(certs, tmp_path, b"s3cret"))
    assert "the key is encrypted, and ssl.key.password is not set" in _error(
        {**base, "ssl.keystore.location": encrypted}
    )
    assert "cannot load the key" in _error(
        {**base, "ssl.keystore.location": encrypted, "ssl.key.password": "wrong"}
    )
    cfg = _load({**base, "ssl.keystore.location": encrypted, "ssl.key.password": "s3cret"})
    assert cfg.endpoints()[0].protocol == "SSL"
    # the password is not in any error message
    assert "s3cret" not in _error(
        {**base, "ssl.keystore.location": encrypted, "ssl.key.password": "s3cret", "x": "1"}
    )


async def test_describe_configs_never_shows_a_password_or_key() -> None:
    from kio.schema.describe_configs.v4 import request as dc

    from tests.proxy.harness import connect, running_broker

    secrets = {"ssl.key.password": "hunter2", "ssl.truststore.certificates": "-----BEGIN x"}
    async with running_broker(**secrets) as (_, port), connect(port) as c:
        resp = await c.request(
            dc.DescribeConfigsRequest(
                resources=(
                    dc.DescribeConfigsResource(
                        resource_type=4, resource_name="1", configuration_keys=None
                    ),
                ),
                include_synonyms=True,
                include_documentation=False,
            )
        )
    entries = {e.name: e for e in resp.results[0].configs}
    for name in ("ssl.key.password", "ssl.truststore.certificates", "ssl.keystore.key"):
        assert entries[name].is_sensitive and entries[name].value is None, name
        assert all(s.value is None for s in entries[name].synonyms)
    assert entries["ssl.client.auth"].value == "none"
    assert "hunter2" not in repr(resp)


def test_kafkad_certs_writes_a_ready_broker_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from proxy.cli import main

    d = tmp_path / "certs"
    assert main(["certs", str(d)]) == 0
    assert (
        f"next: kafkad serve --config {d.resolve() / 'server.properties'}"
        in capsys.readouterr().out
    )
    assert oct((d / "server.pem").stat().st_mode & 0o777) == "0o600"
    cfg = load_config(
        listen=None,
        advertise=None,
        data_dir="memory://",
        config_file=str(d / "server.properties"),
        overrides={},
        environ={},
    )
    (listener,) = cfg.endpoints()
    assert (listener.name, listener.protocol, listener.port) == ("SSL", "SSL", 9093)
    assert cfg.get("ssl.client.auth") == "required"
    # a second run keeps what is there unless --force
    assert main(["certs", str(d)]) == 1
    assert "already has ca.crt" in capsys.readouterr().err
    assert main(["certs", str(d), "--force"]) == 0


def test_a_sasl_ssl_listener_takes_client_auth_only_from_its_listener_prefix(
    certs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka's ChannelBuilders: ssl.client.auth applies to SASL_SSL listeners only when
    listener-prefixed; the global one is for SSL listeners (a warning says so)."""
    from proxy.tls import server_settings

    values = _load(
        ssl_settings(
            certs,
            **{
                "listeners": "SSL://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094",
                "ssl.client.auth": "required",
                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            },
        )
    ).values
    assert server_settings(values, "SSL", "SSL").client_auth == "required"
    with caplog.at_level(logging.WARNING, logger="kafkad.tls"):
        sasl_ssl = server_settings(values, "SASL_SSL", "SASL_SSL")
    assert sasl_ssl.client_auth == "none"
    assert sasl_ssl.context.verify_mode == ssl.CERT_NONE
    assert "applied only to SSL listeners" in caplog.text
    prefixed = {**values, "listener.name.sasl_ssl.ssl.client.auth": "requested"}
    assert server_settings(prefixed, "SASL_SSL", "SASL_SSL").client_auth == "requested"


@pytest.mark.parametrize("key", ["ssl.client.auth", "listener.name.ssl.ssl.client.auth"])
def test_ssl_client_auth_takes_kafkas_lower_case_names_only(certs: Path, key: str) -> None:
    # Kafka 4.2: ValidString.in(Utils.enumOptions(SslClientAuth.class)), case-sensitive, trimmed
    assert "String must be one of: required, requested, none" in _error(
        ssl_settings(certs, **{key: "REQUIRED"})
    )
    cfg = _load(ssl_settings(certs, **{key: " requested "}))
    assert cfg.values is not None
    assert cfg.values[key] == "requested"
