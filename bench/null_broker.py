"""A broker that does nothing: the floor of a Python server's cost per request (issue 20).

    python -m bench.null_broker [--listen 127.0.0.1:0] [--topic null] [--partitions 4]
                                [--loop trio|asyncio|selectors]

It answers every request with response bytes built once at start, per api key and version,
with kafkad's own classes and encoder (``wire.codec.encode_response``); per request only the
correlation id is copied in. Nothing is decoded beyond the first 8 bytes of the frame (api key,
version, correlation id): no storage, no coordinator, no checks. What it answers:

* ApiVersions: kafkad's answer at its defaults (its own handler, telemetry and the consumer
  group protocol on, ``transaction.version`` 2 finalized at epoch 0);
* Metadata: one broker (itself), one topic ``--topic`` of ``--partitions`` partitions it leads,
  whatever topics were asked for (a client must use that topic);
* FindCoordinator: itself (v0-3; v4+ name the key "", which only clients that send v4+ and
  match keys would mind, librdkafka sends v0-2);
* InitProducerId: producer id 1000, epoch 0, to every producer;
* AddPartitionsToTxn v0-3: every partition of the topic added (librdkafka ignores the ones it
  did not ask for); v4+ (broker to broker): no results;
* Produce: partition 0 of the topic at base offset 0 (librdkafka reads the answer as the one
  partition it sent; it checks neither the index nor the offset); acks=0 is answered too;
* EndTxn: no error (v5's producer id and epoch: 1000 and 0);
* GetTelemetrySubscriptions: no metrics requested (the client does not push); PushTelemetry:
  no error.

A request of any other api key or version closes its connection (stderr says which).

``--loop`` picks the server: ``trio`` reads and writes as kafkad's plaintext connections do
(``proxy/conn_io.SocketIO``: wait readable, one ``readv`` into a reused buffer, ``os.write``;
``wire.framing.FrameDecoder``; every complete frame answered, the answers joined in one write),
``asyncio`` is a plain ``asyncio.Protocol`` (``data_received`` -> ``transport.write``), and
``selectors`` an epoll loop with no framework at all: the same per-request work, so the three
side by side show what the event loop costs over the kernel's share.

On start it prints ``null ready advertise=HOST:PORT loop=NAME`` on stdout (as ``kafkad serve``
prints its ready line), which ``bench/throughput.py --start-null`` reads.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import select
import selectors
import socket
import sys
import types
import typing
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: python bench/null_broker.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import trio
from kio.schema.api_versions.v4.request import ApiVersionsRequest

from proxy.conn_io import SocketIO
from proxy.features import DEFAULTS
from proxy.handlers.api_versions import api_versions
from proxy.registry import advertised, entry
from wire.codec import RequestHeader, encode_response, response_class
from wire.errors import FramingError, UnsupportedVersion
from wire.framing import FrameDecoder, Want
from wire.values import AUTHORIZED_OPERATIONS_OMITTED, ms32
from wire.versions import zero_value

NODE_ID = 1
PRODUCER_ID = 1000
TOPIC_ID = uuid.UUID("6e756c6c-6e75-6c6c-6e75-6c6c6e756c6c")
INSTANCE_ID = uuid.UUID("6e756c6c-0000-4000-8000-000000000001")
LOOPS = ("trio", "asyncio", "selectors")

# api key, version (the frame's first 4 bytes) -> (size prefix, the answer after the
# correlation id)
Table = dict[bytes, tuple[bytes, bytes]]


# --------------------------------------------------------------------------- the answers


def _unwrap(hint: Any) -> tuple[Any, bool]:
    """(inner type, is a tuple of it) of a field's type hint."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) is tuple:
        return typing.get_args(hint)[0], True
    return hint, False


def make(cls: type[Any], spec: Mapping[str, Any]) -> Any:
    """An entity of ``cls`` from ``spec`` (nested dicts naming fields of any version: those
    ``cls`` lacks are ignored, those it has and ``spec`` does not name get their zero value)."""
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.name not in spec:
            kwargs[field.name] = zero_value(cls, field.name)
            continue
        value = spec[field.name]
        inner, many = _unwrap(hints[field.name])
        if value is not None and dataclasses.is_dataclass(inner):
            value = tuple(make(inner, v) for v in value) if many else make(inner, value)  # type: ignore[arg-type]
        kwargs[field.name] = value
    return cls(**kwargs)


def specs(host: str, port: int, topic: str, partitions: int) -> dict[int, dict[str, Any]]:
    """api key -> the answer's fields at every version (``make`` keeps what a version has)."""
    me = {"node_id": NODE_ID, "host": host, "port": port, "rack": None}
    every_partition = range(partitions)
    return {
        3: {  # Metadata
            "brokers": [me],
            "cluster_id": "null-broker",
            "controller_id": NODE_ID,
            "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
            "topics": [
                {
                    "name": topic,
                    "topic_id": TOPIC_ID,
                    "is_internal": False,
                    "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
                    "partitions": [
                        {
                            "partition_index": p,
                            "leader_id": NODE_ID,
                            "leader_epoch": 0,
                            "replica_nodes": (NODE_ID,),
                            "isr_nodes": (NODE_ID,),
                            "offline_replicas": (),
                        }
                        for p in every_partition
                    ],
                }
            ],
        },
        10: {**me, "error_message": None, "coordinators": [{"key": "", **me}]},  # FindCoordinator
        22: {"producer_id": PRODUCER_ID, "producer_epoch": 0},  # InitProducerId
        24: {  # AddPartitionsToTxn
            "results_by_topic_v3_and_below": [
                {
                    "name": topic,
                    "results_by_partition": [{"partition_index": p} for p in every_partition],
                }
            ],
        },
        0: {  # Produce
            "responses": [
                {
                    "name": topic,
                    "topic_id": TOPIC_ID,
                    "partition_responses": [
                        {
                            "index": 0,
                            "base_offset": 0,
                            "log_append_time": None,
                            "log_start_offset": 0,
                            "error_message": None,
                        }
                    ],
                }
            ],
        },
        26: {"producer_id": PRODUCER_ID, "producer_epoch": 0},  # EndTxn
        71: {  # GetTelemetrySubscriptions
            "client_instance_id": INSTANCE_ID,
            "subscription_id": 1,
            "accepted_compression_types": (0,),
            "push_interval": ms32(300_000),
            "telemetry_max_bytes": 1_048_576,
            "delta_temporality": True,
            "requested_metrics": (),
        },
        72: {},  # PushTelemetry
    }


def _api_versions(version: int) -> Any:
    """kafkad's ApiVersions answer at its defaults, from its own handler."""
    broker = types.SimpleNamespace(
        groups=types.SimpleNamespace(consumer_protocol_enabled=True),
        client_telemetry=types.SimpleNamespace(enabled=True, software_seen=lambda *_: None),
        features=types.SimpleNamespace(level=lambda name: DEFAULTS.get(name, 0), epoch=0),
    )
    ctx = types.SimpleNamespace(broker=broker, version=version, session=None, peer="")
    req = ApiVersionsRequest(client_software_name="null", client_software_version="1")
    coro = api_versions(ctx, req)  # type: ignore[arg-type]
    try:
        coro.send(None)
    except StopIteration as done:
        return entry(18).write(done.value, req, version)
    raise RuntimeError("api_versions awaited something")


def build_table(host: str, port: int, topic: str, partitions: int) -> Table:
    """Every answer this broker gives, encoded once."""
    served = advertised()
    table: Table = {}
    bodies: dict[int, Callable[[int], Any]] = {18: _api_versions}
    for key, spec in specs(host, port, topic, partitions).items():
        bodies[key] = lambda v, key=key, spec=spec: make(response_class(key, v), spec)
    for key, body in bodies.items():
        low, high = served[key]
        for version in range(low, high + 1):
            try:
                answer = body(version)
            except UnsupportedVersion:  # advertised, no schema (Produce v0-2)
                continue
            frame = encode_response(RequestHeader(key, version, 0, None), answer)
            table[key.to_bytes(2, "big") + version.to_bytes(2, "big")] = (frame[:4], frame[8:])
    return table


class Unanswered(Exception):
    """A request this broker has no answer for."""


def answers(table: Table, frames: Iterable[bytes]) -> bytes:
    """The answers to ``frames`` (requests without their size prefix), joined."""
    out = []
    for frame in frames:
        canned = table.get(frame[:4])
        if canned is None:
            key, version = int.from_bytes(frame[:2], "big"), int.from_bytes(frame[2:4], "big")
            raise Unanswered(f"api key {key} v{version}")
        out += (canned[0], frame[4:8], canned[1])
    return b"".join(out)


def _frames(decoder: FrameDecoder) -> tuple[list[bytes], bool]:
    """The complete frames buffered, and whether the peer closed."""
    frames = []
    while True:
        frame = decoder.next_frame()
        if isinstance(frame, bytes):
            frames.append(frame)
        else:
            return frames, frame is Want.EOF


# --------------------------------------------------------------------------- trio


async def _trio_connection(stream: trio.SocketStream, table: Table) -> None:
    io = SocketIO(stream)  # kafkad's plaintext path
    decoder = FrameDecoder()
    try:
        while True:
            await io.receive(decoder)
            frames, eof = _frames(decoder)
            if frames:
                await io.send(answers(table, frames), 30.0)
            if eof:
                return
    except (Unanswered, FramingError, trio.BrokenResourceError) as exc:
        print(f"null broker: closing a connection: {exc!r}", file=sys.stderr, flush=True)
    finally:
        await trio.aclose_forcefully(stream)


async def _serve_trio(sock: socket.socket, build: Callable[[], Table]) -> None:
    table = build()
    listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
    _ready(sock, "trio")

    async def handler(stream: trio.abc.Stream) -> None:
        assert isinstance(stream, trio.SocketStream)
        await _trio_connection(stream, table)

    await trio.serve_listeners(handler, [listener])


# --------------------------------------------------------------------------- asyncio


class _NullProtocol(asyncio.Protocol):
    def __init__(self, table: Table) -> None:
        self.table = table
        self.decoder = FrameDecoder()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        try:
            self.decoder.feed(data)
            frames, _ = _frames(self.decoder)
            if frames:
                self.transport.write(answers(self.table, frames))
        except (Unanswered, FramingError) as exc:
            print(f"null broker: closing a connection: {exc!r}", file=sys.stderr, flush=True)
            self.transport.close()


async def _serve_asyncio(sock: socket.socket, build: Callable[[], Table]) -> None:
    table = build()
    server = await asyncio.get_running_loop().create_server(lambda: _NullProtocol(table), sock=sock)
    _ready(sock, "asyncio")
    async with server:
        await server.serve_forever()


# --------------------------------------------------------------------------- selectors


def _serve_selectors(sock: socket.socket, build: Callable[[], Table]) -> None:
    table = build()
    sel = selectors.DefaultSelector()
    sock.setblocking(False)
    sel.register(sock, selectors.EVENT_READ, None)
    view = memoryview(bytearray(256 * 1024))
    _ready(sock, "selectors")
    while True:
        for key, _ in sel.select():
            if key.data is None:  # the listener
                conn, _ = sock.accept()
                conn.setblocking(False)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sel.register(conn, selectors.EVENT_READ, (conn, FrameDecoder()))
                continue
            conn, decoder = key.data
            fd = conn.fileno()
            try:
                n = os.readv(fd, (view,))
            except BlockingIOError:
                continue
            except OSError:
                n = 0
            try:
                decoder.feed(view[:n])
                frames, eof = _frames(decoder)
                if frames:
                    data = answers(table, frames)
                    while data:  # blocking at worst: this is a bench, not a server
                        try:
                            data = data[os.write(fd, data) :]
                        except BlockingIOError:
                            select.select([], [fd], [])
            except (Unanswered, FramingError, OSError) as exc:
                print(f"null broker: closing a connection: {exc!r}", file=sys.stderr, flush=True)
                eof = True
            if eof:
                sel.unregister(conn)
                conn.close()


# --------------------------------------------------------------------------- main


def _ready(sock: socket.socket, loop: str) -> None:
    host, port = sock.getsockname()[:2]
    print(f"null ready advertise={host}:{port} loop={loop}", flush=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (port 0: any free one)")
    p.add_argument("--topic", default="null", help="the one topic Metadata lists")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--loop", choices=LOOPS, default="trio")
    args = p.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port)))
    sock.listen(128)
    bound_host, bound_port = sock.getsockname()[:2]

    def build() -> Table:
        return build_table(bound_host, bound_port, args.topic, args.partitions)

    try:
        if args.loop == "trio":
            trio.run(_serve_trio, sock, build)
        elif args.loop == "asyncio":
            asyncio.run(_serve_asyncio(sock, build))
        else:
            _serve_selectors(sock, build)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
