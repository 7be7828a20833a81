"""storage.log_validator: the produce-side rules in one place, in Kafka's order, with the
topic's configs read there; and wire.batch.set_max_timestamp, the one header rewrite that
re-signs a batch."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from storage.api import TopicMeta
from storage.log_validator import Refused, _rules, _validate, validate_for_append
from storage.topic_config import effective_configs
from storage.topics import Topic
from wire.batch import (
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    crc_ok,
    read_batch_header,
    set_max_timestamp,
)
from wire.record_check import RecordsAccepted
from wire.record_codec import Record, build_batch

NOW = 1_700_000_000_000


def topic(**overrides: str) -> Topic:
    settings = {k: v for k, (v, _) in effective_configs(overrides, {}).items()}
    return Topic(TopicMeta("t", uuid.uuid4(), 1, overrides), [], settings)


def batch(*keys: bytes | None, ts: int = NOW, **kw: object) -> bytes:
    records = [Record(i, 0, k, b"v") for i, k in enumerate(keys)]
    return build_batch(records, base_timestamp=ts, **kw)  # type: ignore[arg-type]


def validate(data: bytes, t: Topic, *, txns: bool = True) -> RecordsAccepted | Refused:
    return validate_for_append(
        data, t, 0, produce_version=11, now_ms=NOW, transactions_enabled=txns
    )


def test_a_good_batch_is_accepted_as_sent() -> None:
    data = batch(b"k", b"k2")
    got = validate(data, topic())
    assert isinstance(got, RecordsAccepted)
    assert got.batch == data


def test_the_topics_own_configs_decide_which_rules_apply() -> None:
    keyless = batch(None, b"k")
    assert isinstance(validate(keyless, topic()), RecordsAccepted)
    refused = validate(keyless, topic(**{"cleanup.policy": "compact"}))
    assert isinstance(refused, Refused)
    assert refused.code is ErrorCode.invalid_record
    assert [i for i, _ in refused.record_errors] == [0]
    old = batch(b"k", ts=NOW - 10_000)
    assert isinstance(validate(old, topic()), RecordsAccepted)
    too_old = validate(old, topic(**{"message.timestamp.before.max.ms": "1000"}))
    assert isinstance(too_old, Refused) and too_old.code is ErrorCode.invalid_timestamp
    # a LogAppendTime topic does not check the client's timestamps
    lat = topic(**{"message.timestamp.type": "LogAppendTime"})
    assert isinstance(validate(old, lat), RecordsAccepted)


def test_the_batch_size_limit_is_the_topics() -> None:
    data = batch(b"k")
    small = topic(**{"max.message.bytes": str(len(data) - 1)})
    got = validate(data, small)
    assert isinstance(got, Refused) and got.code is ErrorCode.message_too_large


@pytest.mark.parametrize(
    ("kw", "txns", "message"),
    [
        (
            {"producer_id": 7, "producer_epoch": 0, "base_sequence": 0},
            False,
            "transactional batches need a transaction coordinator",
        ),
        ({}, True, "transactional batch without a producer id"),
    ],
)
def test_transactional_rules(kw: dict[str, int], txns: bool, message: str) -> None:
    got = validate(batch(b"k", transactional=True, **kw), topic(), txns=txns)
    assert isinstance(got, Refused)
    assert (got.code, got.message) == (ErrorCode.invalid_record, message)


def test_structure_comes_before_record_rules() -> None:
    """Kafka checks the batch (here: its CRC) before any record: a keyless record on a
    compacted topic in a corrupt batch is CORRUPT_MESSAGE, not a record error."""
    data = bytearray(batch(None))
    data[-1] ^= 0xFF
    got = validate(bytes(data), topic(**{"cleanup.policy": "compact"}))
    assert isinstance(got, Refused)
    assert (got.code, got.record_errors) == (ErrorCode.corrupt_message, ())


@pytest.mark.parametrize("log_append_time", [False, True])
def test_set_max_timestamp_rebuilds_attributes_like_kafka(log_append_time: bool) -> None:
    """DefaultRecordBatch.setMaxTimestamp: attributes recomputed from the known bits (an unknown
    high bit is dropped, transactional kept), the type as asked, the CRC valid again."""
    buf = bytearray(
        batch(b"k", producer_id=1, producer_epoch=0, base_sequence=0, transactional=True)
    )
    attrs = int.from_bytes(buf[21:23], "big") | 0x0100 | ATTR_TIMESTAMP_TYPE
    buf[21:23] = attrs.to_bytes(2, "big")
    set_max_timestamp(buf, NOW + 5, log_append_time=log_append_time)
    header = read_batch_header(buf)
    assert crc_ok(buf, 0, header)
    assert header.max_timestamp == NOW + 5
    assert header.attributes & 0x0100 == 0
    assert header.attributes & ATTR_TRANSACTIONAL
    assert bool(header.attributes & ATTR_TIMESTAMP_TYPE) is log_append_time


# -- the fast path gives the general path's answer ---------------------------------------------

_TOPICS = [
    topic(),
    topic(**{"cleanup.policy": "compact"}),
    topic(**{"message.timestamp.type": "LogAppendTime"}),
    topic(**{"compression.type": "gzip"}),
    topic(**{"compression.type": "uncompressed"}),
    topic(**{"max.message.bytes": "200"}),
    topic(**{"message.timestamp.before.max.ms": "1000", "message.timestamp.after.max.ms": "1000"}),
]


@st.composite
def _batches(draw: st.DrawFn) -> bytes:
    n = draw(st.integers(1, 4))
    records = [
        Record(
            draw(st.sampled_from([i, i, i, 0, 7])),
            draw(st.sampled_from([0, i, 5000, -5000])),
            draw(st.none() | st.binary(max_size=3)),
            draw(st.none() | st.binary(max_size=60)),
        )
        for i in range(n)
    ]
    producer_id = draw(st.sampled_from([-1, -1, 5]))
    data = bytearray(
        build_batch(
            records,
            base_timestamp=draw(st.sampled_from([NOW, NOW, NOW - 10**7, -1])),
            max_timestamp=draw(st.none() | st.sampled_from([NOW, NOW + 1, -1])),
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
            base_sequence=draw(st.sampled_from([-1, 0, 3])),
            compression=draw(st.sampled_from([0, 0, 0, 1, 4])),
            transactional=draw(st.booleans()),
            log_append_time=draw(st.booleans()),
            control=draw(st.sampled_from([False] * 9 + [True])),
            base_offset=draw(st.sampled_from([0] * 9 + [3])),
        )
    )
    mutation = draw(st.integers(0, 9))
    if mutation == 1:  # a byte flipped: the CRC, a header field or a record
        at = draw(st.integers(0, len(data) - 1))
        data[at] ^= 1 << draw(st.integers(0, 7))
    elif mutation == 2:
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif mutation == 3:
        data += draw(st.binary(min_size=1, max_size=70))
    return bytes(data)


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=_batches(), which=st.integers(0, len(_TOPICS) - 1), txns=st.booleans())
def test_the_fast_path_answers_as_the_general_path(data: bytes, which: int, txns: bool) -> None:
    t = _TOPICS[which]
    fast = validate_for_append(data, t, 0, produce_version=9, now_ms=NOW, transactions_enabled=txns)
    general = _validate(data, t, 0, _rules(t), 9, NOW, txns)
    assert fast == general
