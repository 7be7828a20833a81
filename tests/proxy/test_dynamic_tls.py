"""A TLS listener's keystore/truststore changed at runtime (proxy/dynamic_tls.py): real TLS
handshakes (the standard library's client over in-memory streams) before and after an
IncrementalAlterConfigs of ``listener.name.ssl.ssl.keystore.location``, Kafka's checks and
refusals, and the change kept across a restart."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio
import trio.testing
from kio.schema.errors import ErrorCode

from proxy.certs import _issue, _name, _write
from proxy.server import Server
from tests.cert_fixtures import cert_dir_fixture
from tests.proxy.harness import RawClient, broker_config
from tests.proxy.test_dynamic_broker_configs import (
    APPEND,
    DELETE,
    LIST,
    PASSWORD,
    SET,
    STRING,
    UNKNOWN,
    alter,
    describe,
    synonyms,
)
from tests.proxy.test_server_timeouts import MemoryListener
from tests.proxy.test_tls import answers, client_context, is_refused, ssl_settings, tls_client

KEYSTORE = "listener.name.ssl.ssl.keystore.location"


certs = cert_dir_fixture("certs")


# The same subject and names, signed by another CA.
renewed = cert_dir_fixture("renewed")


@asynccontextmanager
async def broker(
    certs: Path, data_dir: str = "memory://"
) -> AsyncIterator[tuple[Server, MemoryListener]]:
    cfg = broker_config(ssl_settings(certs), listen=None, data_dir=data_dir)
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
        assert (entry.config_source, entry.value) == (2, str(renewed / "server.pem"))
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
            "SAN=[[2, localhost], [7, 0:0:0:0:0:0:0:1], [7, 127.0.0.1]]}, new={alias=kafka, SAN=[]}"
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
        # Kafka's validateConfigTypes first: a listener's ssl.client.auth as ssl.client.auth
        assert await alter(c, node, ("listener.name.ssl.ssl.client.auth", SET, "x")) == (
            ErrorCode.invalid_request,
            "Invalid value x for configuration ssl.client.auth: String must be one of: "
            "required, requested, none",
        )
        for name, value in (
            ("ssl.client.auth", "required"),
            ("plain.sasl.jaas.config", "x"),
            ("sasl.enabled.mechanisms", "x"),
        ):
            assert await alter(c, node, (f"listener.name.ssl.{name}", SET, value)) == (
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
    changes = {"ssl.allow.dn.changes": "true", "ssl.allow.san.changes": "true"}
    cfg = broker_config(ssl_settings(certs, **changes), listen=None)
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


async def test_listener_configs_are_described_with_their_base_configs_type(
    autojump_clock: trio.testing.MockClock, certs: Path, renewed: Path
) -> None:
    """Kafka's KafkaConfig.configType / brokerConfigSynonyms: a listener-prefixed config has its
    unprefixed config's type and sensitivity, and that config as its synonym; read-only, as
    the prefixed name is none of Kafka's AllDynamicConfigs."""
    new = str(renewed / "server.pem")
    async with broker(certs) as (server, listener):
        c = await admin(listener, client_context(certs))
        node = str(server.broker.node_id)
        other = "listener.name.other"
        ops = (
            (KEYSTORE, SET, new),
            (f"{other}.ssl.key.password", SET, "secret"),
            (f"{other}.sasl.enabled.mechanisms", SET, "PLAIN"),
            (f"{other}.plain.sasl.jaas.config", SET, "x required;"),
            (f"{other}.no.such.config", SET, "x"),
        )
        assert await alter(c, node, *ops) == (ErrorCode.none, None)
        shown = await describe(c, 4, node)
        e = shown[KEYSTORE]
        assert (e.value, e.is_sensitive, e.config_type, e.read_only) == (new, False, STRING, True)
        # (then kafkad's default "" as DEFAULT_CONFIG, where Kafka's null default shows none)
        assert synonyms(e)[:2] == [
            (KEYSTORE, new, 2),
            ("ssl.keystore.location", str(certs / "server.pem"), 4),
        ]
        e = shown[f"{other}.ssl.key.password"]
        assert (e.value, e.is_sensitive, e.config_type) == (None, True, PASSWORD)
        e = shown[f"{other}.sasl.enabled.mechanisms"]
        assert (e.value, e.is_sensitive, e.config_type) == ("PLAIN", False, LIST)
        e = shown[f"{other}.plain.sasl.jaas.config"]
        assert (e.value, e.is_sensitive, e.config_type) == (None, True, PASSWORD)
        e = shown[f"{other}.no.such.config"]
        assert (e.value, e.is_sensitive, e.config_type) == (None, True, UNKNOWN)
        # IncrementalAlterConfigs' list check looks the exact name up in Kafka's configKeys (a
        # Scala Map: a listener-prefixed name is missing, NoSuchElementException, answered
        # UNKNOWN_SERVER_ERROR, ConfigAdminManager.prepareIncrementalConfigs.listType)
        name = f"{other}.sasl.enabled.mechanisms"
        code, _ = await alter(c, node, (name, APPEND, "SCRAM-SHA-256"))
        assert code == ErrorCode.unknown_server_error


async def test_an_existing_listeners_connection_limits_are_not_refused_as_immutable(
    autojump_clock: trio.testing.MockClock, certs: Path
) -> None:
    """Kafka's DynamicListenerConfig skips the per-listener reconfigurable configs
    (SocketServer's max.connections, max.connection.creation.rate; DataPlaneAcceptor's
    num.network.threads): kafkad has none of them and stores them, as their unprefixed names."""
    async with broker(certs) as (server, listener):
        c = await admin(listener, client_context(certs))
        node = str(server.broker.node_id)
        names = ("max.connections", "max.connection.creation.rate", "num.network.threads")
        for name in names:  # a thread count within double the acceptor's 3 (Kafka's check)
            op = (f"listener.name.ssl.{name}", SET, "5" if name == names[2] else "10")
            assert await alter(c, node, op) == (ErrorCode.none, None)
        assert set(server.broker.dynamic.layer(node)) == {f"listener.name.ssl.{n}" for n in names}


async def test_a_stored_keystore_that_no_longer_loads_falls_back_to_the_static_one(
    autojump_clock: trio.testing.MockClock, certs: Path, renewed: Path, tmp_path: Path
) -> None:
    """At startup the static keystore serves (logged); the stored config blocks no other change
    (Kafka validates a listener only when its configs change), and once the file is back,
    setting the same location again applies it."""
    data, copy = str(tmp_path / "data"), tmp_path / "copy.pem"
    copy.write_bytes((renewed / "server.pem").read_bytes())
    async with broker(certs, data) as (server, listener):
        c = await admin(listener, client_context(certs))
        node = str(server.broker.node_id)
        assert await alter(c, node, (KEYSTORE, SET, str(copy))) == (ErrorCode.none, None)
    copy.unlink()
    async with broker(certs, data) as (server, listener):
        assert not await is_refused(listener, client_context(certs))
        c = await admin(listener, client_context(certs))
        assert await alter(c, node, ("log.retention.ms", SET, "100000")) == (ErrorCode.none, None)
        missing = tmp_path / "missing.pem"  # a new location is checked
        assert await alter(c, node, (KEYSTORE, SET, str(missing))) == (
            ErrorCode.invalid_request,
            "Validation of dynamic config update of SSLFactory failed: "
            f"org.apache.kafka.common.config.ConfigException: {KEYSTORE}={missing}: no such file",
        )
        copy.write_bytes((renewed / "server.pem").read_bytes())
        assert await alter(c, node, (KEYSTORE, SET, str(copy))) == (ErrorCode.none, None)
        assert not await is_refused(listener, client_context(renewed))
        assert await is_refused(listener, client_context(certs))
