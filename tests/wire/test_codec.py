from __future__ import annotations

import dataclasses
import datetime
import io
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from wire.codec import (
    api_versions_fallback,
    decode_request,
    encode_response,
    request_class,
    response_class,
)
from wire.errors import DecodeError, UnknownApi, UnsupportedVersion, translations_for
from wire.headers import RequestHeader, request_header

from .conftest import entities
from .supported import PAIRS, SUPPORTED

pairs = pytest.mark.parametrize(("api_key", "version"), PAIRS, ids=[f"{k}v{v}" for k, v in PAIRS])
few = settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
client_ids = st.none() | st.text(max_size=12)
correlation_ids = st.integers(-(2**31), 2**31 - 1)
EMPTY_METADATA: dict[str, Any] = {
    "throttle_time": datetime.timedelta(0),
    "brokers": (),
    "cluster_id": None,
    "controller_id": -1,
    "topics": (),
}


def request_frame(header: RequestHeader, body: Any) -> bytes:
    cls = type(body)
    buf = io.BytesIO()
    buf.write(request_header(header, cls.__flexible__))
    entity_writer(cls)(buf, body)
    return buf.getvalue()


def split_response(frame: bytes, flexible_header: bool) -> tuple[int, bytes]:
    (size, correlation_id) = struct.unpack_from(">ii", frame)
    assert size == len(frame) - 4
    start = 8
    if flexible_header:
        assert frame[8] == 0, "response header v1 ends with an empty tagged-field section"
        start = 9
    return correlation_id, frame[start:]


def expected_after_translation(entity: Any, mapping: dict[ErrorCode, ErrorCode]) -> Any:
    """An independent rewrite: every ErrorCode anywhere in the tree goes through ``mapping``."""
    if isinstance(entity, ErrorCode):
        return mapping.get(entity, entity)
    if isinstance(entity, tuple):
        return tuple(expected_after_translation(e, mapping) for e in entity)
    if dataclasses.is_dataclass(entity) and not isinstance(entity, type):
        return dataclasses.replace(
            entity,
            **{
                f.name: expected_after_translation(getattr(entity, f.name), mapping)
                for f in dataclasses.fields(entity)
            },
        )
    return entity


@pairs
def test_request_round_trip(api_key: int, version: int) -> None:
    cls = request_class(api_key, version)

    @few
    @given(entities(cls), correlation_ids, client_ids, st.binary(max_size=3))
    def check(body: Any, corr: int, client_id: str | None, trailing: bytes) -> None:
        header = RequestHeader(api_key, version, corr, client_id)
        got_header, got_body = decode_request(request_frame(header, body) + trailing, SUPPORTED)
        assert got_header == header
        assert got_body == body

    check()


@pairs
def test_response_frame(api_key: int, version: int) -> None:
    cls = response_class(api_key, version)
    flexible_header = cls.__flexible__ and api_key != 18
    mapping = dict(translations_for(api_key, version))

    @few
    @given(entities(cls), correlation_ids)
    def check(body: Any, corr: int) -> None:
        frame = encode_response(RequestHeader(api_key, version, corr, "c"), body)
        got_corr, rest = split_response(frame, flexible_header)
        assert got_corr == corr
        decoded, size = entity_reader(cls)(rest, 0)
        assert size == len(rest)
        assert decoded == expected_after_translation(body, mapping)

    check()


@pytest.mark.parametrize("version", range(5))
def test_api_versions_response_header_is_v0_at_every_version(version: int) -> None:
    cls = response_class(18, version)
    module = sys.modules[cls.__module__]
    fields = {"error_code": ErrorCode.none}
    fields["api_keys"] = (module.ApiVersion(api_key=18, min_version=0, max_version=4),)
    if version >= 1:
        fields["throttle_time"] = datetime.timedelta(0)
    body = cls(**fields)
    frame = encode_response(RequestHeader(18, version, 5, None), body)
    written = io.BytesIO()
    entity_writer(cls)(written, body)
    assert frame == struct.pack(">ii", 4 + len(written.getvalue()), 5) + written.getvalue()


def test_flexible_response_header_is_v1() -> None:
    cls = response_class(3, 12)
    body = cls(**EMPTY_METADATA)
    frame = encode_response(RequestHeader(3, 12, 9, None), body)
    written = io.BytesIO()
    entity_writer(cls)(written, body)
    assert frame[4:] == b"\x00\x00\x00\x09\x00" + written.getvalue()


def test_kip511_fallback_for_unknown_api_versions_version() -> None:
    frame = request_header(RequestHeader(18, 7, 99, "kafka-python"), True) + b"\x00\x00\x00"
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(frame, SUPPORTED)
    assert info.value.header == RequestHeader(18, 7, 99, "kafka-python")
    reply = api_versions_fallback(info.value.header, SUPPORTED)
    corr, rest = split_response(reply, flexible_header=False)
    assert corr == 99
    body, size = entity_reader(ApiVersionsResponseV0)(rest, 0)
    assert size == len(rest)
    assert body.error_code == ErrorCode.unsupported_version == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 4)]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_is_advertised_but_unsupported(version: int) -> None:
    assert SUPPORTED[0][0] == 0
    frame = request_header(RequestHeader(0, version, 3, "rdkafka"), False) + b"\xff\xff\x00\x01"
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(frame, SUPPORTED)
    exc = info.value
    assert (exc.api_key, exc.api_version, exc.correlation_id) == (0, version, 3)
    assert info.value.header is not None


@pytest.mark.parametrize("version", [-1, 99])
def test_version_outside_the_advertised_range(version: int) -> None:
    frame = request_header(RequestHeader(3, version, 4, None), False)
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(frame, {3: (0, 12)})
    assert info.value.header == RequestHeader(3, version, 4, None)


def test_advertised_version_without_a_schema() -> None:
    frame = request_header(RequestHeader(3, 40, 4, None), False)
    with pytest.raises(UnsupportedVersion):
        decode_request(frame, {3: (0, 99)})


def test_unknown_api_key() -> None:
    frame = request_header(RequestHeader(42, 0, 1, None), False)
    with pytest.raises(UnknownApi) as info:
        decode_request(frame, SUPPORTED)
    assert info.value.header.correlation_id == 1


def test_truncated_body() -> None:
    header = RequestHeader(3, 12, 1, "c")
    body = request_class(3, 12)(
        topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False
    )
    frame = request_frame(header, body)
    assert decode_request(frame, SUPPORTED)[1] == body
    with pytest.raises(DecodeError):
        decode_request(frame[:-1], SUPPORTED)


def test_encode_response_refuses_a_body_of_another_version() -> None:
    body = response_class(3, 11)(**EMPTY_METADATA)
    with pytest.raises(ValueError):
        encode_response(RequestHeader(3, 12, 1, None), body)


def test_helpers_are_cached_and_refuse_unknown_versions() -> None:
    assert request_class(0, 9) is request_class(0, 9)
    assert response_class(1, 12).__name__ == "FetchResponse"
    with pytest.raises(UnsupportedVersion):
        request_class(0, 2)
    with pytest.raises(UnsupportedVersion):
        response_class(9999, 0)


def _end_txn_response(version: int, code: ErrorCode) -> bytes:
    body = response_class(26, version)(throttle_time=datetime.timedelta(0), error_code=code)
    return encode_response(RequestHeader(26, version, 1, None), body)


@pytest.mark.parametrize(
    ("version", "expected"),
    [(0, ErrorCode.invalid_producer_epoch), (1, ErrorCode.invalid_producer_epoch)]
    + [(v, ErrorCode.producer_fenced) for v in (2, 3, 4)],
)
def test_producer_fenced_is_translated_for_old_end_txn(version: int, expected: ErrorCode) -> None:
    frame = _end_txn_response(version, ErrorCode.producer_fenced)
    cls = response_class(26, version)
    _, rest = split_response(frame, cls.__flexible__)
    assert entity_reader(cls)(rest, 0)[0].error_code == expected


def test_nested_codes_are_translated_and_others_kept() -> None:
    module = sys.modules[response_class(0, 10).__module__]

    def partition(index: int, code: ErrorCode) -> Any:
        return module.PartitionProduceResponse(
            index=index,
            error_code=code,
            base_offset=-1,
            log_append_time=None,
            log_start_offset=-1,
            record_errors=(),
            error_message=None,
        )

    body = module.ProduceResponse(
        responses=(
            module.TopicProduceResponse(
                name="t",
                partition_responses=(
                    partition(0, ErrorCode.transaction_abortable),
                    partition(1, ErrorCode.out_of_order_sequence_number),
                    partition(2, ErrorCode.concurrent_transactions),
                ),
            ),
        ),
        throttle_time=datetime.timedelta(0),
    )
    frame = encode_response(RequestHeader(0, 10, 1, None), body)
    _, rest = split_response(frame, True)
    decoded = entity_reader(type(body))(rest, 0)[0]
    codes = [p.error_code for p in decoded.responses[0].partition_responses]
    assert codes == [
        ErrorCode.invalid_txn_state,
        ErrorCode.out_of_order_sequence_number,
        ErrorCode.not_enough_replicas,
    ]


def test_crafted_huge_array_lengths_are_refused_without_killing_the_process() -> None:
    """kio 0.6.5 aborts the process when it cannot reserve an array's declared length; run in a
    subprocess so a regression fails this test instead of killing the test run."""
    script = textwrap.dedent(
        """
        import struct
        from wire.codec import decode_request
        from wire.errors import DecodeError
        from wire.headers import RequestHeader, request_header

        def frame(key, version, flexible, body):
            return request_header(RequestHeader(key, version, 1, "x"), flexible) + body

        cases = [
            frame(3, 12, True, b"\\xff\\xff\\xff\\xff\\x0f"),  # compact array of 2**32 - 2
            frame(3, 4, False, struct.pack(">i", 2**31 - 1)),  # legacy array
            # Produce v9: transactional_id null, acks, timeout, 1 topic "t", huge partitions
            frame(0, 9, True, b"\\x00\\xff\\xff\\0\\0\\0\\x10\\x02\\x02t\\xfe\\xff\\xff\\xff\\x0f"),
            # Fetch v4 (legacy): replica, max_wait, min_bytes, max_bytes, isolation, topics=2**31-1
            frame(1, 4, False, b"\\x00" * 17 + struct.pack(">i", 2**31 - 1)),
            # a tag section claiming 2**32 - 1 fields
            frame(3, 12, True, b"\\x01\\x00\\x00\\xff\\xff\\xff\\xff\\x0f"),
        ]
        for data in cases:
            try:
                decode_request(data, {0: (0, 11), 1: (4, 12), 3: (0, 12)})
            except DecodeError:
                print("refused")
        """
    )
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["refused"] * 5
