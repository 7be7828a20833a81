"""An in-process broker on a real loopback socket, and a minimal raw Kafka client for tests.

The client encodes requests with kio and decodes responses with kio, independently of
``wire.codec`` (so a codec bug cannot hide itself by being on both sides).
"""

from __future__ import annotations

import dataclasses
import io
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.serial.writers import write_compact_string, write_int16, write_int32

from proxy.config import BrokerConfig, load_config
from proxy.server import Server


def encode_request(req: Any, correlation_id: int, client_id: str | None = "test") -> bytes:
    api_key, version = int(req.__api_key__), int(req.__version__)
    head = io.BytesIO()
    write_int16(head, api_key)
    write_int16(head, version)
    write_int32(head, correlation_id)
    cid = (client_id or "").encode()
    head.write(struct.pack(">h", len(cid) if client_id is not None else -1) + cid)
    if req.__flexible__:
        head.write(b"\x00")  # no tagged fields
    body = io.BytesIO()
    entity_writer(type(req))(body, req)
    payload = head.getvalue() + body.getvalue()
    return struct.pack(">i", len(payload)) + payload


def decode_response(api_key: int, version: int, payload: bytes) -> tuple[int, Any]:
    cls = load_response_schema(api_key, version)
    (correlation_id,) = struct.unpack_from(">i", payload, 0)
    pos = 4
    if cls.__flexible__ and api_key != 18:
        pos += 1  # empty tagged fields of response header v1
    value, size = entity_reader(cls)(payload, pos)
    assert pos + size == len(payload), "trailing bytes after the response body"
    return correlation_id, value


_ = write_compact_string  # re-exported for tests building flexible strings by hand


class RawClient:
    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buf = bytearray()
        self.next_id = 1

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def read_frame(self) -> bytes | None:
        while True:
            if len(self.buf) >= 4:
                (size,) = struct.unpack_from(">i", self.buf, 0)
                if len(self.buf) >= 4 + size:
                    frame = bytes(self.buf[4 : 4 + size])
                    del self.buf[: 4 + size]
                    return frame
            data = await self.stream.receive_some(65536)
            if not data:
                return None
            self.buf += data

    async def request(self, req: Any) -> Any:
        cid = self.next_id
        self.next_id += 1
        await self.stream.send_all(encode_request(req, cid))
        frame = await self.read_frame()
        assert frame is not None, "broker closed the connection"
        got_cid, resp = decode_response(int(req.__api_key__), int(req.__version__), frame)
        assert got_cid == cid
        return resp

    async def aclose(self) -> None:
        await self.stream.aclose()


def broker_config(
    overrides: dict[str, str] | None = None,
    *,
    listen: str | None = "127.0.0.1:0",
    advertise: str | None = None,
    data_dir: str | None = "memory://",
    config_file: str | None = None,
    environ: dict[str, str] | None = None,
) -> BrokerConfig:
    """``load_config`` as the command line calls it, with a test's defaults (no ``KAFKAD_*``
    environment unless ``environ`` gives one)."""
    return load_config(
        listen=listen,
        advertise=advertise,
        data_dir=data_dir,
        config_file=config_file,
        overrides=overrides or {},
        environ=environ or {},
    )


@asynccontextmanager
async def running_broker(
    data_dir: str | None = "memory://",
    features: dict[str, int] | None = None,
    listen: str | None = "127.0.0.1:0",
    config_file: str | None = None,
    **overrides: str,
) -> AsyncIterator[tuple[Server, int]]:
    """``features``: the ``--feature`` levels a new data dir is formatted with; ``listen`` None
    when the overrides or ``config_file`` name the ``listeners``."""
    cfg = broker_config(overrides, listen=listen, data_dir=data_dir, config_file=config_file)
    server = Server(dataclasses.replace(cfg, features=features))
    async with trio.open_nursery() as nursery:
        _, port = await nursery.start(server.run)
        try:
            yield server, port
        finally:
            server.stop()


@asynccontextmanager
async def connect(port: int) -> AsyncIterator[RawClient]:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    client = RawClient(stream)
    try:
        yield client
    finally:
        await client.aclose()
