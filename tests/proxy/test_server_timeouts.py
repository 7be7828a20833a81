"""The server's timers under trio's autojump clock, over in-memory listeners handed to
``Server``: the idle timeout (``connections.max.idle.ms``), the write timeout (a client that
stops reading), and the shutdown grace (``shutdown.grace.ms``).

Kafka's ``Selector`` closes a connection that saw no read or write for
``connections.max.idle.ms`` (default 600000); a request being served keeps it open. At shutdown
kafkad stops accepting, closes idle connections at once, lets busy ones finish what they read,
and cancels whatever is left after the grace.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.metadata.v12 import request as md

from proxy.config import load_config
from proxy.server import Server
from tests.proxy.harness import RawClient, encode_request
from tests.proxy.test_broker_requests import create, fetch_request


class MemoryListener(trio.abc.Listener[trio.abc.Stream]):
    """A listener whose connections are in-memory stream pairs; ``lockstep`` pairs make the
    server's ``send_all`` wait until the client reads, as a full socket buffer would."""

    def __init__(self) -> None:
        self.send, self.receive = trio.open_memory_channel[trio.abc.Stream](0)

    async def connect(self, *, lockstep: bool = False) -> trio.abc.Stream:
        pair = trio.testing.lockstep_stream_pair if lockstep else trio.testing.memory_stream_pair
        client, server = pair()
        await self.send.send(server)
        return client

    async def accept(self) -> trio.abc.Stream:
        try:
            return await self.receive.receive()
        except trio.EndOfChannel:
            raise trio.ClosedResourceError from None

    async def aclose(self) -> None:
        await self.receive.aclose()


@asynccontextmanager
async def memory_broker(
    listen: str | None = "127.0.0.1:9092", **overrides: str
) -> AsyncIterator[tuple[Server, MemoryListener]]:
    """A broker on in-memory streams, listening as ``listen`` (None: as the ``listeners``
    override says)."""
    cfg = load_config(
        listen=listen,
        advertise=None,
        data_dir="memory://",
        config_file=None,
        overrides=overrides,
        environ={},
    )
    listener = MemoryListener()
    name = cfg.endpoints()[0].name
    server = Server(cfg, listeners={name: [listener]})
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        try:
            yield server, listener
        finally:
            server.stop()


async def closed_at(client: RawClient) -> float:
    """Reads until the broker closes the stream; returns the (virtual) time it did."""
    while await client.read_frame() is not None:
        pass
    return trio.current_time()


async def test_the_given_listeners_are_served_and_advertise_their_configured_port(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with memory_broker() as (server, listener):
        client = RawClient(await listener.connect())  # type: ignore[arg-type]
        resp = await client.request(ApiVersionsRequest())
        assert resp.error_code == 0
        assert server.bound == ("127.0.0.1", 9092)


async def test_a_listener_that_is_not_configured_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cfg = load_config(
        listen="127.0.0.1:9092",
        advertise=None,
        data_dir="memory://",
        config_file=None,
        overrides={},
        environ={},
    )
    server = Server(cfg, listeners={"NOPE": [MemoryListener()]})
    with pytest.raises(ValueError, match="NOPE"):
        await server.run()


async def test_an_idle_connection_is_closed_after_connections_max_idle_ms(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with memory_broker(**{"connections.max.idle.ms": "5000"}) as (_, listener):
        client = RawClient(await listener.connect())  # type: ignore[arg-type]
        start = trio.current_time()
        assert await closed_at(client) - start == pytest.approx(5.0, abs=0.01)


async def test_requests_keep_a_connection_open_past_the_idle_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with memory_broker(**{"connections.max.idle.ms": "5000"}) as (_, listener):
        client = RawClient(await listener.connect())  # type: ignore[arg-type]
        start = trio.current_time()
        for _ in range(4):  # 4 x 4 s > 5 s, each gap below the timeout
            await trio.sleep(4)
            assert (await client.request(ApiVersionsRequest())).error_code == 0
        last = trio.current_time()
        assert last - start >= 16
        assert await closed_at(client) - last == pytest.approx(5.0, abs=0.01)


async def test_a_client_that_stops_reading_is_cut_after_the_write_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with memory_broker() as (server, listener):
        stream = await listener.connect(lockstep=True)
        # the request goes out; its reply cannot, as nobody reads the client side
        await stream.send_all(encode_request(ApiVersionsRequest(), 1))
        # NetConfig.write_s: 30 s, then the connection is dropped, the broker serves on
        await trio.sleep(29.5)
        assert len(server.connections) == 1
        await trio.sleep(1)
        assert not server.connections
        again = RawClient(await listener.connect())  # type: ignore[arg-type]
        assert (await again.request(ApiVersionsRequest())).error_code == 0


def _metadata() -> Any:
    return md.MetadataRequest(
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


async def test_shutdown_answers_long_polls_at_once_and_busy_connections_within_the_grace(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # a Metadata request is delayed 3 s by fault injection: it is busy when the broker stops
    overrides = {"shutdown.grace.ms": "10000", "kafkad.fault.injection": "metadata:delay=3000"}
    async with memory_broker(**overrides) as (server, listener):
        admin = RawClient(await listener.connect())  # type: ignore[arg-type]
        assert await create(admin, "t") == 0
        idle = RawClient(await listener.connect())  # type: ignore[arg-type]
        assert (await idle.request(ApiVersionsRequest())).error_code == 0
        busy = RawClient(await listener.connect())  # type: ignore[arg-type]
        polling = RawClient(await listener.connect())  # type: ignore[arg-type]
        times: dict[str, float] = {}
        async with trio.open_nursery() as nursery:

            async def ask(name: str, client: RawClient, request: Any) -> None:
                await client.send_raw(encode_request(request, 7))
                if await client.read_frame() is not None:
                    times[name] = trio.current_time() - start
                times[f"{name} closed"] = await closed_at(client) - start

            start = trio.current_time()
            nursery.start_soon(ask, "metadata", busy, _metadata())
            nursery.start_soon(ask, "fetch", polling, fetch_request("t", 0, wait_ms=60_000))
            await trio.sleep(1)  # both are being served
            server.stop()
            # the idle connection goes at once
            assert await closed_at(idle) - start == pytest.approx(1.0, abs=0.01)
        # the parked Fetch is woken and answered at once; the Metadata gets its answer when
        # its delay ends, inside the grace; then both connections are closed
        assert times["fetch"] == pytest.approx(1.0, abs=0.01)
        assert times["metadata"] == pytest.approx(3.0, abs=0.01)
        assert times["metadata closed"] == pytest.approx(3.0, abs=0.01)
        assert times["fetch closed"] == pytest.approx(1.0, abs=0.01)


async def test_shutdown_cuts_what_is_left_after_the_grace(
    autojump_clock: trio.testing.MockClock,
) -> None:
    overrides = {"shutdown.grace.ms": "2000", "kafkad.fault.injection": "metadata:delay=60000"}
    async with memory_broker(**overrides) as (server, listener):
        busy = RawClient(await listener.connect())  # type: ignore[arg-type]
        answered: list[bytes | None] = []
        async with trio.open_nursery() as nursery:

            async def ask() -> None:
                await busy.send_raw(encode_request(_metadata(), 7))
                answered.append(await busy.read_frame())

            nursery.start_soon(ask)
            await trio.sleep(1)
            start = trio.current_time()
            server.stop()
        # no answer: the 60 s delay was cut when the 2 s grace ran out
        assert answered == [None]
        assert trio.current_time() - start == pytest.approx(2.0, abs=0.01)
