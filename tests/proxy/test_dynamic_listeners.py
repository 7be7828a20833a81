"""Listeners added and removed at runtime (proxy/dynamic_listeners.py): real sockets, an
IncrementalAlterConfigs of ``listeners``/``listener.security.protocol.map`` per broker, the new
listener accepting at once and advertised in Metadata, a removed one closing its connections
and refusing new ones, Kafka's refusals with nothing applied, and the change kept across a
restart."""

from __future__ import annotations

import socket
import ssl
import struct
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.describe_cluster.v0 import request as dcl
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import request as md

from proxy.certs import _issue, _name, _write, write_certs
from proxy.dynamic_listeners import invalid_dynamic
from proxy.server import Server
from tests.proxy.harness import RawClient, connect, encode_request, running_broker
from tests.proxy.test_dynamic_broker_configs import DELETE, DYNAMIC_BROKER, SET, alter, describe

PMAP = "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT,SECURE:SASL_PLAINTEXT"


def ops(listeners: str) -> tuple[tuple[str, int, str | None], ...]:
    return (("listeners", SET, listeners), ("listener.security.protocol.map", SET, PMAP))


async def metadata_broker(c: RawClient) -> tuple[str, int]:
    resp = await c.request(
        md.MetadataRequest(
            topics=(),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    )
    b = resp.brokers[0]
    return str(b.host), int(b.port)


async def cluster_broker(c: RawClient) -> tuple[str, int]:
    resp = await c.request(dcl.DescribeClusterRequest(include_cluster_authorized_operations=False))
    b = resp.brokers[0]
    return str(b.host), int(b.port)


def extra_port(server: Server) -> int:
    return server.bound_listeners["EXTRA"][1]


@asynccontextmanager
async def advertising_first_only() -> AsyncIterator[tuple[Server, int]]:
    """A broker whose static advertised.listeners names PLAINTEXT only (so, as in Kafka 4, a
    listener added beside it can be removed again)."""
    async with running_broker(
        listen=None,
        **{
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "advertised.listeners": "PLAINTEXT://adv.example:9092",
        },
    ) as (server, port):
        yield server, port


async def test_added_listener_accepts_and_is_advertised() -> None:
    async with running_broker() as (server, port), connect(port) as admin:
        assert server.broker is not None
        node = str(server.broker.node_id)
        both = "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0"
        assert await alter(admin, node, *ops(both)) == (ErrorCode.none, None)
        extra = extra_port(server)
        assert extra != port
        shown = (await describe(admin, 4, node))["listeners"]
        assert (shown.value, shown.config_source, shown.read_only) == (both, DYNAMIC_BROKER, False)
        async with connect(extra) as c:
            # each listener advertises itself (Kafka answers with the request's listener)
            assert await metadata_broker(c) == ("127.0.0.1", extra)
            assert await cluster_broker(c) == ("127.0.0.1", extra)
            assert await metadata_broker(admin) == ("127.0.0.1", port)
            # as Kafka 4: without advertised.listeners every listener is advertised, and an
            # advertised listener cannot go
            code, message = await alter(admin, node, *ops("PLAINTEXT://127.0.0.1:0"))
            assert code == ErrorCode.invalid_request
            assert message == invalid_dynamic(
                "Advertised listeners 'Set(ListenerName(PLAINTEXT), ListenerName(EXTRA))' must "
                "be a subset of listeners 'Set(ListenerName(PLAINTEXT))'"
            )
            assert await metadata_broker(c) == ("127.0.0.1", extra)  # still served


async def test_advertised_listeners_is_not_dynamic() -> None:
    # Kafka 4 dropped advertised.listeners from DynamicListenerConfig (KAFKA-18405): it is
    # not in AllDynamicConfigs, so AlterConfigs refuses it and DescribeConfigs marks it read-only
    async with running_broker() as (server, port), connect(port) as admin:
        assert server.broker is not None
        node = str(server.broker.node_id)
        for resource in (node, ""):
            code, message = await alter(
                admin, resource, ("advertised.listeners", SET, f"PLAINTEXT://127.0.0.1:{port}")
            )
            assert (code, message) == (
                ErrorCode.invalid_request,
                "Cannot update these configs dynamically: Set(advertised.listeners)",
            )
        assert server.broker.dynamic.layer(node) == {}
        assert (await describe(admin, 4, node))["advertised.listeners"].read_only is True


async def test_a_listener_left_out_of_advertised_listeners_is_removed() -> None:
    async with advertising_first_only() as (server, port), connect(port) as admin:
        assert server.broker is not None
        node = str(server.broker.node_id)
        both = "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0"
        assert await alter(admin, node, *ops(both)) == (ErrorCode.none, None)
        extra = extra_port(server)
        async with connect(extra) as c:
            assert await metadata_broker(admin) == ("adv.example", 9092)
            # removed: the open connection is closed, the port refuses new ones
            assert await alter(admin, node, *ops("PLAINTEXT://127.0.0.1:0")) == (
                ErrorCode.none,
                None,
            )
            assert await c.read_frame() is None
        with pytest.raises(OSError):
            await trio.open_tcp_stream("127.0.0.1", extra)
        assert "EXTRA" not in server.bound_listeners
        assert await metadata_broker(admin) == ("adv.example", 9092)  # the first one carries on
        # the advertised one cannot go (Kafka's KafkaConfig requirement comes first)
        code, message = await alter(admin, node, *ops("EXTRA://127.0.0.1:0"))
        assert code == ErrorCode.invalid_request
        assert message is not None and message.startswith(
            "requirement failed: advertised.listeners listener names must be equal to or a "
            "subset of the ones defined in listeners. Found PLAINTEXT."
        )


async def test_bad_updates_are_refused_with_nothing_applied() -> None:
    async with running_broker() as (server, port), connect(port) as admin:
        assert server.broker is not None
        node = str(server.broker.node_id)
        before = dict(server.bound_listeners)

        async def refused(*changes: tuple[str, int, str | None]) -> str:
            code, message = await alter(admin, node, *changes)
            assert code == ErrorCode.invalid_request
            assert server.bound_listeners == before
            assert server.broker is not None and server.broker.dynamic.layer(node) == {}
            assert message is not None
            return message

        # an existing listener cannot go while it is advertised, nor change protocol
        assert await refused(*ops("EXTRA://127.0.0.1:0")) == (
            "Invalid value org.apache.kafka.common.config.ConfigException: Advertised listeners "
            "'Set(ListenerName(PLAINTEXT))' must be a subset of listeners "
            "'Set(ListenerName(EXTRA))' for configuration Invalid dynamic configuration"
        )
        assert await refused(("listener.security.protocol.map", SET, "PLAINTEXT:SSL")) == (
            "Invalid value org.apache.kafka.common.config.ConfigException: Security protocol "
            "cannot be updated for existing listener ListenerName(PLAINTEXT) for configuration "
            "Invalid dynamic configuration"
        )
        # a listener without a protocol
        message = await refused(("listeners", SET, "PLAINTEXT://127.0.0.1:0,NEW://127.0.0.1:0"))
        assert message.startswith("Invalid value org.apache.kafka.common.config.ConfigException")
        assert "must be subset of listener map" in message
        # a port already taken, a SASL listener without its configs: refused, nothing bound
        with trio.socket.socket() as taken:
            await taken.bind(("127.0.0.1", 0))
            taken.listen()
            busy = taken.getsockname()[1]
            message = await refused(*ops(f"PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:{busy}"))
            assert message.startswith(f"listener EXTRA: cannot bind EXTRA://127.0.0.1:{busy}")
        message = await refused(*ops("PLAINTEXT://127.0.0.1:0,SECURE://127.0.0.1:0"))
        assert "sasl" in message.lower()
        # validate_only: checked, not applied
        both = "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0"
        assert await alter(admin, node, *ops(both), validate_only=True) == (ErrorCode.none, None)
        assert server.bound_listeners == before


async def test_sasl_listener_added_with_its_prefixed_configs() -> None:
    async with running_broker() as (server, port), connect(port) as admin:
        assert server.broker is not None
        node = str(server.broker.node_id)
        jaas = (
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="secret";'
        )
        result = await alter(
            admin,
            node,
            *ops("PLAINTEXT://127.0.0.1:0,SECURE://127.0.0.1:0"),
            ("listener.name.secure.sasl.enabled.mechanisms", SET, "PLAIN"),
            ("listener.name.secure.plain.sasl.jaas.config", SET, jaas),
        )
        assert result == (ErrorCode.none, None)
        assert "SECURE" in server.bound_listeners
        # now an existing listener: its SASL configs are fixed, as Kafka
        code, message = await alter(
            admin,
            node,
            *ops("PLAINTEXT://127.0.0.1:0,SECURE://127.0.0.1:0"),
            ("listener.name.secure.sasl.enabled.mechanisms", SET, "PLAIN"),
            ("listener.name.secure.plain.sasl.jaas.config", DELETE, None),
        )
        assert code == ErrorCode.invalid_request
        assert message is not None and "existing listener ListenerName(SECURE)" in message


async def test_added_listener_survives_a_restart(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    async with running_broker(data) as (server, port), connect(port) as admin:
        assert server.broker is not None
        node = str(server.broker.node_id)
        both = "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0"
        assert await alter(admin, node, *ops(both)) == (ErrorCode.none, None)
    async with running_broker(data) as (server, port), connect(extra_port(server)) as c:
        assert await metadata_broker(c) == ("127.0.0.1", extra_port(server))


COMBINED = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:19093
listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT
"""


async def test_a_combined_nodes_controller_listener_stays(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(COMBINED)
    async with (
        running_broker(listen=None, config_file=str(path)) as (server, port),
        connect(port) as admin,
    ):
        controller = "CONTROLLER://127.0.0.1:19093"
        for listeners in (
            "PLAINTEXT://127.0.0.1:0",
            "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19094",
        ):
            code, message = await alter(admin, "1", ("listeners", SET, listeners))
            assert code == ErrorCode.invalid_request
            assert message is not None and message.startswith(
                "requirement failed: controller.listener.names must only contain values "
                "appearing in the 'listeners' configuration when running the KRaft "
                "controller role"
            )
        added = f"PLAINTEXT://127.0.0.1:0,{controller},EXTRA://127.0.0.1:0"
        assert await alter(admin, "1", ("listeners", SET, added)) == (ErrorCode.none, None)
        assert set(server.bound_listeners) == {"PLAINTEXT", "EXTRA"}  # no controller bound


async def test_tls_listener_added_at_runtime_has_its_keystore_checked_and_reconfigured(
    tmp_path: Path,
) -> None:
    write_certs(tmp_path / "certs")
    renewed = tmp_path / "renewed"
    write_certs(renewed)  # the same subject and names, another CA
    ca = _issue(_name("another CA"), None, ca=True)
    other = _issue(_name("someone-else"), ca)
    _write(tmp_path / "other.pem", other.key_pem() + other.cert_pem())
    keystore = "listener.name.tls.ssl.keystore.location"
    async with running_broker() as (server, port), connect(port) as admin:
        assert server.broker is not None
        node = str(server.broker.node_id)
        result = await alter(
            admin,
            node,
            ("listeners", SET, "PLAINTEXT://127.0.0.1:0,TLS://127.0.0.1:0"),
            ("listener.security.protocol.map", SET, "PLAINTEXT:PLAINTEXT,TLS:SSL"),
            ("listener.name.tls.ssl.keystore.type", SET, "PEM"),
            (keystore, SET, str(tmp_path / "certs" / "server.pem")),
        )
        assert result == (ErrorCode.none, None)
        assert "TLS" in server.bound_listeners
        # Kafka's checks of a new keystore apply to it as to a listener it started with
        code, message = await alter(admin, node, (keystore, SET, str(tmp_path / "other.pem")))
        assert code == ErrorCode.invalid_request
        assert message is not None and "Keystore DistinguishedName does not match" in message
        # and an accepted one is what its new connections get
        assert await alter(admin, node, (keystore, SET, str(renewed / "server.pem"))) == (
            ErrorCode.none,
            None,
        )
        host, tls_port = server.bound_listeners["TLS"]
        ctx = ssl.create_default_context(cafile=str(renewed / "ca.crt"))
        stream = await trio.open_ssl_over_tcp_stream(host, tls_port, ssl_context=ctx)
        await stream.do_handshake()  # verified against the renewed CA only
        await stream.aclose()


async def test_added_listener_has_its_own_connection_limit() -> None:
    # Kafka's ConnectionQuotas.addListener: an added listener is counted under its own
    # listener.name.<l>.max.connections (proxy/connection_quotas.py), which stays alterable
    async with advertising_first_only() as (server, port), connect(port) as admin:
        assert server.broker is not None and server.connection_quotas is not None
        node = str(server.broker.node_id)
        both = "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0"
        limit = "listener.name.extra.max.connections"
        assert await alter(admin, node, *ops(both), (limit, SET, "1")) == (ErrorCode.none, None)
        async with connect(extra_port(server)) as first:
            await first.stream.send_all(encode_request(ApiVersionsRequest(), 1))
            assert await first.read_frame() is not None
            async with connect(extra_port(server)) as second:
                await second.stream.send_all(encode_request(ApiVersionsRequest(), 1))
                with trio.fail_after(5):
                    await server.connection_quotas.until_waiting(1)  # held: EXTRA is full
                async with connect(port) as other:  # the first listener is not limited
                    await other.stream.send_all(encode_request(ApiVersionsRequest(), 1))
                    assert await other.read_frame() is not None
                assert await alter(admin, node, *ops(both), (limit, SET, "2")) == (
                    ErrorCode.none,
                    None,
                )
                with trio.fail_after(5):
                    assert await second.read_frame() is not None  # let in at once
        code, message = await alter(admin, node, *ops(both), (limit, SET, "0"))
        assert code == ErrorCode.invalid_request
        assert message == (
            "Invalid value org.apache.kafka.common.config.ConfigException: Invalid "
            "max.connections 0 for configuration Invalid dynamic configuration"
        )
        # removed (the static advertised.listeners leaves it out): its count and limits dropped
        result = await alter(admin, node, *ops("PLAINTEXT://127.0.0.1:0"))
        assert result == (ErrorCode.none, None)
        assert "EXTRA" not in server.connection_quotas.listeners
        assert server.connection_quotas.total == 1


def _bound_as(sock: socket.socket) -> tuple[object, ...]:
    """How a listening socket was made: family, address, options and listen backlog (Linux's
    TCP_INFO gives a listening socket's backlog in tcpi_sacked)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    backlog = struct.unpack_from("I", info, 28)[0]
    v6only = (
        sock.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY)
        if sock.family == socket.AF_INET6
        else None
    )
    reuse = sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR)
    return (sock.family, sock.getsockname()[0], v6only, reuse, backlog)


@pytest.mark.skipif(sys.platform != "linux", reason="TCP_INFO's listen backlog is Linux's")
@pytest.mark.parametrize("host", ["", "127.0.0.1", "localhost"])
async def test_added_listener_binds_as_a_startup_one(host: str) -> None:
    # one function binds both (proxy/listen_sockets.py): same families, addresses, options
    # and backlog; a blank host binds 0.0.0.0
    async with (
        running_broker(listen=None, **{"listeners": f"PLAINTEXT://{host}:0"}) as (
            server,
            port,
        ),
        connect(port) as admin,
    ):
        assert server.broker is not None
        both = f"PLAINTEXT://{host}:0,EXTRA://{host}:0"
        node = str(server.broker.node_id)
        assert await alter(admin, node, *ops(both)) == (ErrorCode.none, None)
        made = {
            name: sorted(
                _bound_as(s.socket)  # type: ignore[attr-defined]
                for s in server.sockets[name]
            )
            for name in ("PLAINTEXT", "EXTRA")
        }
        assert made["EXTRA"] == made["PLAINTEXT"]
        assert made["EXTRA"]
        async with connect(extra_port(server)) as c:
            assert await metadata_broker(c) != ("", 0)


@pytest.mark.skipif(sys.platform != "linux", reason="TCP_INFO's listen backlog is Linux's")
async def test_listen_backlog_is_socket_listen_backlog_size_and_static() -> None:
    # Kafka's Acceptor binds with socket.listen.backlog.size (default 50), a static config
    backlog = {"socket.listen.backlog.size": "7"}
    async with running_broker(**backlog) as (server, port), connect(port) as admin:
        assert server.broker is not None
        node = str(server.broker.node_id)
        both = "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0"
        assert await alter(admin, node, *ops(both)) == (ErrorCode.none, None)
        for name in ("PLAINTEXT", "EXTRA"):
            backlogs = {_bound_as(s.socket)[4] for s in server.sockets[name]}  # type: ignore[attr-defined]
            assert backlogs == {7}, name
        code, _ = await alter(admin, node, ("socket.listen.backlog.size", SET, "9"))
        assert code == ErrorCode.invalid_request


@pytest.mark.skipif(not socket.has_ipv6, reason="needs IPv6")
async def test_ipv6_wildcard_listener_takes_ipv4_clients_too() -> None:
    # Kafka's [::] listener is one Java socket, dual-stack: an IPv4 client connects to it
    with socket.socket(socket.AF_INET6) as probe:  # a free port (advertised needs one)
        probe.bind(("::", 0))
        free = probe.getsockname()[1]
    async with running_broker(
        listen=None,
        **{
            "listeners": f"PLAINTEXT://[::]:{free}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{free}",
        },
    ) as (server, port):
        (listener,) = server.sockets["PLAINTEXT"]
        assert listener.socket.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 0  # type: ignore[attr-defined]
        async with connect(port) as c:  # (connect: 127.0.0.1)
            assert await metadata_broker(c) != ("", 0)


async def test_a_listener_prefixed_client_auth_is_checked_as_kafka_checks_it(
    tmp_path: Path,
) -> None:
    # Kafka's validateConfigTypes checks listener.name.<l>.ssl.client.auth as ssl.client.auth
    # (ValidString: lower-case names, trimmed), for a listener that does not exist yet too
    data = str(tmp_path / "data")
    bad = "listener.name.extra.ssl.client.auth"
    refused = (
        ErrorCode.invalid_request,
        "Invalid value REQUIRED for configuration ssl.client.auth: String must be one of: "
        "required, requested, none",
    )
    async with running_broker(data) as (server, port), connect(port) as admin:
        assert server.broker is not None
        node = str(server.broker.node_id)
        assert await alter(admin, node, (bad, SET, " REQUIRED ")) == refused
        assert await alter(admin, "", (bad, SET, "REQUIRED")) == refused  # before per-broker
        assert server.broker.dynamic.layer(node) == {}
        assert await alter(admin, node, (bad, SET, " required ")) == (ErrorCode.none, None)
        # one stored by an older kafkad (which took 'REQUIRED') is ignored, as Kafka's
        # removeInvalidConfigs ignores it: another change is taken (and drops it, as Kafka's
        # fromPersistentProps), the listener is added, and served after a restart
        await server.broker.dynamic.replace(node, {bad: "REQUIRED"})
        assert await alter(admin, node, ("log.retention.ms", SET, "5000")) == (
            ErrorCode.none,
            None,
        )
        assert server.broker.dynamic.layer(node) == {"log.retention.ms": "5000"}
        both = "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0"
        layer = {bad: "REQUIRED", **{n: str(v) for n, _, v in ops(both)}}
        await server.broker.dynamic.replace(node, layer)
        assert "EXTRA" in server.bound_listeners
    async with running_broker(data) as (server, port), connect(port) as admin:
        assert await metadata_broker(admin) == ("127.0.0.1", port)
        async with connect(extra_port(server)) as c:
            assert await metadata_broker(c) == ("127.0.0.1", extra_port(server))
