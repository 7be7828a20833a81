"""A TLS listener's keystore/truststore changed at runtime (proxy/dynamic_tls.py): real TLS
handshakes (the standard library's client over in-memory streams) before and after an
IncrementalAlterConfigs of ``listener.name.ssl.ssl.keystore.location``, Kafka's checks and
refusals, and the change kept across a restart."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode

from proxy.certs import _issue, _name, _write, write_certs
from proxy.config import load_config
from proxy.server import Server
from tests.proxy.harness import RawClient
from tests.proxy.test_dynamic_broker_configs import DELETE, SET, alter, describe
from tests.proxy.test_server_timeouts import MemoryListener
from tests.proxy.test_tls import answers, client_context, is_refused, ssl_settings, tls_client

KEYSTORE = "listener.name.ssl.ssl.keystore.location"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("certs")
    write_certs(d)
    return d


@pytest.fixture(scope="module")
def renewed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same subject and names, signed by another CA."""
    d = tmp_path_factory.mktemp("renewed")
    write_certs(d)
    return d


@asynccontextmanager
async def broker(
    certs: Path, data_dir: str = "memory://"
) -> AsyncIterator[tuple[Server, MemoryListener]]:
    cfg = load_config(
        listen=None,
        advertise=None,
        data_dir=data_dir,
        config_file=None,
        overrides=ssl_settings(certs),
        environ={},
    )
    listener = MemoryListener()
    server = Server(cfg, listeners={"SSL": [listener]})
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        try:
            yield server, listener
        finally:
            server.stop()


async def admin(listener: MemoryListener, ctx: ssl.SSLContext) -> RawClient:
    return RawClient(await tls_client(listener, ctx))  # type: ignore[arg-type]


async def test_new_connections_use_the_new_keystore_open_ones_keep_theirs(
    autojump_clock: trio.testing.MockClock, certs: Path, renewed: Path
) -> None:
    old_ca, new_ca = client_context(certs), client_context(renewed)
    async with broker(certs) as (server, listener):
        assert await is_refused(listener, new_ca)
        c = await admin(listener, old_ca)
        node = str(server.broker.node_id)
        result = await alter(c, node, (KEYSTORE, SET, str(renewed / "server.pem")))
        assert result == (ErrorCode.none, None)
        assert await answers(c.stream)  # the open connection keeps its context
        assert not await is_refused(listener, new_ca)
        assert await is_refused(listener, old_ca)
        entry = (await describe(c, 4, node))[KEYSTORE]
        assert (entry.config_source, entry.value, entry.is_sensitive) == (2, None, True)
        # deleting the dynamic config: back to the static keystore
        assert await alter(c, node, (KEYSTORE, DELETE, None)) == (ErrorCode.none, None)
        assert not await is_refused(listener, old_ca)
        assert await is_refused(listener, new_ca)


async def test_the_change_is_kept_across_a_restart(
    autojump_clock: trio.testing.MockClock, certs: Path, renewed: Path, tmp_path: Path
) -> None:
    data = str(tmp_path / "data")
    async with broker(certs, data) as (server, listener):
        c = await admin(listener, client_context(certs))
        node = str(server.broker.node_id)
        result = await alter(c, node, (KEYSTORE, SET, str(renewed / "server.pem")))
        assert result == (ErrorCode.none, None)
    async with broker(certs, data) as (server, listener):
        assert not await is_refused(listener, client_context(renewed))
        assert await is_refused(listener, client_context(certs))


async def test_kafkas_checks_refuse_and_change_nothing(
    autojump_clock: trio.testing.MockClock, certs: Path, tmp_path: Path
) -> None:
    ca = _issue(_name("another CA"), None, ca=True)
    other = _issue(_name("someone-else"), ca)
    _write(tmp_path / "other.pem", other.key_pem() + other.cert_pem())
    no_sans = _issue(_name("localhost"), ca)
    _write(tmp_path / "no-sans.pem", no_sans.key_pem() + no_sans.cert_pem())
    failed = "Validation of dynamic config update of SSLFactory failed: "
    exc = "org.apache.kafka.common.config.ConfigException: "
    async with broker(certs) as (server, listener):
        c = await admin(listener, client_context(certs))
        node = str(server.broker.node_id)
        code, message = await alter(c, node, (KEYSTORE, SET, str(tmp_path / "other.pem")))
        assert code == ErrorCode.invalid_request
        assert message == (
            f"{failed}{exc}Keystore DistinguishedName does not match:  existing={{alias=kafka, "
            "DN=CN=localhost, O=kafkad}, new={alias=kafka, DN=CN=someone-else, O=kafkad}"
        )
        code, message = await alter(c, node, (KEYSTORE, SET, str(tmp_path / "no-sans.pem")))
        assert message == (
            f"{failed}{exc}Keystore SubjectAltNames do not match:  existing={{alias=kafka, "
            "SAN=[[2, localhost], [7, 127.0.0.1], [7, ::1]]}, new={alias=kafka, SAN=[]}"
        )
        code, message = await alter(c, node, (KEYSTORE, SET, str(tmp_path / "missing.pem")))
        assert code == ErrorCode.invalid_request
        assert message == f"{failed}{exc}{KEYSTORE}={tmp_path / 'missing.pem'}: no such file"
        code, message = await alter(c, "", (KEYSTORE, SET, str(certs / "server.pem")))
        assert (code, message) == (
            ErrorCode.invalid_request,
            "Cannot update these configs at default cluster level, broker id must be "
            f"specified: Set({KEYSTORE})",
        )
        assert await alter(c, node, ("ssl.keystore.location", SET, "x")) == (
            ErrorCode.invalid_request,
            "These security configs can be dynamically updated only per-listener using the "
            "listener prefix: Set(ssl.keystore.location)",
        )
        assert await alter(c, node, ("sasl.enabled.mechanisms", SET, "x")) == (
            ErrorCode.invalid_request,
            "Cannot update these configs dynamically: Set(sasl.enabled.mechanisms)",
        )
        assert await alter(c, node, ("listeners", SET, "x")) == (  # proxy/dynamic_listeners.py
            ErrorCode.invalid_request,
            "Unable to parse x to a broker endpoint",
        )
        assert await alter(c, node, ("advertised.listeners", SET, "x")) == (  # not in Kafka 4
            ErrorCode.invalid_request,
            "Cannot update these configs dynamically: Set(advertised.listeners)",
        )
        for name in ("ssl.client.auth", "plain.sasl.jaas.config", "sasl.enabled.mechanisms"):
            assert await alter(c, node, (f"listener.name.ssl.{name}", SET, "x")) == (
                ErrorCode.invalid_request,
                "Invalid value org.apache.kafka.common.config.ConfigException: Configs cannot be "
                "updated dynamically for existing listener ListenerName(SSL), restart broker or "
                "create a new listener for update for configuration Invalid dynamic configuration",
            )
        assert server.broker.dynamic.layer(node) == {}
        # another listener's (as Kafka: kept for a listener added later)
        other = "listener.name.other.ssl.client.auth"
        assert await alter(c, node, (other, SET, "required")) == (ErrorCode.none, None)
        assert server.broker.dynamic.layer(node) == {other: "required"}
        assert not await is_refused(listener, client_context(certs))


async def test_subject_and_name_changes_are_allowed_when_configured(
    autojump_clock: trio.testing.MockClock, certs: Path, tmp_path: Path
) -> None:
    ca = _issue(_name("another CA"), None, ca=True)
    other = _issue(_name("someone-else"), ca)
    _write(tmp_path / "other.pem", other.key_pem() + other.cert_pem())
    cfg = load_config(
        listen=None,
        advertise=None,
        data_dir="memory://",
        config_file=None,
        overrides=ssl_settings(
            certs, **{"ssl.allow.dn.changes": "true", "ssl.allow.san.changes": "true"}
        ),
        environ={},
    )
    assert cfg.get("ssl.allow.dn.changes") is True
    listener = MemoryListener()
    server = Server(cfg, listeners={"SSL": [listener]})
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        c = await admin(listener, client_context(certs))
        assert server.broker is not None
        node = str(server.broker.node_id)
        assert await alter(c, node, (KEYSTORE, SET, str(tmp_path / "other.pem"))) == (
            ErrorCode.none,
            None,
        )
        server.stop()
