"""Hypothesis over the fuzz target (``fuzz_target.check``), starting from the golden frames:
byte flips, truncation, length fields set to huge or negative values (``wire.bounds`` must
stop kio's native reader from reserving memory for them: a miss aborts the process), and
splices of two frames. Plus an exhaustive sweep: every length-sized window of every golden
frame overwritten with each tampered length."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from wire.codec import decode_request
from wire.compression import compress, decompress
from wire.errors import DecodeError
from wire.headers import RequestHeader, request_header
from wire.records import Record, build_batch, read_batch_header

from .fuzz_target import SERVED, batch_around, check, check_batch
from .test_golden import FRAMES

NAMES = sorted(FRAMES)
fuzz = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))

# Lengths that make a naive reader allocate: int32/int16 maxima, -2 and below, and unsigned
# varints for 2**32 - 2 elements (compact array), 2**31 and 127 (a multi-byte varint).
TAMPERED = [
    struct.pack(">i", 2**31 - 1),
    struct.pack(">i", -2),
    struct.pack(">i", 1 << 24),
    struct.pack(">h", 2**15 - 1),
    struct.pack(">h", -2),
    b"\xfe\xff\xff\xff\x0f",
    b"\x80\x80\x80\x80\x08",
    b"\xff\x7f",
    b"\xff\xff\xff\xff\xff",
]

ops = st.lists(
    st.tuples(
        st.sampled_from(["flip", "set", "cut", "insert", "delete", "length", "splice"]),
        st.integers(0, 10**6),
        st.integers(0, 255),
        st.sampled_from(NAMES),
    ),
    min_size=1,
    max_size=5,
)


def mutate(frame: bytes, mutations: list[tuple[str, int, int, str]]) -> bytes:
    buf = bytearray(frame)
    for op, where, byte, other in mutations:
        i = where % (len(buf) + 1)
        if op == "cut":
            del buf[i:]
        elif op == "insert":
            buf[i:i] = bytes([byte])
        elif op == "delete":
            del buf[i : i + 1 + byte % 8]
        elif op == "length":
            patch = TAMPERED[byte % len(TAMPERED)]
            buf[i : i + len(patch)] = patch
        elif op == "splice":
            donor = FRAMES[other]
            j = where % (len(donor) + 1)
            buf[i:] = donor[j:]
        elif i < len(buf):
            buf[i] = buf[i] ^ (byte or 1) if op == "flip" else byte
    return bytes(buf)


@fuzz
@given(st.sampled_from(NAMES), ops)
@example(NAMES[0], [("cut", 0, 0, NAMES[0])])
def test_mutated_golden_frames(name: str, mutations: list[tuple[str, int, int, str]]) -> None:
    check(mutate(FRAMES[name], mutations))


@fuzz
@given(st.binary(max_size=300))
def test_arbitrary_bytes(data: bytes) -> None:
    check(data)


PRODUCE = [n for n in NAMES if n.startswith("produce")]


@fuzz
@given(st.sampled_from(PRODUCE), ops)
def test_mutated_produce_batches(name: str, mutations: list[tuple[str, int, int, str]]) -> None:
    """The records of a golden Produce frame, mutated, fed to the validator alone."""
    frame = FRAMES[name]
    start = frame.find(b"\x00\x00\x00\x00\x00\x00\x00\x00")  # the batch's base offset 0
    check(mutate(frame[start:], mutations))


def _records_of(batch: bytes) -> tuple[int, int, bytes]:
    """(codec, count, uncompressed record bytes) of a batch."""
    h = read_batch_header(batch)
    return h.compression, h.records_count, decompress(h.compression, batch[61 : h.total_size])


GENERATED = [
    build_batch(
        [Record(i, i, b"k%d" % i if i % 3 else None, b"v" * i, [("h", b"x")]) for i in range(5)],
        base_timestamp=1_700_000_000_000,
        compression=codec,
    )
    for codec in range(5)
]
BATCHES = GENERATED + [
    FRAMES[n][FRAMES[n].find(b"\x00" * 8) :] for n in PRODUCE if b"\x00" * 8 in FRAMES[n]
]


@fuzz
@given(st.sampled_from(range(len(BATCHES))), ops, st.integers(-2, 2))
def test_record_mutations_under_a_valid_crc(
    which: int, mutations: list[tuple[str, int, int, str]], count_change: int
) -> None:
    """Records mutated (decompressed first, compressed again), the count perhaps changed, and
    the batch re-signed: the CRC passes, so the record scanner has to catch what is wrong."""
    codec, count, raw = _records_of(BATCHES[which])
    records = mutate(raw, [(op, w, b, o) for op, w, b, o in mutations if op != "splice"])
    check(bytes([max(0, count + count_change) % 256, codec]) + records)
    squeezed = mutate(compress(codec, raw), mutations)  # the compressed bytes mutated
    check_batch(batch_around(bytes([count % 256, codec | 128]) + squeezed), 11)


def test_every_length_window_of_every_golden_frame() -> None:
    for name in NAMES:
        frame = FRAMES[name]
        for patch in TAMPERED:
            for i in range(len(frame)):
                check(frame[:i] + patch + frame[i + len(patch) :])


# -- regressions found by fuzzing ---------------------------------------------------------


def _frame(api_key: int, version: int, flexible: bool, body: bytes) -> bytes:
    return request_header(RequestHeader(api_key, version, 7, "fuzz"), flexible) + body


@pytest.mark.parametrize(
    "frame",
    [
        # Produce v7: null transactional id (allowed), then topic_data = null (not allowed)
        _frame(0, 7, False, struct.pack(">hhii", -1, 1, 1000, -1)),
        # Produce v9 (flexible): compact null txn id, then compact null topic_data
        _frame(0, 9, True, b"\x00" + struct.pack(">hi", 1, 1000) + b"\x00\x00"),
        # Metadata v4: one topic whose (non-nullable) name is null
        _frame(3, 4, False, struct.pack(">ihb", 1, -1, 1)),
        # CreateTopics v5 (flexible): one topic whose compact name is null
        _frame(19, 5, True, b"\x02\x00" + b"\x00" * 40),
    ],
    ids=["produce-v7-topic-data", "produce-v9-topic-data", "metadata-v4-name", "create-v5-name"],
)
def test_null_in_a_non_nullable_field_is_a_decode_error(frame: bytes) -> None:
    """kio decodes such a null as None, and the handler then failed on it (TypeError, an
    UNKNOWN_SERVER_ERROR answer); Kafka's readers refuse it, so the request is malformed."""
    with pytest.raises(DecodeError, match="non-nullable"):
        decode_request(frame, SERVED)


def test_nullable_fields_may_still_be_null() -> None:
    # Metadata v4 topics = null means "all topics"
    _, body = decode_request(_frame(3, 4, False, struct.pack(">ib", -1, 1)), SERVED)
    assert body.topics is None
