"""proxy/tls_stream.py: the server's TLS stream, against the standard library's client over an
in-memory transport (real TLS bytes, no sockets)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trio
import trio.testing

from proxy.tls_stream import TlsStream
from tests.cert_fixtures import cert_dir_fixture

certs = cert_dir_fixture("certs")


def server_context(certs: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(certs / "server.pem"))
    ctx.num_tickets = 0
    ctx.options |= ssl.OP_NO_RENEGOTIATION
    return ctx


def client_context(certs: Path, version: ssl.TLSVersion) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    ctx.minimum_version = ctx.maximum_version = version
    return ctx


async def connected(
    certs: Path, version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_3
) -> tuple[TlsStream, trio.SSLStream[trio.abc.Stream]]:
    near, far = trio.testing.memory_stream_pair()
    server = TlsStream(near, server_context(certs))
    client = trio.SSLStream(far, client_context(certs, version), server_hostname="localhost")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.do_handshake)
        nursery.start_soon(client.do_handshake)
    return server, client


VERSIONS = [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3]


@pytest.mark.parametrize("version", VERSIONS, ids=["tls1.2", "tls1.3"])
async def test_one_receive_returns_every_record_already_received(
    certs: Path, version: ssl.TLSVersion
) -> None:
    # librdkafka's way: one TLS record per buffer segment. trio.SSLStream would hand these out
    # one record per receive_some (200 trips through the broker's read loop).
    server, client = await connected(certs, version)
    pieces = [bytes([i]) * 1400 for i in range(200)]
    for piece in pieces:
        await client.send_all(piece)
    got = bytearray()
    calls = 0
    while len(got) < 1400 * 200:
        got += await server.receive_some(1 << 20)
        calls += 1
    assert bytes(got) == b"".join(pieces)
    assert calls <= 3  # the transport hands over at most its buffer per receive


async def test_receive_some_respects_max_bytes_and_keeps_the_rest(certs: Path) -> None:
    server, client = await connected(certs)
    await client.send_all(b"a" * 5000)
    await client.send_all(b"b" * 5000)
    first = await server.receive_some(6000)
    assert first == b"a" * 5000 + b"b" * 1000
    rest = await server.receive_some(10_000)
    assert rest == b"b" * 4000


@pytest.mark.parametrize("version", VERSIONS, ids=["tls1.2", "tls1.3"])
async def test_close_notify_ends_the_stream(certs: Path, version: ssl.TLSVersion) -> None:
    # CPython's SSLObject.read answers a close_notify with b"" (no error): the stream must end
    # there, not wait for more ciphertext (aiokafka waited 30 s for the broker's close).
    server, client = await connected(certs, version)
    await client.send_all(b"last words")
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.aclose)
            assert await server.receive_some() == b"last words"
            assert await server.receive_some() == b""
            assert await server.receive_some() == b""
            await server.aclose()


async def test_a_transport_eof_without_close_notify_ends_the_stream(certs: Path) -> None:
    server, client = await connected(certs)
    await client.send_all(b"x")
    await client.transport_stream.aclose()
    assert await server.receive_some() == b"x"
    with trio.fail_after(5):
        assert await server.receive_some() == b""


async def test_replies_round_trip_whole_and_in_order(certs: Path) -> None:
    server, client = await connected(certs)
    big = bytes(range(256)) * 4096  # 1 MiB: many records

    async def read_all(n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            out += await client.receive_some(1 << 20)
        return bytes(out)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.send_all, big)
        assert await read_all(len(big)) == big
    async with trio.open_nursery() as nursery:  # two senders: each one's bytes stay whole
        nursery.start_soon(server.send_all, b"1" * 70_000)
        nursery.start_soon(server.send_all, b"2" * 70_000)
        got = await read_all(140_000)
    assert got in (b"1" * 70_000 + b"2" * 70_000, b"2" * 70_000 + b"1" * 70_000)


async def test_a_garbage_handshake_breaks_the_stream_with_the_ssl_error_as_cause(
    certs: Path,
) -> None:
    near, far = trio.testing.memory_stream_pair()
    server = TlsStream(near, server_context(certs))
    await far.send_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    with pytest.raises(trio.BrokenResourceError) as caught:
        await server.do_handshake()
    assert isinstance(caught.value.__cause__, ssl.SSLError)


async def test_a_peer_gone_mid_handshake_breaks_the_stream(certs: Path) -> None:
    near, far = trio.testing.memory_stream_pair()
    server = TlsStream(near, server_context(certs))
    await far.aclose()
    with pytest.raises(trio.BrokenResourceError):
        await server.do_handshake()


async def test_a_forceful_close_still_sends_close_notify(certs: Path) -> None:
    """Kafka's SslTransportLayer.close sends close_notify (best effort) before closing the
    socket; the connection closes its stream with trio.aclose_forcefully, whose cancellation
    must not drop it (clients would see an EOF in violation of the protocol)."""
    server, client = await connected(certs)
    await trio.aclose_forcefully(server)
    assert await client.receive_some(100) == b""  # close_notify, not a BrokenResourceError
