"""storage.log_validator: the produce-side rules in one place, in Kafka's order, with the
topic's configs read there; and wire.batch.set_max_timestamp, the one header rewrite that
re-signs a batch."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from storage.api import TopicMeta
from storage.log_validator import Refused, validate_for_append
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
