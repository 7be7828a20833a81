"""What a user reads in the broker's log: connection churn only at DEBUG, topic auto-creation
at INFO with the client that caused it, and TLS or HTTP spoken to a plaintext Kafka port named
as such rather than as an absurd frame size."""

from __future__ import annotations

import logging
import ssl

import pytest
import trio
from kio.schema.metadata.v12 import request as md

from proxy.healthcheck import check
from tests.proxy.harness import connect, running_broker
from wire.errors import FramingError
from wire.framing import FrameDecoder

HTTP_GET = b"GET /health HTTP/1.1\r\nHost: localhost:9092\r\n\r\n"


def client_hello() -> bytes:
    """The first bytes a real TLS client sends (Python's ssl module, no socket)."""
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    conn = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        conn.do_handshake()
    return outgoing.read()


@pytest.mark.parametrize(
    ("data", "named"),
    [(client_hello(), "looks like a TLS handshake"), (HTTP_GET, "looks like an HTTP request")],
)
def test_tls_and_http_on_a_plaintext_port_are_named(data: bytes, named: str) -> None:
    decoder = FrameDecoder()
    decoder.feed(data)
    with pytest.raises(FramingError, match=f"{named}: this listener is PLAINTEXT Kafka"):
        decoder.next_frame()


def test_an_oversized_kafka_frame_is_still_reported_as_one() -> None:
    decoder = FrameDecoder(1000)
    decoder.feed(b"\x00\x00\x10\x00")
    with pytest.raises(FramingError, match="frame of 4096 bytes"):
        decoder.next_frame()


async def test_connections_log_at_debug_and_foreign_protocols_at_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with running_broker() as (_, port):
        for data in (client_hello(), HTTP_GET):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                await stream.send_all(data)
                with trio.fail_after(10):
                    assert await stream.receive_some() == b""  # the broker closes it
        assert await trio.to_thread.run_sync(check, "127.0.0.1", port, 10.0) is None
    churn = [r for r in caplog.records if r.getMessage().startswith("connection ")]
    assert len(churn) == 6 and {r.levelno for r in churn} == {logging.DEBUG}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("looks like a TLS handshake: this listener is PLAINTEXT" in m for m in warnings)
    assert any("looks like an HTTP request" in m for m in warnings)


async def test_auto_creation_is_logged_at_info_with_the_client(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    async with running_broker() as (_, port), connect(port) as c:
        await c.request(
            md.MetadataRequest(
                topics=(md.MetadataRequestTopic(topic_id=None, name="made-for-you"),),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            )
        )
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any(
        m.startswith(
            "auto-created topic made-for-you (1 partitions) for client 'test' at 127.0.0.1:"
        )
        for m in lines
    ), lines
