"""wire.record_check: the same answers whatever the codec and however the decompressed bytes
are cut, and memory bounded independently of the decompressed size."""

from __future__ import annotations

import struct
import tracemalloc

import crc32c
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from wire import record_check
from wire.compression import compress
from wire.record_check import RecordPolicy, RecordsAccepted, RecordsRefused, check_records
from wire.records import (
    Record,
    build_batch,
    decode_batch_records,
    encode_record,
    read_batch_header,
    write_varint,
)

NOW = 1_700_000_000_000


def policy(**kw: object) -> RecordPolicy:
    base: dict[str, object] = {
        "now_ms": NOW,
        "log_append_time": False,
        "before_max_ms": 60_000,
        "after_max_ms": 60_000,
        "compacted": True,
        "max_decompressed_bytes": 64 << 20,
        "partition": "t-0",
    }
    base.update(kw)
    return RecordPolicy(**base)  # type: ignore[arg-type]


def around(raw: bytes, count: int, codec: int) -> bytes:
    """A batch of ``count`` records made of ``raw`` (compressed with ``codec``), CRC valid."""
    after = struct.pack(">hiqqqhii", codec, count - 1, NOW, NOW, -1, -1, -1, count)
    after += compress(codec, raw)
    return struct.pack(">qiibI", 0, len(after) + 9, -1, 2, crc32c.crc32c(after)) + after


def answer(result: RecordsAccepted | RecordsRefused) -> tuple[object, ...]:
    if isinstance(result, RecordsRefused):
        return ("refused", result.code, result.record_errors)
    h = result.header
    return ("accepted", h.max_timestamp, h.records_count)


records = st.lists(
    st.builds(
        Record,
        offset_delta=st.integers(0, 3),
        timestamp_delta=st.sampled_from([0, 1, -120_000, 120_000]),
        key=st.none() | st.binary(max_size=30),
        value=st.none() | st.binary(max_size=60),
        headers=st.lists(st.tuples(st.just("h"), st.none() | st.binary(max_size=9)), max_size=2),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    records,
    st.integers(-1, 1),
    st.sampled_from([1, 2, 3, 4]),
    st.integers(1, 40),
    st.binary(max_size=3),
)
def test_compressed_answers_equal_uncompressed_at_any_chunking(
    recs: list[Record], count_change: int, codec: int, chunk: int, junk: bytes
) -> None:
    """Tiny decompressed chunks and a tiny carry limit (so records are joined across chunks
    and walked field by field) give the answers of the same records uncompressed."""
    raw = b"".join(encode_record(r) for r in recs) + junk
    count = max(1, len(recs) + count_change)
    plain = answer(
        check_records(around(raw, count, 0), read_batch_header(around(raw, count, 0)), policy())
    )
    batch = around(raw, count, codec)
    saved = record_check.CHUNK_BYTES, record_check.CARRY_MAX
    record_check.CHUNK_BYTES, record_check.CARRY_MAX = chunk, 16
    try:
        got = check_records(batch, read_batch_header(batch), policy())
    finally:
        record_check.CHUNK_BYTES, record_check.CARRY_MAX = saved
    if plain[0] == "accepted" and any(r.offset_delta != i for i, r in enumerate(recs)):
        assert isinstance(got, RecordsAccepted)  # rebuilt: consecutive offsets
        assert read_batch_header(got.batch).records_count == count
    else:
        assert answer(got) == plain


def one_value_zstd(size: int, key: bytes | None) -> bytes:
    """A zstd batch of one record with a ``size``-byte value, compressed as a stream."""
    head = bytearray(b"\x00\x00\x00")
    if key is None:
        head += b"\x01"
    else:
        write_varint(head, len(key))
        head += key
    write_varint(head, size)
    prefix = bytearray()
    write_varint(prefix, len(head) + size + 1)
    z = zstandard.ZstdCompressor().compressobj()
    parts = [z.compress(bytes(prefix + head))]
    zeros = bytes(1 << 20)
    for done in range(0, size, len(zeros)):
        parts.append(z.compress(zeros[: min(len(zeros), size - done)]))
    parts += [z.compress(b"\x00"), z.flush()]
    body = b"".join(parts)
    after = struct.pack(">hiqqqhii", 4, 0, NOW, NOW, -1, -1, -1, 1) + body
    return struct.pack(">qiibI", 0, len(after) + 9, -1, 2, crc32c.crc32c(after)) + after


@pytest.mark.parametrize(
    ("size", "key", "code"),
    [
        (48 << 20, None, ErrorCode.invalid_record),  # read to the end: keyless, compacted
        (48 << 20, b"k", None),  # accepted
        (400 << 20, None, ErrorCode.message_too_large),  # the bomb: stopped at 64 MiB
    ],
)
def test_memory_does_not_follow_the_decompressed_size(
    size: int, key: bytes | None, code: ErrorCode | None
) -> None:
    batch = one_value_zstd(size, key)
    header = read_batch_header(batch)
    tracemalloc.start()
    try:
        result = check_records(batch, header, policy())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"peak {peak} bytes for a {size}-byte value"
    if code is None:
        assert isinstance(result, RecordsAccepted) and result.batch == batch
    else:
        assert isinstance(result, RecordsRefused) and result.code == code


def test_timestamp_errors_win_over_key_errors_and_list_every_record() -> None:
    """Kafka's processRecordErrors: any timestamp error makes it INVALID_TIMESTAMP; a keyless
    record is listed for its key and its timestamp is not checked."""
    recs = [
        Record(0, 0, None, b"a"),  # keyless
        Record(1, -600_000, b"k", b"b"),  # too old
        Record(2, -600_000, None, b"c"),  # keyless and too old: listed for its key
    ]
    batch = build_batch(recs, base_timestamp=NOW)
    got = check_records(batch, read_batch_header(batch), policy())
    assert isinstance(got, RecordsRefused) and got.code == ErrorCode.invalid_timestamp
    assert [i for i, _ in got.record_errors] == [0, 1, 2]
    assert "without key" in got.record_errors[2][1] and "out of range" in got.record_errors[1][1]
    keys_only = build_batch(recs[:1], base_timestamp=NOW)
    got = check_records(keys_only, read_batch_header(keys_only), policy())
    assert isinstance(got, RecordsRefused) and got.code == ErrorCode.invalid_record
    assert got.message is not None and got.message.startswith(
        "One or more records have been rejected due to 1 record errors in total"
    )


def test_what_kafka_accepts_is_decoded_and_reencoded() -> None:
    """A key length of -5 is null and a header key need not be UTF-8 (Kafka reads both): the
    batch is accepted, and the decoder (log cleaner, ListOffsets) reads it and writes the
    header key back byte for byte."""
    from wire.records import decode_records

    body = b"\x00\x00\x00" + b"\x09" + b"\x02v" + b"\x02" + b"\x02\xff" + b"\x02x"
    raw = bytes([len(body) * 2]) + body
    batch = around(raw, 1, 0)
    got = check_records(batch, read_batch_header(batch), policy(compacted=False))
    assert isinstance(got, RecordsAccepted)
    [record] = decode_records(raw, 1)
    assert (record.key, record.value) == (None, b"v")
    assert encode_record(record)[-4:] == b"\x02\xff\x02x"


CODECS = (0, 1, 2, 3, 4)


@settings(max_examples=60, deadline=None)
@given(
    source=st.sampled_from(CODECS),
    target=st.sampled_from(CODECS),
    values=st.lists(st.binary(max_size=40), min_size=1, max_size=6),
    transactional=st.booleans(),
)
def test_a_batch_of_another_codec_is_recompressed_with_the_topic_s(
    source: int, target: int, values: list[bytes], transactional: bool
) -> None:
    """compression.type other than producer: Kafka's buildRecordsAndAssignOffsets — the same
    records (keys, values, headers, timestamps), the producer's id, epoch, sequence and
    transactional flag, in the topic's codec."""
    records = [Record(i, 3 * i, b"k%d" % i, v, [("h", b"%d" % i)]) for i, v in enumerate(values)]
    data = build_batch(
        records,
        base_timestamp=NOW - 10,
        compression=source,
        producer_id=7,
        producer_epoch=2,
        base_sequence=40,
        transactional=transactional,
    )
    result = check_records(data, read_batch_header(data), policy(target_compression=target))
    assert isinstance(result, RecordsAccepted)
    h = result.header
    assert h.compression == target
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional) == (
        7,
        2,
        40,
        transactional,
    )
    assert (h.records_count, h.max_timestamp) == (len(values), NOW - 10 + 3 * (len(values) - 1))
    got = [
        (h.base_timestamp + r.timestamp_delta, r.key, r.value, r.headers)
        for r in decode_batch_records(result.batch)
    ]
    assert got == [(NOW - 10 + r.timestamp_delta, r.key, r.value, r.headers) for r in records]
    if target == source:
        assert result.batch == data  # the producer's codec already: stored as sent


def test_producer_keeps_every_codec() -> None:
    data = build_batch([Record(0, 0, b"k", b"v")], base_timestamp=NOW, compression=2)
    result = check_records(data, read_batch_header(data), policy(target_compression=None))
    assert isinstance(result, RecordsAccepted) and result.batch == data
