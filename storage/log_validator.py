"""What a produced batch must satisfy before a partition appends it: Kafka's ``LogValidator``.

Theory of operation
-------------------
One function, ``validate_for_append``, holds every rule a client batch meets on its way into
a partition's log, in Kafka's order, with the topic's configs read in one place. The byte-level
work is ``wire``'s (sans-I/O parsing, CRC, record scanning, header patching); which rule
applies, with which limit, is decided here:

    step  rule                                              answer                 Kafka
    1     one v2 batch, header sane, CRC, counts, not a     (see wire/records.py)  ReplicaManager,
          control batch, size <= max.message.bytes                                 LogValidator
    2     every record: structure, keys on compacted        INVALID_RECORD,        LogValidator
          topics, timestamps against message.timestamp.*    INVALID_TIMESTAMP      .validateRecord
          (CreateTime) or the client's LogAppendTime bit    (record_errors, v8+)
    3     a batch of another codec than the topic's         (rebuilt)              LogValidator
          compression.type is recompressed (offsets made                           .buildRecords...
          consecutive too); the rebuilt batch still fits    MESSAGE_TOO_LARGE
          max.message.bytes
    4     a transactional batch needs a transaction         INVALID_RECORD         (kafkad)
          coordinator and a producer id                                            LogValidator

The checks against the partition's producer state (duplicates, epochs, sequences, KIP-890
verification) need the partition's lock and happen in ``Partition.append``; so does the
LogAppendTime stamp, which takes the broker's time at the moment of the append
(``wire.batch.set_max_timestamp``), as Kafka's ``validateMessagesAndAssignOffsets`` does under
the log's lock. What the request as a whole must satisfy (acks, a transactional id for
transactional batches, no appends to internal topics) is the produce handler's, as it is
Kafka's ``ReplicaManager``'s.

Deviations from Kafka: see wire/record_check.py (decompressed-size bound, INVALID_RECORD for a
payload the codec cannot read, rebuilding non-consecutive compressed offsets). Kafka has no
broker without a transaction coordinator; kafkad refuses transactional batches there
(``transactions_enabled=False``) with INVALID_RECORD rather than accepting batches no marker
could ever end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from storage.topic_config import COMPRESSION_CODECS, LEVEL_CONFIGS
from storage.topics import Topic
from wire.record_check import RecordErrors, RecordPolicy, RecordsAccepted, check_records
from wire.records import validate_produce_batch

__all__ = [
    "DECOMPRESSED_FLOOR",
    "DECOMPRESSED_RATIO",
    "Refused",
    "validate_for_append",
]

# The decompressed size a batch may reach: this many times max.message.bytes, and never less
# than the floor (see wire/record_check.py: Kafka has no such bound).
DECOMPRESSED_RATIO = 64
DECOMPRESSED_FLOOR = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Refused:
    """Why the batch is not appended: the partition's error code, Kafka's error message (or
    None), the refused records' batch indexes with their messages, and a reason for the log."""

    code: ErrorCode
    message: str | None = None
    record_errors: RecordErrors = ()
    reason: str = ""


class _TopicRules(NamedTuple):
    """What the checks read from a topic's settings, computed once per settings dict."""

    max_bytes: int  # max.message.bytes
    policy: RecordPolicy  # its now_ms and partition filled in per batch

    def policy_for(self, now_ms: int, partition: str) -> RecordPolicy:
        p = self.policy
        return RecordPolicy(
            now_ms,
            p.log_append_time,
            p.before_max_ms,
            p.after_max_ms,
            p.compacted,
            p.max_decompressed_bytes,
            partition,
            p.target_compression,
            p.target_level,
        )


# Topic settings mapping (by identity) -> its rules. ``TopicManager`` replaces a topic's
# settings whenever a config changes (topic overrides, dynamic broker defaults) and hands out
# read-only mappings, so a mapping seen before has the rules computed from it; the cache holds
# each mapping it keys, so an id is never reused in it.
_RULES: dict[int, tuple[Mapping[str, str], _TopicRules]] = {}
_RULES_MAX = 4096  # dropped wholesale past this (topics reconfigured many times)


def _rules(topic: Topic) -> _TopicRules:
    settings = topic.settings
    hit = _RULES.get(id(settings))
    if hit is not None and hit[0] is settings:
        return hit[1]
    max_bytes = topic.int_setting("max.message.bytes")
    target = COMPRESSION_CODECS[settings["compression.type"]]
    level_config = LEVEL_CONFIGS.get(target) if target is not None else None
    policy = RecordPolicy(
        now_ms=0,
        log_append_time=settings["message.timestamp.type"] == "LogAppendTime",
        before_max_ms=topic.int_setting("message.timestamp.before.max.ms"),
        after_max_ms=topic.int_setting("message.timestamp.after.max.ms"),
        compacted=settings["cleanup.policy"] != "delete",
        max_decompressed_bytes=max(DECOMPRESSED_RATIO * max_bytes, DECOMPRESSED_FLOOR),
        partition="",
        target_compression=target,
        target_level=None if level_config is None else topic.int_setting(level_config),
    )
    if len(_RULES) >= _RULES_MAX:
        _RULES.clear()
    rules = _RULES[id(settings)] = (settings, _TopicRules(max_bytes, policy))
    return rules[1]


def validate_for_append(
    records: bytes,
    topic: Topic,
    partition: int,
    *,
    produce_version: int,
    now_ms: int,
    transactions_enabled: bool,
) -> RecordsAccepted | Refused:
    """The batch to append to ``topic``-``partition`` (the client's bytes, or a fixed copy:
    max timestamp set, offsets rebuilt), or why it is refused. See the module's table."""
    rules = _rules(topic)
    max_bytes = rules.max_bytes
    checked = validate_produce_batch(
        records, produce_version=produce_version, max_message_bytes=max_bytes
    )
    if isinstance(checked, ErrorCode):
        return Refused(checked)
    policy = rules.policy_for(now_ms, f"{topic.name}-{partition}")
    accepted = check_records(records, checked.header, policy)
    if not isinstance(accepted, RecordsAccepted):
        return Refused(accepted.code, accepted.message, accepted.record_errors, accepted.reason)
    if len(accepted.batch) > max_bytes:  # rebuilt (recompressed) larger
        return Refused(ErrorCode.message_too_large)
    header = accepted.header
    if header.is_transactional and not transactions_enabled:
        return Refused(
            ErrorCode.invalid_record, "transactional batches need a transaction coordinator"
        )
    if header.is_transactional and header.producer_id < 0:
        return Refused(ErrorCode.invalid_record, "transactional batch without a producer id")
    return accepted
