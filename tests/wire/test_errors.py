from __future__ import annotations

import pytest

from wire.errors import (
    RETRIABLE,
    TRANSLATIONS,
    DecodeError,
    ErrorCode,
    FramingError,
    ProtocolError,
    UnknownApi,
    UnsupportedVersion,
    translate_error,
)
from wire.headers import RequestHeader

E = ErrorCode

# spec eos.md §1.4: (api key, new code, first version that keeps it, what older versions get)
SPEC_1_4 = [
    (22, E.producer_fenced, 4, E.invalid_producer_epoch),
    (24, E.producer_fenced, 2, E.invalid_producer_epoch),
    (25, E.producer_fenced, 2, E.invalid_producer_epoch),
    (26, E.producer_fenced, 2, E.invalid_producer_epoch),
    (0, E.transaction_abortable, 11, E.invalid_txn_state),
    (24, E.transaction_abortable, 4, E.invalid_txn_state),  # v4 (brokers) as is: Kafka 4.2
    (0, E.concurrent_transactions, 12, E.not_enough_replicas),  # TV2 produce keeps it (4.2)
    (28, E.coordinator_load_in_progress, 2, E.coordinator_not_available),
    (8, E.group_id_not_found, 9, E.illegal_generation),
]


@pytest.mark.parametrize(("api_key", "code", "since", "old"), SPEC_1_4)
def test_version_dependent_translation(
    api_key: int, code: ErrorCode, since: int, old: ErrorCode
) -> None:
    for version in range(since):
        assert translate_error(api_key, version, code) is old
    assert translate_error(api_key, since, code) is code
    assert translate_error(api_key, since + 3, code) is code


@pytest.mark.parametrize(
    "code",
    [
        E.coordinator_not_available,
        E.coordinator_load_in_progress,
        E.not_coordinator,
        E.network_exception,
    ],
)
def test_produce_verification_errors_become_not_enough_replicas(code: ErrorCode) -> None:
    for version in (3, 9, 11, 12):
        assert translate_error(0, version, code) is E.not_enough_replicas
    assert translate_error(0, 11, E.producer_fenced) is E.invalid_producer_epoch


def test_codes_without_a_rule_pass_through() -> None:
    assert translate_error(26, 0, E.concurrent_transactions) is E.concurrent_transactions
    assert translate_error(1, 4, E.producer_fenced) is E.producer_fenced
    assert translate_error(0, 3, E.none) is E.none


def test_rules_do_not_chain() -> None:
    """One lookup suffices: no rewritten code is itself rewritten for the same API."""
    for (key, new), (_since, old) in TRANSLATIONS.items():
        assert old is not new
        assert (key, old) not in TRANSLATIONS


def test_retriable_matches_the_java_client() -> None:
    spec_retriable = {
        E.concurrent_transactions,
        E.coordinator_load_in_progress,
        E.coordinator_not_available,
        E.not_coordinator,
        E.not_enough_replicas,
        E.request_timed_out,
        E.network_exception,
        E.unknown_topic_or_partition,
        E.not_leader_or_follower,
        E.unstable_offset_commit,
        E.corrupt_message,
    }
    kip_98 = {
        E.invalid_producer_epoch,
        E.invalid_txn_state,
        E.invalid_producer_id_mapping,
        E.transactional_id_authorization_failed,
        E.producer_fenced,
    }
    assert spec_retriable <= RETRIABLE
    assert not kip_98 & RETRIABLE
    assert E.invalid_record not in RETRIABLE
    assert E.unsupported_compression_type not in RETRIABLE


def test_exception_hierarchy_and_context() -> None:
    for cls in (FramingError, DecodeError, UnknownApi, UnsupportedVersion):
        assert issubclass(cls, ProtocolError)
    header = RequestHeader(18, 9, 77, "c")
    exc = UnsupportedVersion(18, 9, 77, header)
    assert (exc.api_key, exc.api_version, exc.correlation_id, exc.header) == (18, 9, 77, header)
    assert "77" in str(exc)
    assert UnknownApi(header).api_key == 18
