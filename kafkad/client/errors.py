"""What can go wrong talking to a broker, worded for a person.

``ClientError`` is every failure the CLI reports on one line (its ``str`` is the message);
``KafkaError`` carries a Kafka error code with its name and what it means (the meanings are
short paraphrases of the messages in Kafka's ``Errors.java``).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ClientError", "ErrorCode", "KafkaError", "Unreachable", "check", "describe_code"]

_MEANINGS: dict[ErrorCode, str] = {
    ErrorCode.unknown_server_error: "the broker hit an unexpected error",
    ErrorCode.offset_out_of_range: "the offset is outside the partition's log",
    ErrorCode.corrupt_message: "a record batch failed its CRC or is malformed",
    ErrorCode.unknown_topic_or_partition: "no such topic or partition",
    ErrorCode.leader_not_available: "the partition has no leader right now",
    ErrorCode.not_leader_or_follower: "this broker does not lead the partition",
    ErrorCode.request_timed_out: "the request timed out on the broker",
    ErrorCode.message_too_large: "the batch is larger than the topic accepts",
    ErrorCode.coordinator_load_in_progress: "the coordinator is still loading its state",
    ErrorCode.coordinator_not_available: "the coordinator is not available",
    ErrorCode.not_coordinator: "this broker is not the coordinator",
    ErrorCode.invalid_topic_exception: "the topic name is not valid",
    ErrorCode.invalid_partitions: "the number of partitions is not valid",
    ErrorCode.invalid_replication_factor: "the replication factor is not valid",
    ErrorCode.invalid_config: "the configuration is not valid",
    ErrorCode.topic_already_exists: "the topic already exists",
    ErrorCode.non_empty_group: "the group still has members",
    ErrorCode.group_id_not_found: "no such group",
    ErrorCode.topic_authorization_failed: "not authorized to access the topic",
    ErrorCode.group_authorization_failed: "not authorized to access the group",
    ErrorCode.cluster_authorization_failed: "not authorized for this cluster action",
    ErrorCode.transactional_id_authorization_failed: "not authorized for the transactional id",
    ErrorCode.transactional_id_not_found: "no such transactional id",
    ErrorCode.invalid_txn_state: "the transaction is not in a state that allows this",
    ErrorCode.invalid_producer_epoch: "the producer epoch is stale (fenced by a newer one)",
    ErrorCode.producer_fenced: "a newer producer with the same transactional id fenced this one",
    ErrorCode.invalid_transaction_timeout: "the transaction timeout is above the broker's maximum",
    ErrorCode.concurrent_transactions: "the coordinator is still completing an earlier transaction",
    ErrorCode.unsupported_version: "the broker does not support this request version",
    ErrorCode.unsupported_compression_type: "the broker does not accept this compression codec",
    ErrorCode.policy_violation: "the request breaks a broker policy",
    ErrorCode.duplicate_sequence_number: "the batch repeats a sequence number already written",
    ErrorCode.out_of_order_sequence_number: "the batch's sequence number is out of order",
    ErrorCode.unknown_producer_id: "the broker does not know this producer id",
    ErrorCode.invalid_request: "the broker refused the request as malformed",
    ErrorCode.unstable_offset_commit: "the group has a pending transactional offset commit",
    ErrorCode.rebalance_in_progress: "the group is rebalancing",
    ErrorCode.unknown_member_id: "the group does not know this member",
    ErrorCode.illegal_generation: "the group's generation has moved on",
    ErrorCode.topic_deletion_disabled: "topic deletion is disabled on the broker",
    ErrorCode.invalid_record: "the broker refused a record as invalid",
    ErrorCode.invalid_timestamp: "a timestamp is outside the range the topic accepts",
}

_RETRIABLE_FOR_CLIENT = {
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
    ErrorCode.concurrent_transactions,
    ErrorCode.leader_not_available,
    ErrorCode.not_leader_or_follower,
    ErrorCode.rebalance_in_progress,
}


class ClientError(Exception):
    """A failure to report to the user as one line."""


class Unreachable(ClientError):
    """No connection to a broker."""


def describe_code(code: int) -> str:
    """``NAME (meaning)`` for a Kafka error code, as Kafka's Errors.java spells the name."""
    try:
        ec = ErrorCode(code)
    except ValueError:
        return f"error code {code}"
    name = ec.name.upper()
    if name == "INVALID_TOPIC_EXCEPTION":
        name = "INVALID_TOPIC"
    meaning = _MEANINGS.get(ec)
    return f"{name} ({meaning})" if meaning else name


class KafkaError(ClientError):
    """A response carried a non-zero error code."""

    def __init__(self, code: int, context: str, message: str | None = None) -> None:
        self.code = int(code)
        self.context = context
        detail = f": {message}" if message else ""
        super().__init__(f"{context}: {describe_code(code)}{detail}")

    @property
    def retriable(self) -> bool:
        try:
            return ErrorCode(self.code) in _RETRIABLE_FOR_CLIENT
        except ValueError:
            return False


def check(code: int, context: str, message: str | None = None) -> None:
    """Raise KafkaError unless ``code`` is 0."""
    if code:
        raise KafkaError(code, context, message)
