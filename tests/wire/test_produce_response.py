"""wire/produce_response.py writes the bytes the generic path writes (conversion to the
client's version, then kio's writer), for generated responses at every version."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.produce.v11 import response as newest
from kio.schema.produce.v12 import response as v12
from kio.schema.produce.v13 import response as by_id
from kio.schema.types import BrokerId
from kio.static.primitive import i32, i64

from tests.wire.conftest import entities
from wire.codec import RequestHeader, encode_response, response_class
from wire.produce_response import (
    PartitionAnswer,
    ProduceAnswer,
    TopicAnswer,
    as_kio,
    encode_produce_response,
    write_answer,
)
from wire.values import NO_THROTTLE
from wire.versions import convert


def generic(resp: Any, version: int, correlation_id: int = 7) -> bytes:
    old = convert(resp, response_class(0, version))
    return encode_response(RequestHeader(0, version, correlation_id, "t"), old)


@pytest.mark.parametrize("version", range(3, 12))
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(resp=entities(newest.ProduceResponse))
def test_the_same_bytes_as_the_generic_path(version: int, resp: Any) -> None:
    assert encode_produce_response(7, version, resp) == generic(resp, version)


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_an_error_code_the_version_predates_is_translated(version: int) -> None:
    # e.g. a code newer than the client's version is rewritten as encode_response does
    for code in ErrorCode:
        resp = newest.ProduceResponse(
            responses=(
                newest.TopicProduceResponse(
                    name="t",
                    partition_responses=(
                        newest.PartitionProduceResponse(
                            index=0, error_code=code, base_offset=5, record_errors=()
                        ),
                    ),
                ),
            ),
            throttle_time=datetime.timedelta(0),
        )
        assert encode_produce_response(3, version, resp) == generic(resp, version, 3), code


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(resp=entities(by_id.ProduceResponse))
def test_v13_names_topics_by_id(resp: Any) -> None:
    assert encode_produce_response(7, 13, resp) == generic(resp, 13)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(resp=entities(v12.ProduceResponse))
def test_v12_as_the_handler_builds_it(resp: Any) -> None:
    # the handler answers v12 and below with v12's response classes (proxy/handlers/produce.py)
    assert encode_produce_response(7, 12, resp) == generic(resp, 12)


def test_versions_it_does_not_encode_are_refused() -> None:
    resp = newest.ProduceResponse(responses=(), throttle_time=datetime.timedelta(0))
    with pytest.raises(ValueError):
        encode_produce_response(1, 14, resp)


# Wider than ``entities``: arrays and strings long enough for multi-byte varint lengths (128+),
# non-ASCII text, every error code, and v10's tagged fields both at and off their defaults.
_texts = st.text(max_size=200)
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_partitions = st.builds(
    newest.PartitionProduceResponse,
    index=_i32.map(i32),
    error_code=st.sampled_from(list(ErrorCode)),
    base_offset=_i64.map(i64),
    log_append_time=st.none()
    | st.datetimes(
        min_value=datetime.datetime(1970, 1, 1),
        max_value=datetime.datetime(2200, 1, 1),
        timezones=st.just(datetime.UTC),
    ),
    log_start_offset=_i64.map(i64),
    record_errors=st.lists(
        st.builds(
            newest.BatchIndexAndErrorMessage,
            batch_index=_i32.map(i32),
            batch_index_error_message=st.none() | _texts,
        ),
        max_size=130,
    ).map(tuple),
    error_message=st.none() | _texts,
    current_leader=st.builds(
        newest.LeaderIdAndEpoch,
        leader_id=st.sampled_from([-1, 0, 2**31 - 1]).map(BrokerId),
        leader_epoch=st.sampled_from([-1, 0, 7]).map(i32),
    ),
)
_responses = st.builds(
    newest.ProduceResponse,
    responses=st.lists(
        st.builds(
            newest.TopicProduceResponse,
            name=_texts,
            partition_responses=st.lists(_partitions, max_size=130).map(tuple),
        ),
        max_size=2,
    ).map(tuple),
    throttle_time=st.integers(0, 2**31 - 1).map(lambda ms: datetime.timedelta(milliseconds=ms)),
    node_endpoints=st.lists(
        st.builds(
            newest.NodeEndpoint,
            node_id=_i32.map(BrokerId),
            host=_texts,
            port=_i32.map(i32),
            rack=st.none() | _texts,
        ),
        max_size=130,
    ).map(tuple),
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(resp=_responses, version=st.integers(3, 12), correlation_id=_i32)
def test_the_same_bytes_for_long_arrays_and_strings(
    resp: Any, version: int, correlation_id: int
) -> None:
    assert encode_produce_response(correlation_id, version, resp) == generic(
        resp, version, correlation_id
    )


# The handler's own answer (``ProduceAnswer``): the same bytes as its kio response (``as_kio``)
# through the generic path, at every version, the one-partition shortcut included.
_answer_partitions = st.builds(
    PartitionAnswer,
    partition=_i32,
    error_code=st.sampled_from(list(ErrorCode)),
    base_offset=_i64,
    log_append_time_ms=st.sampled_from([-1, 0, 1_764_000_000_123])
    | st.integers(0, 253402300799999),
    log_start_offset=_i64,
    record_errors=st.lists(st.tuples(_i32, _texts), max_size=130).map(tuple) | st.just(()),
    error_message=st.none() | st.none() | _texts,
)
_answer_names = st.sampled_from(["t", "a" * 126, "a" * 127, "é" * 70, ""]) | _texts


@st.composite
def _answers(draw: st.DrawFn) -> ProduceAnswer:
    topics = draw(
        st.lists(
            st.builds(
                TopicAnswer,
                name=_answer_names,
                topic_id=st.uuids(),
                partition_responses=st.lists(_answer_partitions, min_size=1, max_size=130).map(
                    tuple
                ),
            ),
            min_size=1,
            max_size=2,
        )
    )
    throttle = draw(st.sampled_from([NO_THROTTLE, datetime.timedelta(milliseconds=250)]))
    return ProduceAnswer(tuple(topics), throttle)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(answer=_answers(), version=st.integers(3, 13), correlation_id=_i32)
def test_the_handlers_answer_is_written_as_its_kio_response(
    answer: ProduceAnswer, version: int, correlation_id: int
) -> None:
    if version >= 13:
        answer = ProduceAnswer(
            tuple(t._replace(name=None) for t in answer.responses), answer.throttle_time
        )
    expected = generic(as_kio(answer, version), version, correlation_id)
    assert encode_produce_response(correlation_id, version, answer) == expected
    assert write_answer(answer, correlation_id, version) == expected


@pytest.mark.parametrize("version", range(9, 13))
def test_the_one_partition_shortcut_writes_the_generic_bytes(version: int) -> None:
    for name in ["t", "a" * 126, "a" * 127, "é" * 63, "é" * 64, ""]:
        for code in ErrorCode:
            for throttle in (NO_THROTTLE, datetime.timedelta(milliseconds=3)):
                part = PartitionAnswer(2, code, 41, 1_764_000_000_123 if code else -1, 7)
                answer = ProduceAnswer((TopicAnswer(name, None, (part,)),), throttle)
                expected = generic(as_kio(answer, version), version, 9)
                assert write_answer(answer, 9, version) == expected, (name, code)
                assert encode_produce_response(9, version, answer) == expected, (name, code)
