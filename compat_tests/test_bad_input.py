"""Bad bytes on one connection cost that connection only: the broker closes it (or answers an
error where Kafka does), other connections keep working, and stored data stays readable."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import crc32c
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from compat_tests._support import topic_name

TIMEOUT_S = 10
API_VERSIONS, METADATA, PRODUCE = 18, 3, 0
UNSUPPORTED_VERSION, CORRUPT_MESSAGE = 35, 2


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def request(api_key: int, version: int, corr: int, body: bytes = b"", flexible=False) -> bytes:
    """Request header v1 (v2 when flexible: an empty tag buffer follows) and a body."""
    header = struct.pack(">hhih", api_key, version, corr, 6) + b"compat"
    return frame(header + (b"\x00" if flexible else b"") + body)


def api_versions_v3(corr: int) -> bytes:
    body = b"\x07compat" + b"\x041.0" + b"\x00"  # compact strings: length + 1, then tags
    return request(API_VERSIONS, 3, corr, body, flexible=True)


def connect(bootstrap: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=TIMEOUT_S)
    sock.settimeout(TIMEOUT_S)
    return sock


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def read_response(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def parse_api_versions(resp: bytes, flexible: bool = False):
    """Header v0, then the v0-2 body (also the answer to an unsupported version, KIP-511) or
    the flexible v3+ one: (correlation id, error code, {api key: (min, max)})."""
    corr, error = struct.unpack_from(">ih", resp)
    if flexible:  # compact array: count + 1 in one varint byte here; a tag byte per entry
        n, pos, step = resp[6] - 1, 7, 7
    else:
        (n,), pos, step = struct.unpack_from(">i", resp, 6), 10, 6
    keys = {}
    for i in range(n):
        key, lo, hi = struct.unpack_from(">hhh", resp, pos + step * i)
        keys[key] = (lo, hi)
    return corr, error, keys


def assert_closed_by_broker(sock: socket.socket) -> None:
    """The broker closes: EOF or reset, well before our timeout, and with no answer."""
    start = time.monotonic()
    try:
        data = sock.recv(65536)
    except ConnectionResetError:
        data = b""
    except TimeoutError:
        pytest.fail(f"broker kept the connection open for {TIMEOUT_S}s")
    assert data == b"", f"expected a close, got {data[:64]!r}"
    assert time.monotonic() - start < TIMEOUT_S


@pytest.fixture(scope="module")
def stored(bootstrap: str) -> tuple[str, list[bytes]]:
    """A topic with records written before any bad input."""
    topic = topic_name("bad-input")
    values = [b"before-%d" % i for i in range(10)]
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False})
    for v in values:
        producer.produce(topic, v, partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    return topic, values


@pytest.fixture
def bystander(bootstrap: str) -> Iterator[socket.socket]:
    """A connection opened before the bad input, which must keep working after it."""
    sock = connect(bootstrap)
    sock.sendall(api_versions_v3(1))
    assert parse_api_versions(read_response(sock), flexible=True)[:2] == (1, 0)
    yield sock
    sock.close()


def assert_broker_still_serves(bootstrap: str, stored, bystander: socket.socket) -> None:
    bystander.sendall(api_versions_v3(2))
    corr, error, keys = parse_api_versions(read_response(bystander), flexible=True)
    assert (corr, error) == (2, 0) and API_VERSIONS in keys

    topic, values = stored
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False})
    producer.produce(topic, b"after", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "compat-unused", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < len(values) and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(100, timeout=0.2) if m.error() is None]
        assert got[: len(values)] == values
    finally:
        consumer.close()


BAD_INPUT = {
    "http-request": b"GET / HTTP/1.1\r\nHost: kafkad\r\n\r\n",  # size 0x47455420: too big
    "negative-size": struct.pack(">i", -2) + b"\x00" * 8,
    "huge-size-alone": struct.pack(">i", 0x7FFFFFFF),  # closed on the size, body never sent
    "short-header": frame(b"\x00\x12\x00"),  # 3 bytes: not even api key + version
    "unknown-api-key": request(12345, 0, 7),
    "negative-api-key": request(-1, 0, 7),
    "unsupported-metadata-version": request(METADATA, 999, 7),
    "metadata-body-cut-short": request(METADATA, 4, 7, struct.pack(">i", 3) + b"\x00\x05ab"),
    "produce-records-garbage": request(
        PRODUCE, 7, 7, struct.pack(">hhi", -1, 1, 5000) + b"\x00\x00\x00\x01" + b"\xde\xad" * 9
    ),
    "garbage-bytes": frame(bytes(range(256)) * 4),
}


@pytest.mark.parametrize("data", BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_frame_closes_only_that_connection(bootstrap, stored, bystander, data) -> None:
    with connect(bootstrap) as sock:
        sock.sendall(data)
        assert_closed_by_broker(sock)
    assert_broker_still_serves(bootstrap, stored, bystander)


def test_stream_ending_inside_a_frame(bootstrap, stored, bystander) -> None:
    with connect(bootstrap) as sock:
        sock.sendall(api_versions_v3(9)[:-3])  # all but the last 3 bytes, then EOF
        sock.shutdown(socket.SHUT_WR)
        assert_closed_by_broker(sock)
    assert_broker_still_serves(bootstrap, stored, bystander)


def test_unsupported_api_versions_version_gets_kip511_answer(bootstrap, stored, bystander):
    with connect(bootstrap) as sock:
        sock.sendall(request(API_VERSIONS, 999, 77, b"\x07compat\x041.0\x00", flexible=True))
        corr, error, keys = parse_api_versions(read_response(sock))
        assert (corr, error) == (77, UNSUPPORTED_VERSION)
        assert keys[API_VERSIONS][0] == 0  # tells the client which versions to retry with
        sock.sendall(api_versions_v3(78))  # the retry on the same connection works
        corr, error, keys = parse_api_versions(read_response(sock), flexible=True)
        assert (corr, error) == (78, 0) and keys[API_VERSIONS][1] >= 3
    assert_broker_still_serves(bootstrap, stored, bystander)


def test_requests_split_and_pipelined(bootstrap: str) -> None:
    """One request dribbled a byte at a time, then three in one write: answers in order."""
    with connect(bootstrap) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for b in api_versions_v3(1):
            sock.sendall(bytes([b]))
        assert parse_api_versions(read_response(sock), flexible=True)[:2] == (1, 0)
        sock.sendall(b"".join(request(API_VERSIONS, v, 10 + v) for v in (0, 1, 2)))
        assert [parse_api_versions(read_response(sock))[:2] for _ in range(3)] == [
            (10, 0),
            (11, 0),
            (12, 0),
        ]


def varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)  # zigzag
    out = b""
    while n >= 0x80:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def record_batch(value: bytes, ts: int) -> bytes:
    """One uncompressed v2 batch holding one record (null key, no headers)."""
    body = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(len(value)) + value + varint(0)
    record = varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0, 0, ts, ts, -1, -1, -1, 1) + record
    crc = crc32c.crc32c(after_crc)
    return struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), 0, 2, crc) + after_crc


def produce_v7(corr: int, topic: str, batch: bytes) -> bytes:
    name = topic.encode()
    body = struct.pack(">hhii", -1, 1, 5000, 1) + struct.pack(">h", len(name)) + name
    body += struct.pack(">iii", 1, 0, len(batch)) + batch
    return request(PRODUCE, 7, corr, body)


def produce_v7_result(resp: bytes) -> tuple[int, int, int]:
    """(correlation id, error code, base offset) of the one partition answered."""
    (corr, _topics, name_len) = struct.unpack_from(">iih", resp)
    _n, partition, error, base = struct.unpack_from(">iihq", resp, 10 + name_len)
    assert partition == 0
    return corr, error, base


def test_corrupt_batch_is_refused_and_connection_kept(bootstrap, stored, bystander) -> None:
    topic, values = stored
    good = record_batch(b"raw-good", int(time.time() * 1000))
    bad = bytearray(good)
    bad[-2] ^= 0xFF  # a value byte: the CRC no longer matches
    with connect(bootstrap) as sock:
        sock.sendall(produce_v7(5, topic, bytes(bad)))
        assert produce_v7_result(read_response(sock))[:2] == (5, CORRUPT_MESSAGE)
        sock.sendall(produce_v7(6, topic, good))  # same connection: still served
        corr, error, base = produce_v7_result(read_response(sock))
        assert (corr, error) == (6, 0) and base >= len(values)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "compat-unused", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, base)])
        deadline = time.monotonic() + TIMEOUT_S
        msgs: list = []
        while not msgs and time.monotonic() < deadline:
            msgs = [m for m in consumer.consume(1, timeout=0.2) if m.error() is None]
        assert [(m.offset(), m.value()) for m in msgs] == [(base, b"raw-good")]
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT_S)[1] == base + 1
    finally:
        consumer.close()
    assert_broker_still_serves(bootstrap, stored, bystander)
