"""Connection quotas (issue 15): Kafka's ConnectionQuotas over real sockets: per-IP limits close
the new connection at once, the broker-wide and listener limits hold it unserved until a slot
frees; all dynamic (IncrementalAlterConfigs applies at once) and checked with Kafka's texts.
The creation-rate throttle is checked on ``ConnectionQuotas`` under trio's MockClock."""

from __future__ import annotations

import socket
import threading
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.alter_client_quotas.v1 import request as aq1
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode

from proxy.cli import startup_failure
from proxy.connection_quota_config import parse_overrides, validate_values
from proxy.connection_quotas import ConnectionQuotas, ConnectionThrottled, TooManyConnections
from proxy.properties_file import ConfigError
from proxy.server import Server
from tests.proxy.harness import (
    RawClient,
    broker_config,
    connect,
    encode_request,
    running_broker,
)
from tests.proxy.quotas.test_client_quotas_apis import alter_req
from tests.proxy.test_dynamic_broker_configs import (
    DEFAULT,
    DYNAMIC_BROKER,
    DYNAMIC_DEFAULT,
    INT,
    SET,
    STATIC,
    STRING,
    alter,
    describe,
    synonyms,
)

API_VERSIONS = ApiVersionsRequest()


async def held(server: Server) -> None:
    """Returns once the broker has accepted a connection it holds unserved (at most 5 s)."""
    assert server.connection_quotas is not None
    with trio.fail_after(5):
        await server.connection_quotas.until_waiting(1)


async def served(c: RawClient) -> bool:
    """Whether the broker answers an ApiVersions on ``c`` (False: it closed the connection)."""
    with trio.fail_after(5):
        try:
            await c.stream.send_all(encode_request(API_VERSIONS, 1))
            return await c.read_frame() is not None
        except trio.BrokenResourceError:  # closed with the request unread: a reset
            return False


@asynccontextmanager
async def open_clients(port: int, n: int) -> AsyncIterator[list[RawClient]]:
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(connect(port)) for _ in range(n)]


async def test_per_ip_limit_closes_the_next_connection_at_once() -> None:
    async with running_broker(**{"max.connections.per.ip": "2"}) as (server, port):
        async with open_clients(port, 2) as clients:
            for c in clients:
                assert await served(c)
            async with connect(port) as third:
                with trio.fail_after(5):
                    assert await third.read_frame() is None  # closed without a request
            assert server.connection_quotas is not None
            assert server.connection_quotas.count("127.0.0.1") == 2  # it was not counted
        async with connect(port) as again:  # the two closed: room again
            assert await served(again)


async def test_per_ip_override_raises_the_limit_for_that_address() -> None:
    limits = {"max.connections.per.ip": "1", "max.connections.per.ip.overrides": "127.0.0.1:3"}
    async with running_broker(**limits) as (_, port), open_clients(port, 3) as clients:
        for c in clients:
            assert await served(c)
        async with connect(port) as fourth:
            assert not await served(fourth)


async def test_broker_wide_limit_holds_the_next_connection_until_one_closes() -> None:
    async with running_broker(**{"max.connections": "2"}) as (server, port):
        first, second = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(2)]
        clients = [RawClient(first), RawClient(second)]
        for c in clients:
            assert await served(c)
        async with connect(port) as third:
            await third.stream.send_all(encode_request(API_VERSIONS, 1))
            await held(server)  # accepted, not served (Kafka's acceptor)
            await clients[0].aclose()
            with trio.fail_after(5):
                assert await third.read_frame() is not None
        await clients[1].aclose()


async def test_listener_limit_and_runtime_raise() -> None:
    async with (
        running_broker(**{"listener.name.plaintext.max.connections": "1"}) as (
            server,
            port,
        ),
        connect(port) as admin,
    ):
        assert await served(admin)
        async with connect(port) as queued:
            await queued.stream.send_all(encode_request(API_VERSIONS, 1))
            await held(server)
            # the cluster default of the listener's limit: the held accept goes on at once
            ok = await alter(admin, "", ("listener.name.plaintext.max.connections", SET, "2"))
            assert ok == (ErrorCode.none, None)
            with trio.fail_after(5):
                assert await queued.read_frame() is not None


async def test_lowered_limit_closes_the_least_recently_active() -> None:
    async with running_broker() as (_, port), open_clients(port, 3) as (admin, old, recent):
        for c in (old, recent, admin):
            assert await served(c)
        # one too many: the one idle longest goes (the admin's is busy with the change)
        assert await alter(admin, "", ("max.connections", SET, "2")) == (ErrorCode.none, None)
        with trio.fail_after(5):
            assert await old.read_frame() is None
        assert await served(recent) and await served(admin)


@asynccontextmanager
async def two_listeners(
    first: str = "A", **overrides: str
) -> AsyncIterator[tuple[Server, int, int]]:
    """A broker with listeners ``first`` and B: (server, its port, B's port)."""
    two = {
        "listeners": f"{first}://127.0.0.1:0,B://127.0.0.1:0",
        "listener.security.protocol.map": f"{first}:PLAINTEXT,B:PLAINTEXT",
    }
    async with running_broker(listen=None, **two, **overrides) as (server, _):
        yield server, server.bound_listeners[first][1], server.bound_listeners["B"][1]


async def test_lowered_limit_closes_each_listeners_least_recently_active_in_turn() -> None:
    # Kafka: each listener's network threads close their own least recently active connection
    # while the broker is over max.connections: one of A's and one of B's, not A's two oldest
    async with (
        two_listeners() as (_, port_a, port_b),
        open_clients(port_a, 2) as (a1, a2),
        open_clients(port_b, 2) as (b1, admin),
    ):
        for c in (a1, a2, b1, admin):
            assert await served(c)
        assert await alter(admin, "", ("max.connections", SET, "2")) == (ErrorCode.none, None)
        with trio.fail_after(5):
            assert await a1.read_frame() is None
            assert await b1.read_frame() is None
        assert await served(a2) and await served(admin)


async def test_lowered_listener_limit_closes_nothing() -> None:
    # Kafka's closeExcessConnections reads the broker-wide limit only: a listener's lowered
    # limit holds its next connection, and keeps the ones it has
    async with (
        two_listeners() as (server, port_a, port_b),
        open_clients(port_a, 2) as (a1, a2),
        connect(port_b) as admin,
    ):
        for c in (a1, a2, admin):
            assert await served(c)
        key = "listener.name.a.max.connections"
        assert await alter(admin, "", (key, SET, "1")) == (ErrorCode.none, None)
        assert await served(a1) and await served(a2)
        async with connect(port_a) as a3:
            await a3.stream.send_all(encode_request(API_VERSIONS, 1))
            await held(server)
            await a1.aclose()
            await a2.aclose()
            with trio.fail_after(5):
                assert await a3.read_frame() is not None


async def test_inter_broker_listener_is_outside_the_broker_wide_limit() -> None:
    # Kafka's protectedListener: the inter-broker listener (PLAINTEXT by default), beside
    # others, is held only by its own limit (which defaults to max.connections too), not by
    # the broker's total; its connections count in that total ...
    async with (
        two_listeners("PLAINTEXT", **{"max.connections": "2"}) as (server, port_p, port_b),
        open_clients(port_b, 2) as (b1, b2),
    ):
        assert await served(b1) and await served(b2)
        async with connect(port_p) as p1, connect(port_p) as p2:
            assert await served(p1) and await served(p2)
            async with connect(port_b) as b3:  # the others' are held
                await b3.stream.send_all(encode_request(API_VERSIONS, 1))
                await held(server)


async def test_lowered_limit_closes_no_inter_broker_connection() -> None:
    # ... and closeExcessConnections leaves its connections alone (maxConnectionsExceeded)
    async with (
        two_listeners("PLAINTEXT") as (_, port_p, port_b),
        open_clients(port_p, 2) as (p1, admin),
        open_clients(port_b, 2) as (b1, b2),
    ):
        for c in (p1, admin, b1, b2):
            assert await served(c)
        assert await alter(admin, "", ("max.connections", SET, "3")) == (ErrorCode.none, None)
        with trio.fail_after(5):
            assert await b1.read_frame() is None
        assert await served(p1) and await served(b2)


async def test_inter_broker_connection_over_the_limit_closes_another_listeners() -> None:
    # Kafka: a protected listener's connection taken past max.connections puts the broker over
    # it, and the other listeners' network threads close their least recently active ones
    # (closeExcessConnections runs on every poll, not only when the limit is lowered:
    # DynamicConnectionQuotaTest "closing connections on another listener")
    async with (
        two_listeners("PLAINTEXT", **{"max.connections": "2"}) as (server, port_p, port_b),
        open_clients(port_b, 2) as (b1, b2),
    ):
        assert await served(b1) and await served(b2)
        async with connect(port_p) as p1:
            assert await served(p1)
            with trio.fail_after(5):
                assert await b1.read_frame() is None  # the older of B's
            assert await served(b2) and await served(p1)
            assert server.connection_quotas is not None
            assert server.connection_quotas.total == 2


async def test_a_listener_added_at_runtime_is_never_the_inter_broker_one() -> None:
    # Kafka starts only with its inter-broker listener (PLAINTEXT by default) among the
    # listeners (KafkaConfig.validateValues); kafkad starts without one, and then has none: a
    # PLAINTEXT listener added at runtime is an ordinary one, held by max.connections
    overrides = {
        "listeners": "A://127.0.0.1:0",
        "listener.security.protocol.map": "A:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "max.connections": "1",
    }
    async with (
        running_broker(listen=None, **overrides) as (server, _),
        connect(server.bound_listeners["A"][1]) as admin,
    ):
        assert server.broker is not None
        node = str(server.broker.node_id)
        both = "A://127.0.0.1:0,PLAINTEXT://127.0.0.1:0"
        ok = await alter(admin, node, ("listeners", SET, both))
        assert ok == (ErrorCode.none, None)
        async with connect(server.bound_listeners["PLAINTEXT"][1]) as p:
            await p.stream.send_all(encode_request(API_VERSIONS, 1))
            await held(server)
            assert await served(admin)


async def test_runtime_per_ip_limit_applies_to_the_next_connection() -> None:
    async with running_broker() as (server, port), connect(port) as admin:
        node = str(server.broker.node_id)  # type: ignore[union-attr]
        assert await alter(admin, node, ("max.connections.per.ip", SET, "1")) == (
            ErrorCode.none,
            None,
        )
        async with connect(port) as second:
            assert not await served(second)
        ok = await alter(admin, node, ("max.connections.per.ip.overrides", SET, "127.0.0.1:2"))
        assert ok == (ErrorCode.none, None)
        async with connect(port) as second:
            assert await served(second)


async def test_described_with_kafka_defaults() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        configs = await describe(c, 4, str(server.broker.node_id))  # type: ignore[union-attr]
        got = {
            n: (configs[n].value, configs[n].config_source, configs[n].config_type)
            for n in (
                "max.connections",
                "max.connections.per.ip",
                "max.connections.per.ip.overrides",
                "max.connection.creation.rate",
            )
        }
        assert got == {
            "max.connections": ("2147483647", DEFAULT, INT),
            "max.connections.per.ip": ("2147483647", DEFAULT, INT),
            "max.connections.per.ip.overrides": ("", DEFAULT, STRING),
            "max.connection.creation.rate": ("2147483647", DEFAULT, INT),
        }
        assert not configs["max.connections"].read_only


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "max.connections",
            "-1",
            "Invalid value -1 for configuration max.connections: Value must be at least 0",
        ),
        (
            "listener.name.plaintext.max.connections",
            "-1",
            "Invalid value -1 for configuration max.connections: Value must be at least 0",
        ),
        (
            "max.connection.creation.rate",
            "x",
            "Invalid value x for configuration max.connection.creation.rate: "
            "Not a number of type INT",
        ),
        (
            "max.connections",
            "0",
            "Invalid value org.apache.kafka.common.config.ConfigException: Invalid "
            "max.connections 0 for configuration Invalid dynamic configuration",
        ),
        (
            "listener.name.plaintext.max.connection.creation.rate",
            "0",
            "Invalid value org.apache.kafka.common.config.ConfigException: Invalid "
            "max.connection.creation.rate 0 for configuration Invalid dynamic configuration",
        ),
        (
            "max.connections.per.ip",
            "0",
            "requirement failed: max.connections.per.ip can be set to zero only if "
            "max.connections.per.ip.overrides property is set.",
        ),
        ("max.connections.per.ip.overrides", "h:x", 'For input string: "x"'),
        (
            "max.connections.per.ip.overrides",
            "a b:1",
            "max.connections.per.ip.overrides contains invalid addresses : a b",
        ),
    ],
)
async def test_refused_as_kafka_refuses(name: str, value: str, message: str) -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await alter(c, "", (name, SET, value)) == (ErrorCode.invalid_request, message)
        assert await served(c)  # nothing applied


def test_overrides_parse_as_kafka_csv_map() -> None:
    assert parse_overrides("") == {}
    assert parse_overrides("host:100 , 127.0.0.1:200,::1:3,") == {
        "host": 100,
        "127.0.0.1": 200,
        "::1": 3,
    }
    with pytest.raises(ValueError, match="begin 0, end -1, length 4"):
        parse_overrides("a:1,host")
    zero = {"max.connections.per.ip": 0, "max.connections.per.ip.overrides": "h:1"}
    assert validate_values(zero) is None


def test_startup_refuses_per_ip_zero_without_overrides() -> None:
    with pytest.raises(ConfigError, match="can be set to zero only if"):
        broker_config({"max.connections.per.ip": "0"})


def quotas(**values: int | str) -> ConnectionQuotas:
    base: dict[str, int | str] = {
        "quota.window.num": 11,
        "quota.window.size.seconds": 1,
        "max.connections": 2**31 - 1,
        "max.connections.per.ip": 2**31 - 1,
        "max.connections.per.ip.overrides": "",
        "max.connection.creation.rate": 2**31 - 1,
    }
    return ConnectionQuotas(base | values, ["PLAINTEXT"])


async def test_creation_rate_delays_the_accept_as_kafka(
    autojump_clock: trio.testing.MockClock,
) -> None:
    q = quotas(**{"max.connection.creation.rate": 2})
    # Kafka's Rate: 11 samples of 1 s, at least 10 s of window: 20 connections at once are 2/s
    for _ in range(20):
        await q.inc("PLAINTEXT", "10.0.0.1")
    assert trio.current_time() == 0
    await q.inc("PLAINTEXT", "10.0.0.1")  # 21/10 s: (2.1 - 2) / 2 * 10000 ms
    assert trio.current_time() == pytest.approx(0.5)
    assert q.listeners["PLAINTEXT"].throttled == 1


async def test_listener_rate_and_zero_rate_bounded_by_one_window(
    autojump_clock: trio.testing.MockClock,
) -> None:
    q = quotas(**{"listener.name.plaintext.max.connection.creation.rate": 0})
    await q.inc("PLAINTEXT", "10.0.0.1")
    assert trio.current_time() == pytest.approx(1.0)  # quota 0: the longest throttle, a window


async def test_waiting_accept_follows_a_raised_limit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    values: dict[str, int | str] = {"max.connections": 1}
    q = quotas(**values)
    await q.inc("PLAINTEXT", "10.0.0.1")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(q.inc, "PLAINTEXT", "10.0.0.2")
        await trio.testing.wait_all_tasks_blocked()
        assert q._waiting == 1 and q.total == 1
        q.values["max.connections"] = 2  # type: ignore[index]
        q.configure()
    assert q.total == 2 and trio.current_time() == 0
    with pytest.raises(TooManyConnections):
        q.values["max.connections.per.ip"] = 1  # type: ignore[index]
        q.values["max.connections"] = 3  # type: ignore[index]
        q.configure()
        await q.inc("PLAINTEXT", "10.0.0.1")
    assert q.count("10.0.0.1") == 1  # the refused one is not counted


async def test_ip_creation_rate_throttles_only_that_ip(
    autojump_clock: trio.testing.MockClock,
) -> None:
    q = quotas(**{"max.connection.creation.rate": 100})
    q.set_ip_rates({(("ip", "10.0.0.1"),): {"connection_creation_rate": 1.0}})
    for _ in range(10):  # 10 in the first 10 s window: 1/s
        await q.inc("PLAINTEXT", "10.0.0.1")
    with pytest.raises(ConnectionThrottled) as refused:
        await q.inc("PLAINTEXT", "10.0.0.1")  # 11/10 s: (1.1 - 1) / 1 * 10000 ms, bounded
    assert refused.value.throttle_ms == 1000  # one quota window
    assert q.count("10.0.0.1") == 10  # not counted
    await q.inc("PLAINTEXT", "10.0.0.2")  # another IP: the ip default is unlimited
    # the throttled one was taken back out of the broker's rate: 11 recorded, not 12
    assert q.broker.rate.measure(0) * 10 == pytest.approx(11)
    q.set_ip_rates({((("ip", None),)): {"connection_creation_rate": 0.0}})
    with pytest.raises(ConnectionThrottled):
        await q.inc("PLAINTEXT", "10.0.0.3")  # the default ip entity: 0 for everyone else


async def test_ip_throttled_connection_is_closed_unserved() -> None:
    async with running_broker() as (_, port), connect(port) as admin:
        quota = alter_req(aq1, [("ip", "127.0.0.1")], [("connection_creation_rate", 1.0)])
        resp = await admin.request(quota)  # AlterClientQuotas: applied at once
        assert resp.entries[0].error_code == ErrorCode.none
        for _ in range(10):  # Kafka's Rate: 10 in the first 10 s are 1/s (well within 10 s)
            async with connect(port) as c:
                assert await served(c)
        async with connect(port) as c:
            assert not await served(c)
        assert await served(admin)


async def test_listener_overrides_described_as_kafka_with_the_base_synonym() -> None:
    # Kafka's ConfigHelper: every listener-prefixed config in the KafkaConfig's originals is
    # listed (a static one too), read-only (AllDynamicConfigs holds base names only), typed as
    # its base, with the synonyms of brokerConfigSynonyms(name, matchListenerOverride=true):
    # [name, base] in each layer, from the first entry of name.
    conns, rate = (
        "listener.name.plaintext.max.connections",
        ("listener.name.plaintext.max.connection.creation.rate"),
    )
    static = {conns: "5", "max.connections": "7"}
    async with running_broker(**static) as (server, port), connect(port) as c:
        node = str(server.broker.node_id)  # type: ignore[union-attr]
        assert await alter(c, node, (rate, SET, "9")) == (ErrorCode.none, None)
        assert await alter(c, "", ("max.connection.creation.rate", SET, "11")) == (
            ErrorCode.none,
            None,
        )
        configs = await describe(c, 4, node)
        e = configs[conns]
        assert (e.value, e.config_source, e.read_only, e.config_type) == ("5", STATIC, True, INT)
        assert synonyms(e) == [
            (conns, "5", STATIC),
            ("max.connections", "7", STATIC),
            ("max.connections", "2147483647", DEFAULT),
        ]
        e = configs[rate]
        assert (e.value, e.config_source, e.read_only) == ("9", DYNAMIC_BROKER, True)
        assert synonyms(e) == [
            (rate, "9", DYNAMIC_BROKER),
            ("max.connection.creation.rate", "11", DYNAMIC_DEFAULT),
            ("max.connection.creation.rate", "2147483647", DEFAULT),
        ]
        assert synonyms(configs["max.connections"]) == [
            ("max.connections", "7", STATIC),
            ("max.connections", "2147483647", DEFAULT),
        ]


async def test_override_host_names_resolved_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Kafka resolves them (InetAddress.getByName) on the thread applying the config, the old
    # map in force meanwhile; here a slow resolver must not stall every connection: the lookup
    # runs in a worker thread and the new overrides apply whole once it answers (a value of IP
    # literals only at once).
    release = threading.Event()

    real = socket.getaddrinfo

    def slow_getaddrinfo(host: str, *args: Any, **kwargs: Any) -> list[Any]:
        if host != "clients.example":
            return real(host, *args, **kwargs)
        release.wait(5)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 0))]

    monkeypatch.setattr(socket, "getaddrinfo", slow_getaddrinfo)
    async with running_broker() as (server, port), connect(port) as admin:
        q = server.connection_quotas
        assert q is not None
        node = str(server.broker.node_id)  # type: ignore[union-attr]
        key = "max.connections.per.ip.overrides"
        assert await alter(admin, node, (key, SET, "10.9.9.9:1")) == (ErrorCode.none, None)
        assert q.per_ip_overrides == {"10.9.9.9": 1}  # literals only: at once
        overrides = "clients.example:7,10.1.2.3:4"
        with trio.fail_after(2):  # the broker still answers while the lookup hangs
            ok = await alter(admin, node, (key, SET, overrides))
            assert ok == (ErrorCode.none, None)
            async with connect(port) as other:
                assert await served(other)
        assert q.per_ip_overrides == {"10.9.9.9": 1}  # the old map until resolved
        release.set()
        with trio.fail_after(5):
            await q.until_resolved()
        assert q.per_ip_overrides == {"127.0.0.1": 7, "10.1.2.3": 4}


def _unresolvable(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    real = socket.getaddrinfo

    def getaddrinfo(host: str, *args: Any, **kwargs: Any) -> list[Any]:
        if host == name:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


async def test_static_override_host_that_does_not_resolve_stops_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Kafka's ConnectionQuotas constructor: InetAddress.getByName throws UnknownHostException,
    # the node does not start; the CLI prints it in one line
    _unresolvable(monkeypatch, "nosuch.example")
    overrides = {"max.connections.per.ip.overrides": "127.0.0.1:5,nosuch.example:3"}
    with pytest.raises(BaseException) as caught:  # a group around the error
        async with running_broker(**overrides):
            pytest.fail("the broker started")
    line = startup_failure(caught.value, "127.0.0.1:0")
    assert line == (
        "max.connections.per.ip.overrides: unknown host nosuch.example: Name or service not known"
    )


async def test_dynamic_override_host_that_does_not_resolve_keeps_the_old_overrides(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    # Kafka: IncrementalAlterConfigs accepts it (validateValues checks characters only) and
    # stores it; applying it throws in updateMaxConnectionsPerIpOverride before the map is
    # replaced: logged, the previous overrides stay whole. At a restart with it stored the
    # broker starts (the socket server is made from the static config).
    _unresolvable(monkeypatch, "nosuch.example")
    static = {"max.connections.per.ip.overrides": "127.0.0.1:3"}
    data = str(tmp_path / "data")
    async with running_broker(data, **static) as (server, port), connect(port) as c:
        q = server.connection_quotas
        assert q is not None
        node = str(server.broker.node_id)  # type: ignore[union-attr]
        bad = "10.0.0.1:2,nosuch.example:5"
        ok = await alter(c, node, ("max.connections.per.ip.overrides", SET, bad))
        assert ok == (ErrorCode.none, None)
        with trio.fail_after(5):
            await q.until_resolved()
        assert q.per_ip_overrides == {"127.0.0.1": 3}
        assert "unknown host nosuch.example" in caplog.text
        assert (await describe(c, 4, node))["max.connections.per.ip.overrides"].value == bad
    caplog.clear()
    async with running_broker(data, **static) as (server, _):
        q = server.connection_quotas
        assert q is not None
        with trio.fail_after(5):
            await q.until_resolved()
        assert q.per_ip_overrides == {"127.0.0.1": 3}
        assert "unknown host nosuch.example" in caplog.text
