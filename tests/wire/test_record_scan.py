"""The record scanners kept twice for speed agree with the general decoder on every batch:
``wire.record_scan.key_values`` (replays of ``__consumer_offsets``) and the log cleaner's
``storage.cleaner.rewrite.scan_records`` each inline their varints' one-byte case, and both
must read what ``decode_batch_records`` reads."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.cleaner.rewrite import parse_batches
from wire.record_scan import key_values
from wire.records import Record, RecordBatchError, build_batch, decode_batch_records

blobs = st.one_of(st.none(), st.binary(max_size=300))
records = st.lists(
    st.tuples(
        blobs,
        blobs,
        st.integers(-(2**40), 2**40),
        st.lists(st.tuples(st.text(max_size=5), blobs), max_size=2),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(recs=records, codec=st.sampled_from([0, 1, 2, 3, 4]), gap=st.integers(1, 300))
def test_key_values_matches_the_decoder(
    recs: list[tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]],
    codec: int,
    gap: int,
) -> None:
    batch = build_batch(
        [Record(i * gap, ts, k, v, h) for i, (k, v, ts, h) in enumerate(recs)],
        base_timestamp=1_700_000_000_000,
        compression=codec,
    )
    decoded = decode_batch_records(batch)
    assert key_values(batch) == [(r.offset_delta, r.key, r.value) for r in decoded]
    (cleaner,) = parse_batches(batch)
    assert [(r.offset_delta, r.timestamp_delta, r.key, r.tombstone) for r in cleaner.records] == [
        (r.offset_delta, r.timestamp_delta, r.key, r.value is None) for r in decoded
    ]


def test_truncated_records_are_refused() -> None:
    batch = bytearray(build_batch([Record(0, 0, b"k", b"v" * 50)], base_timestamp=0))
    batch[61] = 0x7E  # a record length far past the batch
    with pytest.raises(RecordBatchError):
        key_values(bytes(batch))


@settings(max_examples=300, deadline=None)
@given(data=st.binary(min_size=1, max_size=12), wide=st.booleans())
def test_the_varint_readers_agree_with_kafkas(data: bytes, wide: bool) -> None:
    """``read_varint`` (decoder, scanners' slow path) reads what the record kernel reads, which
    is Kafka's ``ByteUtils.readVarint``/``readVarlong``: at most 5 (10) bytes, bits past the
    32nd (64th) dropped."""
    from wire.record_codec import read_varint
    from wire.record_kernel import _Bad, _varint

    try:
        expected: tuple[int, int] | None = _varint(data, 0, len(data), wide)
    except _Bad:
        expected = None
    try:
        got: tuple[int, int] | None = read_varint(data, 0, 10 if wide else 5)
    except RecordBatchError:
        got = None
    assert got == expected


def test_a_five_byte_varint_keeps_its_low_32_bits_as_kafka_does() -> None:
    from wire.record_codec import read_varint

    assert read_varint(b"\xff\xff\xff\xff\x7f", 0, 5) == (-(2**31), 5)
