"""wire/txn_responses.py writes the bytes the generic path writes (the handler's ``write``:
conversion and downgrade to the client's version, then kio's writer), for generated responses
at every version the handlers serve."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from kio.schema.add_partitions_to_txn.v5 import response as apt
from kio.schema.end_txn.v5 import response as et
from kio.schema.errors import ErrorCode

from proxy.registry import entry
from tests.wire.conftest import entities
from wire.codec import RequestHeader, encode_response
from wire.txn_responses import encode_add_partitions_to_txn_response, encode_end_txn_response

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def generic(api_key: int, resp: Any, version: int, correlation_id: int = 7) -> bytes:
    old = entry(api_key).write(resp, None, version)
    return encode_response(RequestHeader(api_key, version, correlation_id, "t"), old)


def test_the_handlers_use_them() -> None:
    assert entry(26).encode is not None
    assert entry(24).encode is not None


@pytest.mark.parametrize("version", range(6))
@SETTINGS
@given(resp=entities(et.EndTxnResponse))
def test_end_txn_the_same_bytes_as_the_generic_path(version: int, resp: Any) -> None:
    assert encode_end_txn_response(7, version, resp) == generic(26, resp, version)


@pytest.mark.parametrize("version", range(6))
@SETTINGS
@given(resp=entities(apt.AddPartitionsToTxnResponse))
def test_add_partitions_the_same_bytes_as_the_generic_path(version: int, resp: Any) -> None:
    assert encode_add_partitions_to_txn_response(7, version, resp) == generic(24, resp, version)


@pytest.mark.parametrize("version", range(6))
def test_every_error_code_is_translated_as_the_generic_path(version: int) -> None:
    for code in ErrorCode:
        end = et.EndTxnResponse(
            throttle_time=datetime.timedelta(0),
            error_code=code,
            producer_id=5,
            producer_epoch=3,
        )
        assert encode_end_txn_response(3, version, end) == generic(26, end, version, 3), code
        add = apt.AddPartitionsToTxnResponse(
            throttle_time=end.throttle_time,
            error_code=code,
            results_by_transaction=(
                apt.AddPartitionsToTxnResult(
                    transactional_id="t",
                    topic_results=(
                        apt.AddPartitionsToTxnTopicResult(
                            name="a",
                            results_by_partition=(
                                apt.AddPartitionsToTxnPartitionResult(
                                    partition_index=0, partition_error_code=code
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        )
        assert encode_add_partitions_to_txn_response(3, version, add) == generic(
            24, add, version, 3
        ), code
