"""The plaintext connection path (``proxy/conn_io.py``) on real loopback sockets: what an idle
connection costs, and replies larger than the socket buffer."""

from __future__ import annotations

import socket
import struct
import tracemalloc

import trio
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsV0

from tests.proxy.harness import connect, encode_request, running_broker

CONNECTIONS = 100


async def test_an_idle_plaintext_connection_holds_no_read_buffer() -> None:
    """Kafka sizes a connection's receive buffer to the frame it reads; a reused per-connection
    256 KiB read buffer made 1000 idle connections cost the broker 250 MB (9 MB before)."""
    async with running_broker() as (_, port):
        async with connect(port) as first:  # the broker's one-time costs
            assert (await first.request(ApiVersionsV0())).error_code == 0
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            socks = []
            for i in range(CONNECTIONS):
                s = trio.socket.socket()
                await s.connect(("127.0.0.1", port))
                await s.send(encode_request(ApiVersionsV0(), i))
                socks.append(s)
            for s in socks:  # every connection has read a request and answered it
                (size,) = struct.unpack(">i", await s.recv(4, socket.MSG_WAITALL))
                assert len(await s.recv(size, socket.MSG_WAITALL)) == size
            held, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        for s in socks:
            s.close()
    assert (held - before) / CONNECTIONS < 64 * 1024


async def test_a_negative_idle_timeout_disables_it() -> None:
    """Kafka's Selector: ``connections.max.idle.ms`` < 0 means no idle expiry at all."""
    async with running_broker(**{"connections.max.idle.ms": "-1"}) as (_, port), connect(port) as c:
        assert (await c.request(ApiVersionsV0())).error_code == 0
        assert (await c.request(ApiVersionsV0())).error_code == 0
