"""How a coordinator answers a failed append to its internal topic: the one mapping both
coordinators use, as Kafka's ``TransactionStateManager`` / ``GroupMetadataManager``
(``appendGroupMetadataErrorToResponseError``) map the log's error to what the client can act
on. kafkad's storage fails with ``StorageError``, which is Kafka's KAFKA_STORAGE_ERROR:
NOT_COORDINATOR, so the client looks the coordinator up again and retries."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from kio.schema.errors import ErrorCode

E = ErrorCode

APPEND_ERRORS: Final[Mapping[ErrorCode, ErrorCode]] = MappingProxyType(
    {
        E.unknown_topic_or_partition: E.coordinator_not_available,
        E.not_enough_replicas: E.coordinator_not_available,
        E.not_enough_replicas_after_append: E.coordinator_not_available,
        E.request_timed_out: E.coordinator_not_available,
        E.not_leader_or_follower: E.not_coordinator,
        E.kafka_storage_error: E.not_coordinator,
        E.message_too_large: E.unknown_server_error,
        E.record_list_too_large: E.unknown_server_error,
    }
)


def append_error(storage_error: ErrorCode) -> ErrorCode:
    return APPEND_ERRORS.get(storage_error, storage_error)


STORAGE_FAILURE: Final[ErrorCode] = append_error(E.kafka_storage_error)
"""The answer to an append that raised ``StorageError``."""
