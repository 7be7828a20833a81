from __future__ import annotations

import struct
import warnings

import cramjam
import crc32c
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from wire.errors import ErrorCode
from wire.records import (
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BATCH_HEADER_SIZE,
    CRC_START,
    ControlRecordType,
    EndTxnMarker,
    Record,
    RecordBatchError,
    ValidatedBatch,
    build_batch,
    build_control_batch,
    build_one_record_batch,
    crc_ok,
    decode_batch_records,
    decompress,
    iter_batches,
    parse_control_record_type,
    read_batch_header,
    read_end_txn_marker,
    read_varint,
    set_base_offset,
    set_partition_leader_epoch,
    validate_produce_batch,
    write_varint,
)

with warnings.catch_warnings():  # kafka-python 3.0 uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.codec import snappy_encode
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

MAX = 1024 * 1024
TS = 1_700_000_000_000
CODECS = [0, 1, 2, 3, 4]

records_st = st.lists(
    st.builds(
        Record,
        offset_delta=st.just(0),
        timestamp_delta=st.integers(-(2**40), 2**40),
        key=st.none() | st.binary(max_size=40),
        value=st.none() | st.binary(max_size=200),
        headers=st.lists(
            st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=10)), max_size=3
        ),
    ),
    min_size=1,
    max_size=8,
).map(
    lambda rs: [Record(i, r.timestamp_delta, r.key, r.value, r.headers) for i, r in enumerate(rs)]
)


def sample(n: int = 5) -> list[Record]:
    return [
        Record(i, i * 7, None if i % 2 else b"key%d" % i, b"value" * i, [("h", b"x"), ("n", None)])
        for i in range(n)
    ]


def validate(data: bytes, version: int = 9, max_bytes: int = MAX) -> ValidatedBatch | ErrorCode:
    return validate_produce_batch(data, produce_version=version, max_message_bytes=max_bytes)


def patched(batch: bytes, offset: int, fmt: str, value: int, *, resign: bool = True) -> bytes:
    out = bytearray(batch)
    struct.pack_into(fmt, out, offset, value)
    if resign:
        struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[CRC_START:])))
    return bytes(out)


# -- round trips ------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=15, deadline=None)
@given(records=records_st)
def test_build_validate_decode_round_trip(codec: int, records: list[Record]) -> None:
    batch = build_batch(
        records,
        base_timestamp=TS,
        compression=codec,
        producer_id=42,
        producer_epoch=3,
        base_sequence=10,
        transactional=True,
    )
    checked = validate(batch)
    assert isinstance(checked, ValidatedBatch)
    h = checked.header
    assert (h.records_count, h.last_offset_delta, h.compression) == (
        len(records),
        len(records) - 1,
        codec,
    )
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional) == (
        42,
        3,
        10,
        True,
    )
    assert h.max_timestamp == TS + max(r.timestamp_delta for r in records)
    assert h.total_size == len(batch)
    assert decode_batch_records(batch) == records


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_our_batches_and_we_read_its(codec: int) -> None:
    records = sample()
    ours = DefaultRecordBatch(bytearray(build_batch(records, base_timestamp=TS, compression=codec)))
    assert ours.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in ours] == [
        (r.offset_delta, TS + r.timestamp_delta, r.key, r.value, r.headers) for r in records
    ]
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=MAX,
    )
    for r in records:
        builder.append(r.offset_delta, TS + r.timestamp_delta, r.key, r.value, r.headers)
    theirs = bytes(builder.build())
    assert isinstance(validate(theirs), ValidatedBatch)
    assert decode_batch_records(theirs) == records


def test_snappy_raw_and_xerial_framing_both_decode() -> None:
    payload = b"kafka " * 20_000  # > 32 KiB: several xerial blocks
    xerial = snappy_encode(payload, xerial_compatible=True, xerial_blocksize=32 * 1024)
    assert xerial.startswith(b"\x82SNAPPY\x00")
    assert decompress(2, xerial) == payload
    assert decompress(2, bytes(cramjam.snappy.compress_raw(payload))) == payload
    ours = build_batch(sample(), base_timestamp=TS, compression=2)
    assert ours[BATCH_HEADER_SIZE:].startswith(b"\x82SNAPPY\x00")


def test_lz4_is_the_frame_format() -> None:
    batch = build_batch(sample(), base_timestamp=TS, compression=3)
    assert batch[BATCH_HEADER_SIZE : BATCH_HEADER_SIZE + 4] == b"\x04\x22\x4d\x18"


def test_zstd_stream_without_content_size() -> None:
    payload = b"abc" * 1000
    stream = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    framed = stream.compress(payload) + stream.flush()
    assert decompress(4, framed) == payload


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_compressed_payload(codec: int) -> None:
    batch = build_batch(sample(), base_timestamp=TS, compression=codec)
    broken = batch[:BATCH_HEADER_SIZE] + b"\x00garbage" * 4
    broken = patched(broken, 8, ">i", len(broken) - 12)
    with pytest.raises(RecordBatchError):
        decode_batch_records(broken)


def test_record_count_disagreeing_with_the_records() -> None:
    batch = build_batch(sample(3), base_timestamp=TS)
    with pytest.raises(RecordBatchError):
        decode_batch_records(patched(batch, 57, ">i", 4))
    with pytest.raises(RecordBatchError):
        decode_batch_records(patched(batch, 57, ">i", 2))


def test_truncated_batch_does_not_decode() -> None:
    batch = build_batch(sample(), base_timestamp=TS)
    with pytest.raises(RecordBatchError):
        decode_batch_records(batch[:-1])


@given(st.integers(-(2**63), 2**63 - 1))
def test_zigzag_varlong_round_trip(value: int) -> None:
    out = bytearray()
    write_varint(out, value)
    assert read_varint(bytes(out), 0) == (value, len(out))


def test_zigzag_known_encodings() -> None:
    for value, encoded in [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
    ]:
        out = bytearray()
        write_varint(out, value)
        assert bytes(out) == encoded
    with pytest.raises(RecordBatchError):
        read_varint(b"\xff\xff\xff\xff\xff\x01", 0, 5)


# -- validation -------------------------------------------------------------------------------


def test_crc_flip_is_corrupt_message() -> None:
    batch = bytearray(build_batch(sample(), base_timestamp=TS))
    batch[-1] ^= 0x01
    assert validate(bytes(batch)) is ErrorCode.corrupt_message


def test_count_mismatch_is_invalid_record() -> None:
    batch = build_batch(sample(3), base_timestamp=TS)
    assert validate(patched(batch, 57, ">i", 2)) is ErrorCode.invalid_record  # records_count
    assert validate(patched(batch, 23, ">i", 5)) is ErrorCode.invalid_record  # last_offset_delta
    assert validate(patched(batch, 57, ">i", 0)) is ErrorCode.invalid_record
    empty = build_batch([], base_timestamp=TS)
    assert validate(empty) is ErrorCode.invalid_record


def test_control_batch_from_a_client_is_invalid_record() -> None:
    marker = build_control_batch(
        7, 1, commit=True, coordinator_epoch=0, base_offset=0, timestamp=TS
    )
    assert validate(marker) is ErrorCode.invalid_record


def test_producer_id_without_sequence_is_invalid_record() -> None:
    batch = build_batch(
        sample(), base_timestamp=TS, producer_id=5, producer_epoch=0, base_sequence=-1
    )
    assert validate(batch) is ErrorCode.invalid_record
    idempotent = build_batch(
        sample(), base_timestamp=TS, producer_id=5, producer_epoch=0, base_sequence=0
    )
    assert isinstance(validate(idempotent), ValidatedBatch)


@pytest.mark.parametrize(("version", "accepted"), [(3, False), (6, False), (7, True), (11, True)])
def test_zstd_needs_produce_v7(version: int, accepted: bool) -> None:
    batch = build_batch(sample(), base_timestamp=TS, compression=4)
    result = validate(batch, version=version)
    assert (
        isinstance(result, ValidatedBatch)
        if accepted
        else result is ErrorCode.unsupported_compression_type
    )


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_is_refused(codec: int) -> None:
    batch = patched(build_batch(sample(), base_timestamp=TS), 21, ">h", codec)
    assert validate(batch) is ErrorCode.unsupported_compression_type


def test_too_large_is_message_too_large() -> None:
    batch = build_batch(sample(), base_timestamp=TS)
    assert isinstance(validate(batch, max_bytes=len(batch)), ValidatedBatch)
    assert validate(batch, max_bytes=len(batch) - 1) is ErrorCode.message_too_large


def test_two_batches_are_invalid_record() -> None:
    batch = build_batch(sample(), base_timestamp=TS)
    assert validate(batch + batch) is ErrorCode.invalid_record


@pytest.mark.parametrize("cut", [1, 10, 30, 100])
def test_truncated_batch_is_invalid_record(cut: int) -> None:
    batch = build_batch(sample(), base_timestamp=TS)
    assert validate(batch[:-cut]) is ErrorCode.invalid_record


@pytest.mark.parametrize("data", [b"", b"\x00" * 11])
def test_no_batch_is_invalid_record(data: bytes) -> None:
    assert validate(data) is ErrorCode.invalid_record


def test_trailing_bytes_are_invalid_record() -> None:
    batch = build_batch(sample(), base_timestamp=TS)
    assert validate(batch + b"\x00" * 5) is ErrorCode.invalid_record


def test_size_field_below_kafkas_minimum_is_corrupt_message() -> None:
    batch = build_batch(sample(), base_timestamp=TS)
    assert validate(patched(batch, 8, ">i", 13, resign=False)) is ErrorCode.corrupt_message
    assert validate(patched(batch, 8, ">i", -1, resign=False)) is ErrorCode.corrupt_message
    second = patched(batch, 8, ">i", 13, resign=False)
    assert validate(batch + second) is ErrorCode.corrupt_message


def test_magic() -> None:
    batch = build_batch(sample(), base_timestamp=TS)
    assert validate(patched(batch, 16, ">b", 1, resign=False)) is ErrorCode.invalid_record
    assert validate(patched(batch, 16, ">b", 3, resign=False)) is ErrorCode.corrupt_message
    assert validate(patched(batch, 16, ">b", -1, resign=False)) is ErrorCode.corrupt_message


def test_batch_shorter_than_a_header_is_corrupt_message() -> None:
    short = patched(bytes(40), 8, ">i", 28, resign=False)
    short = patched(short, 16, ">b", 2, resign=False)
    assert validate(short) is ErrorCode.corrupt_message


def test_nonzero_base_offset_from_a_client_is_invalid_record() -> None:
    batch = build_batch(sample(), base_timestamp=TS, base_offset=5)
    assert validate(batch) is ErrorCode.invalid_record


def test_validation_accepts_memoryview_and_bytearray() -> None:
    batch = build_batch(sample(), base_timestamp=TS)
    assert isinstance(
        validate_produce_batch(memoryview(batch), produce_version=9, max_message_bytes=MAX),
        ValidatedBatch,
    )
    assert isinstance(
        validate_produce_batch(bytearray(batch), produce_version=3, max_message_bytes=MAX),
        ValidatedBatch,
    )


# -- offsets, CRC and markers -----------------------------------------------------------------


def test_set_base_offset_and_epoch_keep_the_crc_valid() -> None:
    batch = bytearray(build_batch(sample(), base_timestamp=TS, compression=1))
    set_base_offset(batch, 0, 123_456)
    set_partition_leader_epoch(batch, 0, 9)
    h = read_batch_header(batch)
    assert (h.base_offset, h.partition_leader_epoch, h.last_offset) == (123_456, 9, 123_460)
    assert crc_ok(batch, 0, h)
    assert decode_batch_records(batch) == sample()
    batch[40] ^= 0xFF
    assert not crc_ok(batch, 0, read_batch_header(batch))


def test_iter_batches_over_a_log() -> None:
    first = build_batch(sample(2), base_timestamp=TS)
    second = build_control_batch(
        1, 0, commit=False, coordinator_epoch=4, base_offset=2, timestamp=TS
    )
    log = first + second + first[:30]
    found = [(pos, h.base_offset) for pos, h in iter_batches(log)]
    assert found == [(0, 0), (len(first), 2)]


@pytest.mark.parametrize("commit", [True, False])
def test_control_batch_layout_and_parsing(commit: bool) -> None:
    marker = build_control_batch(
        77, 5, commit=commit, coordinator_epoch=3, base_offset=10, timestamp=TS
    )
    assert len(marker) == 78
    h = read_batch_header(marker)
    assert (h.batch_length, h.records_count, h.last_offset_delta) == (66, 1, 0)
    assert (h.is_control, h.is_transactional, h.base_sequence, h.compression) == (True, True, -1, 0)
    assert (h.producer_id, h.producer_epoch, h.base_offset) == (77, 5, 10)
    assert crc_ok(marker, 0, h)
    (record,) = decode_batch_records(marker)
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    assert parse_control_record_type(record.key) == kind
    assert record.value == b"\x00\x00\x00\x00\x00\x03"
    assert read_end_txn_marker(marker) == EndTxnMarker(commit=commit, coordinator_epoch=3)


def test_control_record_key_parsing() -> None:
    assert parse_control_record_type(b"\x00\x00\x00\x01") == 1
    assert parse_control_record_type(b"\x00\x00\x00\x05extra") == 5  # unknown: caller ignores
    for bad in (None, b"\x00\x00\x01", b"\xff\xff\x00\x00"):
        with pytest.raises(RecordBatchError):
            parse_control_record_type(bad)


def test_read_end_txn_marker_refuses_data_batches() -> None:
    with pytest.raises(RecordBatchError):
        read_end_txn_marker(build_batch(sample(1), base_timestamp=TS))


@pytest.mark.parametrize("key", [None, b"", b"k", b"\x00\x00\x00\x09bench-txn", b"x" * 70_000])
@pytest.mark.parametrize("value", [None, b"", b"v" * 63, b"v" * 64, b"v" * 20_000])
def test_one_record_batch_is_build_batch_byte_for_byte(
    key: bytes | None, value: bytes | None
) -> None:
    plain = build_batch([Record(0, 0, key, value)], base_timestamp=1_700_000_000_123)
    fast, header = build_one_record_batch(key, value, 1_700_000_000_123)
    assert fast == plain
    assert header == read_batch_header(plain)
    marker = build_batch(
        [Record(0, 0, key, value)],
        base_timestamp=-1,
        base_offset=77,
        producer_id=2**40,
        producer_epoch=7,
        transactional=True,
        control=True,
        partition_leader_epoch=3,
    )
    fast, header = build_one_record_batch(
        key,
        value,
        -1,
        base_offset=77,
        producer_id=2**40,
        producer_epoch=7,
        attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL,
        partition_leader_epoch=3,
    )
    assert fast == marker
    assert header == read_batch_header(marker)


_INT64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=400, deadline=None)
@given(
    key=st.none() | st.binary(max_size=300),
    value=st.none() | st.binary(max_size=300),
    timestamp=st.sampled_from([-1, 0, 1_700_000_000_123]) | _INT64,
    base_offset=st.sampled_from([0, 77]) | _INT64,
    producer_id=st.sampled_from([-1, 0, 2**40]) | _INT64,
    producer_epoch=st.integers(-(2**15), 2**15 - 1),
    partition_leader_epoch=st.integers(-(2**31), 2**31 - 1),
    transactional=st.booleans(),
    control=st.booleans(),
    log_append_time=st.booleans(),
)
def test_one_record_batch_matches_build_batch_for_every_attribute(
    key: bytes | None,
    value: bytes | None,
    timestamp: int,
    base_offset: int,
    producer_id: int,
    producer_epoch: int,
    partition_leader_epoch: int,
    transactional: bool,
    control: bool,
    log_append_time: bool,
) -> None:
    plain = build_batch(
        [Record(0, 0, key, value)],
        base_offset=base_offset,
        base_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=transactional,
        control=control,
        log_append_time=log_append_time,
        partition_leader_epoch=partition_leader_epoch,
    )
    attributes = (
        (ATTR_TRANSACTIONAL if transactional else 0)
        | (ATTR_CONTROL if control else 0)
        | (ATTR_TIMESTAMP_TYPE if log_append_time else 0)
    )
    fast, header = build_one_record_batch(
        key,
        value,
        timestamp,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        attributes=attributes,
        partition_leader_epoch=partition_leader_epoch,
    )
    assert fast == plain
    assert header == read_batch_header(plain)
    assert decode_batch_records(plain) == [Record(0, 0, key, value)]


@pytest.mark.parametrize("commit", [True, False])
@pytest.mark.parametrize("coordinator_epoch", [0, 7, 2**31 - 1])
def test_control_batch_is_build_batch_of_the_marker_record(
    commit: bool, coordinator_epoch: int
) -> None:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, coordinator_epoch)
    plain = build_batch(
        [Record(0, 0, key, value)],
        base_offset=42,
        base_timestamp=TS,
        producer_id=2**40,
        producer_epoch=3,
        transactional=True,
        control=True,
        partition_leader_epoch=0,
    )
    marker = build_control_batch(
        2**40, 3, commit, coordinator_epoch, 42, TS, partition_leader_epoch=0
    )
    assert marker == plain
    assert len(marker) == 78
