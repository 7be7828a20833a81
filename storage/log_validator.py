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

import crc32c
from kio.schema.errors import ErrorCode

from storage.topic_config import COMPRESSION_CODECS, LEVEL_CONFIGS
from storage.topics import Topic
from wire.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BATCH_HEADER_SIZE,
    CRC_START,
    LOG_OVERHEAD,
    header_at,
)
from wire.record_check import RecordErrors, RecordPolicy, RecordsAccepted, check_records
from wire.record_kernel import DONE, scan_records
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
    plain: bool  # the topic keeps a batch's codec (compression.type producer or uncompressed)

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
    rules = _RULES[id(settings)] = (
        settings,
        _TopicRules(max_bytes, policy, not policy.target_compression),
    )
    return rules[1]


# Attributes the fast path leaves to the general one: a codec, the client's LogAppendTime bit,
# a control batch.
_NOT_PLAIN = ATTR_COMPRESSION_MASK | ATTR_TIMESTAMP_TYPE | ATTR_CONTROL


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
    max timestamp set, offsets rebuilt), or why it is refused. See the module's table.

    The usual batch (one whole uncompressed v2 batch of CreateTime records, its max timestamp
    right, on a topic that keeps it as it is) is accepted here from one header unpack, one CRC
    and one record scan: the table's checks it could fail, in one expression; anything else,
    and any batch a check refuses, takes the general path (``_validate``), which answers it
    from the start (the same answer for an accepted batch: tests/storage/test_log_validator.py
    holds the two together)."""
    rules = _rules(topic)
    n = len(records)
    if rules.plain and n >= BATCH_HEADER_SIZE:
        h = header_at(records)
        count = h.records_count
        if (
            h.batch_length + LOG_OVERHEAD == n
            and h.magic == 2
            and not h.attributes & _NOT_PLAIN
            and h.base_offset == 0
            and n <= rules.max_bytes
            and h.last_offset_delta >= 0
            and count == h.last_offset_delta + 1
            and (h.producer_id < 0 or h.base_sequence >= 0)
            and (
                not h.attributes & ATTR_TRANSACTIONAL
                or (transactions_enabled and h.producer_id >= 0)
            )
            and crc32c.crc32c(memoryview(records)[CRC_START:]) == h.crc
        ):
            p = rules.policy
            bad_keys: list[int] = []
            bad_timestamps: list[tuple[int, int, int | None]] = []
            status, pos, _n, _need, max_ts, _consecutive = scan_records(
                records,
                BATCH_HEADER_SIZE,
                n,
                count,
                0,
                h.base_timestamp,
                now_ms,
                p.before_max_ms,
                p.after_max_ms,
                not p.log_append_time,
                p.compacted,
                bad_keys,
                bad_timestamps,
            )
            if (
                status == DONE
                and pos == n
                and not bad_keys
                and not bad_timestamps
                and (p.log_append_time or h.max_timestamp == max_ts)
            ):
                return RecordsAccepted(bytes(records), h)
    return _validate(
        records, topic, partition, rules, produce_version, now_ms, transactions_enabled
    )


def _validate(
    records: bytes,
    topic: Topic,
    partition: int,
    rules: _TopicRules,
    produce_version: int,
    now_ms: int,
    transactions_enabled: bool,
) -> RecordsAccepted | Refused:
    """``validate_for_append`` of any batch, check by check in the table's order."""
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
