"""Pipelined requests on one connection: reply latency behind a long poll, and throughput.

    .venv/bin/python -m bench.pipelining --start-kafkad          # a fresh memory:// broker
    .venv/bin/python -m bench.pipelining --bootstrap HOST:PORT    # one that runs already

* latency: a Metadata request and a Fetch with ``max_wait`` 3 s (at the log end of an idle
  topic, so it long polls) sent in one write; the time until the Metadata reply arrives.
  Kafka answers each request when it is done, so this is milliseconds; a broker that holds
  ready replies until the whole batch is done answers it after 3 s. Also the same Metadata
  sent alone.
* throughput: ``--window`` requests in flight on one connection (sent in one write, all
  replies read, repeated), for Metadata (one topic) and Produce (acks=1, one 10-record batch
  of 100-byte values), in requests/s: the case the replies are gathered for (perf-notes
  rule 2).

The client is plain blocking sockets with pre-encoded frames, so it costs little per request;
on this 2-core machine it shares the CPU with the broker: compare runs taken minutes apart
only as ratios, alternating (bench/README.md).
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kio.schema.create_topics.v5 import request as ct
from kio.schema.fetch.v12 import request as fr
from kio.schema.metadata.v12 import request as md
from kio.schema.produce.v9 import request as pr
from kio.serial import entity_writer
from kio.serial.writers import write_int16, write_int32

from wire.records import Record, build_batch

MS = datetime.timedelta(milliseconds=1)
TOPIC = "bench-pipelining"


def frame(req: Any, correlation_id: int = 1) -> bytes:
    head = io.BytesIO()
    write_int16(head, int(req.__api_key__))
    write_int16(head, int(req.__version__))
    write_int32(head, correlation_id)
    head.write(struct.pack(">h", 5) + b"bench")
    if req.__flexible__:
        head.write(b"\x00")
    body = io.BytesIO()
    entity_writer(type(req))(body, req)
    payload = head.getvalue() + body.getvalue()
    return struct.pack(">i", len(payload)) + payload


def metadata_frame() -> bytes:
    return frame(
        md.MetadataRequest(
            topics=(md.MetadataRequestTopic(topic_id=None, name=TOPIC),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    )


def long_poll_frame(offset: int, wait_ms: int) -> bytes:
    return frame(
        fr.FetchRequest(
            max_wait=wait_ms * MS,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=(
                fr.FetchTopic(
                    topic=TOPIC,
                    partitions=(
                        fr.FetchPartition(
                            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
    )


def produce_frame() -> bytes:
    records = [Record(i, 0, None, b"v" * 100, []) for i in range(10)]
    data = build_batch(records, base_timestamp=int(time.time() * 1000))
    return frame(
        pr.ProduceRequest(
            transactional_id=None,
            acks=1,
            timeout=5000 * MS,
            topic_data=(
                pr.TopicProduceData(
                    name=TOPIC, partition_data=(pr.PartitionProduceData(index=0, records=data),)
                ),
            ),
        )
    )


class Conn:
    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def read_frames(self, count: int) -> list[bytes]:
        out: list[bytes] = []
        while len(out) < count:
            while len(self.buf) >= 4:
                (size,) = struct.unpack_from(">i", self.buf, 0)
                if len(self.buf) < 4 + size:
                    break
                out.append(bytes(self.buf[4 : 4 + size]))
                del self.buf[: 4 + size]
                if len(out) == count:
                    return out
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("broker closed the connection")
            self.buf += data
        return out

    def close(self) -> None:
        self.sock.close()


def ensure_topic(host: str, port: int) -> None:
    c = Conn(host, port)
    c.sock.sendall(
        frame(
            ct.CreateTopicsRequest(
                topics=(
                    ct.CreatableTopic(
                        name=TOPIC,
                        num_partitions=1,
                        replication_factor=-1,
                        assignments=(),
                        configs=(),
                    ),
                ),
                timeout=5000 * MS,
                validate_only=False,
            )
        )
    )
    c.read_frames(1)
    c.close()


def latency(host: str, port: int, rounds: int, wait_ms: int) -> dict[str, float]:
    """Median ms until the Metadata reply: pipelined just before a Fetch that long polls (at
    the log end, nothing arrives), and sent alone."""
    c = Conn(host, port)
    meta = metadata_frame()
    c.sock.sendall(long_poll_frame(0, 0))  # learn the log end offset from a quick fetch
    (reply,) = c.read_frames(1)
    poll = long_poll_frame(_high_watermark(reply), wait_ms)
    behind, fetch_done, alone = [], [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        c.sock.sendall(meta + poll)
        c.read_frames(1)
        behind.append((time.perf_counter() - t0) * 1000)
        c.read_frames(1)
        fetch_done.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        c.sock.sendall(meta)
        c.read_frames(1)
        alone.append((time.perf_counter() - t0) * 1000)
    c.close()
    return {
        "metadata_behind_long_poll_ms": statistics.median(behind),
        "long_poll_answered_ms": statistics.median(fetch_done),
        "metadata_alone_ms": statistics.median(alone),
    }


def _high_watermark(reply: bytes) -> int:
    from kio.index import load_response_schema
    from kio.serial import entity_reader

    cls = load_response_schema(1, 12)
    value, _ = entity_reader(cls)(reply, 5)
    return int(value.responses[0].partitions[0].high_watermark)


def throughput(host: str, port: int, kind: str, window: int, seconds: float) -> float:
    """Requests/s with ``window`` in flight on one connection, for ``seconds``."""
    one = metadata_frame() if kind == "metadata" else produce_frame()
    burst = one * window
    c = Conn(host, port)
    c.sock.sendall(burst)
    c.read_frames(window)  # warm
    done = 0
    t0 = time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < seconds:
        c.sock.sendall(burst)
        c.read_frames(window)
        done += window
    c.close()
    return done / elapsed


@contextmanager
def started_kafkad() -> Iterator[tuple[str, int]]:
    with tempfile.TemporaryFile() as log:
        serve = ["serve", "--listen", "127.0.0.1:0", "--data-dir", "memory://"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", *serve, "--log-level", "WARNING"],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line.startswith("kafkad ready"):
                raise RuntimeError(f"kafkad did not start: {line!r}")
            host, port = line.split("listen=")[1].split()[0].rsplit(":", 1)
            yield host, int(port)
        finally:
            proc.terminate()
            proc.wait(10)


def run(host: str, port: int, args: argparse.Namespace) -> dict[str, Any]:
    ensure_topic(host, port)
    result: dict[str, Any] = dict(latency(host, port, args.rounds, args.wait_ms))
    for kind in ("metadata", "produce"):
        rates = [
            throughput(host, port, kind, args.window, args.seconds) for _ in range(args.rounds)
        ]
        result[f"{kind}_pipelined_req_per_s"] = statistics.median(rates)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", help="HOST:PORT of a running broker")
    ap.add_argument("--start-kafkad", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--wait-ms", type=int, default=3000)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    if args.start_kafkad:
        with started_kafkad() as (host, port):
            result = run(host, port, args)
    elif args.bootstrap:
        host, port_s = args.bootstrap.rsplit(":", 1)
        result = run(host, int(port_s), args)
    else:
        ap.error("give --bootstrap HOST:PORT or --start-kafkad")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
