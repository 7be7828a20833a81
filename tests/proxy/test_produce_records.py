"""Produce validates every record (Kafka's LogValidator), over raw protocol against an in-process
broker: each broken batch is refused and nothing is stored, valid batches are stored as sent."""

from __future__ import annotations

import datetime
import logging
import struct
from typing import Any

import crc32c
import pytest
import trio
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9 import request as pr

from tests.proxy.harness import RawClient, connect, encode_request, running_broker
from tests.proxy.test_broker_requests import create, fetch_request, produce
from tests.proxy.test_transactions import list_offset
from tests.wire.test_record_check import one_value_zstd
from wire.records import (
    Record,
    build_batch,
    decode_batch_records,
    encode_record,
    iter_batches,
    read_batch_header,
)

MS = datetime.timedelta(milliseconds=1)
NOW = 1_700_000_000_000  # a timestamp well inside the default range (before.max.ms: Long.MAX)


def records(n: int, ts_step: int = 1) -> list[Record]:
    return [Record(i, i * ts_step, b"k%d" % i, b"v%d" % i) for i in range(n)]


def resign(buf: bytearray) -> bytes:
    """Recompute the CRC after editing the batch (a valid CRC over broken contents)."""
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


def with_count(batch: bytes, count: int) -> bytes:
    buf = bytearray(batch)
    struct.pack_into(">i", buf, 23, count - 1)  # last_offset_delta
    struct.pack_into(">i", buf, 57, count)
    return resign(buf)


def ff_records() -> bytes:
    buf = bytearray(build_batch(records(2), base_timestamp=NOW))
    buf[61:] = b"\xff" * (len(buf) - 61)
    return resign(buf)


def zeros_payload(codec: int) -> bytes:
    buf = bytearray(build_batch(records(2), base_timestamp=NOW, compression=codec))
    buf[61:] = bytes(len(buf) - 61)
    return resign(buf)


def record_bytes_batch(raw: bytes, count: int, codec: int = 0) -> bytes:
    """A batch around hand-made record bytes."""
    from wire.compression import compress

    template = bytearray(build_batch(records(1), base_timestamp=NOW, compression=codec))
    body = compress(codec, raw)
    buf = template[:61] + body
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">i", buf, 23, count - 1)
    struct.pack_into(">i", buf, 57, count)
    return resign(buf)


GOOD = encode_record(Record(0, 0, b"k", b"v"))
BROKEN = {
    "records replaced by 0xFF": ff_records(),
    "count 2 over one record": with_count(build_batch(records(1), base_timestamp=NOW), 2),
    "count 1 over three records": with_count(build_batch(records(3), base_timestamp=NOW), 1),
    "gzip payload of zeros": zeros_payload(1),
    "snappy payload of zeros": zeros_payload(2),
    "lz4 payload of zeros": zeros_payload(3),
    "zstd payload of zeros": zeros_payload(4),
    "zstd count 2 over three records": with_count(
        build_batch(records(3), base_timestamp=NOW, compression=4), 2
    ),
    "negative header count": record_bytes_batch(GOOD[:-1] + b"\x01", 1),
    "record longer than its fields": record_bytes_batch(b"\x10" + GOOD[1:] + b"\x00", 1),
    "bytes after the last record": record_bytes_batch(GOOD + b"\x00", 1),
    "gzip record cut short": record_bytes_batch(GOOD[:-2], 1, codec=1),
}


async def stored(c: RawClient, topic: str) -> list[tuple[int, bytes]]:
    """(base offset, batch bytes) of every batch in partition 0."""
    resp = await c.request(fetch_request(topic, 0))
    data = resp.responses[0].partitions[0].records or b""
    return [(h.base_offset, bytes(data[p : p + h.total_size])) for p, h in iter_batches(data)]


def same_but_offsets(sent: bytes, got: bytes) -> bool:
    """The stored batch is the sent one, but for base offset and partition leader epoch."""
    return sent[8:12] == got[8:12] and sent[16:] == got[16:]


@pytest.mark.parametrize("kind", list(BROKEN))
async def test_a_broken_batch_is_refused_and_nothing_is_stored(kind: str) -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t") == ErrorCode.none
        got = await produce(c, "t", BROKEN[kind])
        assert got.error_code == ErrorCode.invalid_record, kind
        assert got.base_offset == -1
        assert await stored(c, "t") == []
        for codec in range(5):  # valid batches are still taken, and stored as sent
            good = build_batch(records(3), base_timestamp=NOW, compression=codec)
            assert (await produce(c, "t", good)).error_code == ErrorCode.none
        batches = await stored(c, "t")
        assert [o for o, _ in batches] == [0, 3, 6, 9, 12]
        for codec, (_, got_batch) in enumerate(batches):
            sent = build_batch(records(3), base_timestamp=NOW, compression=codec)
            assert same_but_offsets(sent, got_batch)


async def test_a_compressed_batch_with_repeated_offset_deltas_is_rebuilt() -> None:
    """Kafka rebuilds a compressed batch whose inner offsets are not 0..n-1; an uncompressed one
    is stored as sent (Kafka checks inner offsets only on the compressed path)."""
    same = [Record(0, i, b"k%d" % i, b"v%d" % i, [("h", b"x")]) for i in range(3)]
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t") == ErrorCode.none
        for codec in (1, 2, 3, 4):
            sent = with_count(build_batch(same, base_timestamp=NOW, compression=codec), 3)
            assert (await produce(c, "t", sent)).error_code == ErrorCode.none
        plain = with_count(build_batch(same, base_timestamp=NOW), 3)
        assert (await produce(c, "t", plain)).error_code == ErrorCode.none
        batches = await stored(c, "t")
        for _, got in batches[:4]:
            decoded = decode_batch_records(got)
            assert [r.offset_delta for r in decoded] == [0, 1, 2]
            assert [(r.key, r.value, r.headers) for r in decoded] == [
                (r.key, r.value, [("h", b"x")]) for r in same
            ]
            h = read_batch_header(got)
            assert [h.base_timestamp + r.timestamp_delta for r in decoded] == [
                NOW,
                NOW + 1,
                NOW + 2,
            ]
            assert h.max_timestamp == NOW + 2 and h.last_offset_delta == 2
        assert same_but_offsets(plain, batches[4][1])


async def test_timestamps_are_checked_per_record() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        now = server.broker.now_ms()
        assert await create(c, "old", message_timestamp_before_max_ms="60000") == ErrorCode.none
        stale = build_batch(
            [Record(0, 0, b"a", b"1"), Record(1, -7_200_000, b"b", b"2")], base_timestamp=now
        )
        got = await produce(c, "old", stale)
        assert got.error_code == ErrorCode.invalid_timestamp
        assert [e.batch_index for e in got.record_errors] == [1]
        assert (
            got.error_message == "One or more records have been rejected due to invalid timestamp"
        )
        assert await create(c, "new") == ErrorCode.none  # after.max.ms: 1 hour
        future = build_batch(
            [Record(0, 0, b"a", b"1"), Record(1, 7_200_000, b"b", b"2")],
            base_timestamp=now,
            max_timestamp=now,  # a header that hides the future record
        )
        got = await produce(c, "new", future)
        assert got.error_code == ErrorCode.invalid_timestamp
        assert [e.batch_index for e in got.record_errors] == [1]
        assert await stored(c, "old") == [] and await stored(c, "new") == []


async def test_the_max_timestamp_is_recomputed_from_the_records() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t") == ErrorCode.none
        wrong = build_batch(records(2, ts_step=1000), base_timestamp=1000, max_timestamp=1000)
        assert (await produce(c, "t", wrong)).error_code == ErrorCode.none
        assert await list_offset(c, "t", 1500, committed=False) == (1, 2000)
        [(_, got)] = await stored(c, "t")
        assert read_batch_header(got).max_timestamp == 2000
        assert decode_batch_records(got) == decode_batch_records(wrong)


def client_log_append_time(max_ts: int) -> bytes:
    return build_batch(records(2), base_timestamp=NOW, max_timestamp=max_ts, log_append_time=True)


async def test_a_client_set_log_append_time_bit() -> None:
    """Refused on a LogAppendTime topic and without a timestamp; cleared on a CreateTime topic
    (Kafka's validateTimestamp and setMaxTimestamp)."""
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "lat", message_timestamp_type="LogAppendTime") == ErrorCode.none
        got = await produce(c, "lat", client_log_append_time(NOW))
        assert got.error_code == ErrorCode.invalid_timestamp
        assert [e.batch_index for e in got.record_errors] == [0, 1]
        assert await create(c, "ct") == ErrorCode.none
        got = await produce(c, "ct", client_log_append_time(-1))
        assert got.error_code == ErrorCode.invalid_timestamp
        got = await produce(c, "ct", client_log_append_time(NOW + 5))
        assert (got.error_code, got.base_offset) == (ErrorCode.none, 0)
        [(_, kept)] = await stored(c, "ct")
        h = read_batch_header(kept)
        assert not h.log_append_time and h.max_timestamp == NOW + 5
        assert await stored(c, "lat") == []


async def test_a_duplicate_answers_the_retained_batch_timestamp() -> None:
    """Kafka answers a duplicate with the retained batch's timestamp (its max timestamp on
    CreateTime topics, its append time on LogAppendTime ones)."""
    idem = build_batch(
        records(2, ts_step=10), base_timestamp=NOW, producer_id=7, producer_epoch=0, base_sequence=0
    )
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "ct") == ErrorCode.none
        first = await produce(c, "ct", idem)
        again = await produce(c, "ct", idem)
        assert (first.error_code, first.log_append_time) == (ErrorCode.none, None)
        assert (again.error_code, again.base_offset) == (ErrorCode.none, 0)
        assert again.log_append_time == datetime.datetime.fromtimestamp(
            (NOW + 10) / 1000, datetime.UTC
        )
        assert await create(c, "lat", message_timestamp_type="LogAppendTime") == ErrorCode.none
        first = await produce(c, "lat", idem)
        again = await produce(c, "lat", idem)
        assert first.log_append_time is not None and again.log_append_time == first.log_append_time


async def test_a_decompression_bomb_is_refused() -> None:
    """A 13 KB zstd batch holding a 100 MiB value expands past 64 x max.message.bytes (and the
    64 MiB floor): MESSAGE_TOO_LARGE, nothing stored; one of 40 MiB is read as a stream on a
    compacted topic and refused for its missing key."""
    bomb = one_value_zstd(100 << 20, None)
    assert len(bomb) < 20_000
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t", cleanup_policy="compact") == ErrorCode.none
        got = await produce(c, "t", bomb)
        assert got.error_code == ErrorCode.message_too_large
        got = await produce(c, "t", one_value_zstd(40 << 20, None))
        assert got.error_code == ErrorCode.invalid_record
        assert [e.batch_index for e in got.record_errors] == [0]
        assert await stored(c, "t") == []


def malformed(kind: str) -> bytes:
    good = bytearray(build_batch(records(1), base_timestamp=NOW))
    if kind == "magic 1":
        good[16] = 1
    elif kind == "magic 0":
        good[16] = 0
    elif kind == "magic 3":
        good[16] = 3
    elif kind == "size field under 14":
        struct.pack_into(">i", good, 8, 10)
    elif kind == "length shorter than a header":
        struct.pack_into(">i", good, 8, 30)
        good = good[:42]
    elif kind == "length shorter than a header, bytes kept":
        struct.pack_into(">i", good, 8, 30)  # what follows reads as a batch of size -1
    return bytes(good)


# (code for the malformed partition, code for a valid partition in the same request)
MALFORMED = {
    "magic 0": (ErrorCode.invalid_record, ErrorCode.none),
    "magic 1": (ErrorCode.invalid_record, ErrorCode.none),
    "magic 3": (ErrorCode.corrupt_message, ErrorCode.corrupt_message),  # the whole request
    "size field under 14": (ErrorCode.corrupt_message, ErrorCode.corrupt_message),
    "length shorter than a header": (ErrorCode.corrupt_message, ErrorCode.none),
    "length shorter than a header, bytes kept": (ErrorCode.corrupt_message, ErrorCode.none),
}


def two_partitions(bad: bytes, good: bytes, acks: int = -1, txn_id: str | None = None) -> Any:
    return pr.ProduceRequest(
        transactional_id=txn_id,
        acks=acks,
        timeout=1000 * MS,
        topic_data=(
            pr.TopicProduceData(
                name="t",
                partition_data=(
                    pr.PartitionProduceData(index=0, records=bad),
                    pr.PartitionProduceData(index=1, records=good),
                ),
            ),
        ),
    )


@pytest.mark.parametrize("kind", list(MALFORMED))
async def test_malformed_batches_get_kafkas_codes(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 21.4: a null transactional id and a malformed batch: Kafka's codes, never
    UNKNOWN_SERVER_ERROR; at most one WARNING line and no traceback."""
    good = build_batch(records(1), base_timestamp=NOW)
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t", 2) == ErrorCode.none
        caplog.clear()
        with caplog.at_level(logging.DEBUG):
            resp = await c.request(two_partitions(malformed(kind), good))
        codes = tuple(p.error_code for p in resp.responses[0].partition_responses)
        assert codes == MALFORMED[kind]
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
        assert len([r for r in caplog.records if r.levelno == logging.WARNING]) <= 1
        assert await stored(c, "t") == []


@pytest.mark.parametrize("kind", ["magic 0", "magic 3", "records replaced by 0xFF"])
async def test_acks0_produce_never_gets_a_response(kind: str) -> None:
    """Issue 26.3: a bad batch at acks=0 closes the connection, as Kafka does."""
    bad = BROKEN.get(kind) or malformed(kind)
    good = build_batch(records(1), base_timestamp=NOW)
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t", 2) == ErrorCode.none
        await c.send_raw(encode_request(two_partitions(bad, good, acks=0), 99))
        with trio.fail_after(10):
            assert await c.read_frame() is None


async def test_acks0_handler_failure_closes_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any failure of the handler at acks=0 closes the connection (no UNKNOWN_SERVER_ERROR
    frame the client does not expect); at acks=1 it is answered."""
    import storage.log_validator as validator

    def boom(*_args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(validator, "_rules", boom)  # the first step of every validation
    good = build_batch(records(1), base_timestamp=NOW)
    async with running_broker() as (_, port):
        async with connect(port) as c:
            assert await create(c, "t", 2) == ErrorCode.none
            resp = await c.request(two_partitions(good, good, acks=1))
            assert resp.responses[0].partition_responses[0].error_code == (
                ErrorCode.unknown_server_error
            )
        async with connect(port) as c:
            await c.send_raw(encode_request(two_partitions(good, good, acks=0), 7))
            with trio.fail_after(10):
                assert await c.read_frame() is None
