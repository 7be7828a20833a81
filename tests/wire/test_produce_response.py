"""wire/produce_response.py writes the bytes the generic path writes (conversion to the
client's version, then kio's writer), for generated responses at every version."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from kio.schema.errors import ErrorCode
from kio.schema.produce.v11 import response as newest

from tests.wire.conftest import entities
from wire.codec import RequestHeader, encode_response, response_class
from wire.produce_response import encode_produce_response
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


def test_versions_it_does_not_encode_are_refused() -> None:
    resp = newest.ProduceResponse(responses=(), throttle_time=datetime.timedelta(0))
    with pytest.raises(ValueError):
        encode_produce_response(1, 13, resp)
