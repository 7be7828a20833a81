"""Every topic config Kafka 4.2 accepts (LogConfig's ConfigDef), stored and validated as Kafka
validates it: its type (INT, LONG, DOUBLE, BOOLEAN, LIST), its range and Kafka's messages."""

from __future__ import annotations

import pytest

from storage.api import LogConfig
from storage.topic_config import (
    TOPIC_CONFIG_TYPES,
    TOPIC_CONFIGS,
    check_combination,
    effective_configs,
    topic_log_config,
)
from storage.topic_config import validate_overrides as validate

KAFKA_4_2_TOPIC_CONFIGS = {
    "cleanup.policy": "delete",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.type": "producer",
    "compression.zstd.level": "3",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": str(2**63 - 1),
    "flush.ms": str(2**63 - 1),
    "follower.replication.throttled.replicas": "",
    "index.interval.bytes": "4096",
    "leader.replication.throttled.replicas": "",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "max.compaction.lag.ms": str(2**63 - 1),
    "max.message.bytes": "1048588",
    "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": str(2**63 - 1),
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
}


def test_every_kafka_topic_config_is_known_with_its_default() -> None:
    # and LogConfig's one internal config (defineInternal), listed only where a topic sets it
    assert set(TOPIC_CONFIGS) == {*KAFKA_4_2_TOPIC_CONFIGS, "internal.segment.bytes"}
    shown = {name: value for name, (value, _) in effective_configs({}, {}).items()}
    assert shown == KAFKA_4_2_TOPIC_CONFIGS


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("leader.replication.throttled.replicas", "0:1,1:1"),
        ("follower.replication.throttled.replicas", "*"),
        ("local.retention.ms", "-2"),
        ("local.retention.bytes", "1000"),
        ("remote.log.copy.disable", "true"),
        ("remote.log.delete.on.disable", "TRUE"),
        ("remote.storage.enable", "false"),
        ("retention.ms", "-1"),
        ("retention.bytes", "-5"),
        ("preallocate", "True"),
        ("max.message.bytes", "2147483647"),
    ],
)
def test_valid_values(name: str, value: str) -> None:
    assert validate({name: value}) is None


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("retention.ms", "-2", "Value must be at least -1"),
        ("retention.ms", "abc", "Not a number of type LONG"),
        ("retention.bytes", str(2**63), "Not a number of type LONG"),
        ("max.message.bytes", "2147483648", "Not a number of type INT"),
        ("max.message.bytes", "-1", "Value must be at least 0"),
        ("segment.index.bytes", "3", "Value must be at least 4"),
        ("index.interval.bytes", "-1", "Value must be at least 0"),
        ("segment.jitter.ms", "-1", "Value must be at least 0"),
        ("message.timestamp.before.max.ms", "-1", "Value must be at least 0"),
        ("message.timestamp.after.max.ms", "-1", "Value must be at least 0"),
        ("min.insync.replicas", "0", "Value must be at least 1"),
        ("local.retention.ms", "-3", "Value must be at least -2"),
        ("local.retention.bytes", "-3", "Value must be at least -2"),
        ("min.cleanable.dirty.ratio", "x", "Not a number of type DOUBLE"),
        ("preallocate", "yes", "Expected value to be either true or false"),
    ],
)
def test_invalid_values_with_kafkas_messages(name: str, value: str, why: str) -> None:
    assert validate({name: value}) == f"Invalid value {value} for configuration {name}: {why}"


def test_remote_storage_needs_tiered_storage_which_kafkad_has_not() -> None:
    assert check_combination({"remote.storage.enable": "true"}, {}) == (
        "Tiered Storage functionality is disabled in the broker. "
        "Topic cannot be configured with remote log storage."
    )


def test_message_downconversion_enable_is_gone_in_kafka_4() -> None:
    # Kafka 4.2's LogConfig no longer defines it (only TopicConfig's deprecated constant)
    assert "message.downconversion.enable" not in TOPIC_CONFIGS
    assert validate({"message.downconversion.enable": "true"}) == (
        "Unknown topic config name: message.downconversion.enable"
    )


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        # Kafka 4.2: segment.bytes is atLeast(1024 * 1024)
        (
            "segment.bytes",
            "100",
            "Invalid value 100 for configuration segment.bytes: Value must be at least 1048576",
        ),
        # the INT parse comes before the level validator
        (
            "compression.gzip.level",
            "x",
            "Invalid value x for configuration compression.gzip.level: Not a number of type INT",
        ),
        (
            "compression.zstd.level",
            "1.5",
            "Invalid value 1.5 for configuration compression.zstd.level: Not a number of type INT",
        ),
        # ValidString
        (
            "compression.type",
            "brotli",
            "Invalid value brotli for configuration "
            "compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, "
            "producer",
        ),
        (
            "message.timestamp.type",
            "Now",
            "Invalid value Now for configuration "
            "message.timestamp.type: String must be one of: CreateTime, LogAppendTime",
        ),
        # ValidList.in(compact, delete): each item, duplicates, empty items
        (
            "cleanup.policy",
            "compact, shrink",
            "Invalid value shrink for configuration "
            "cleanup.policy: String must be one of: compact, delete",
        ),
        (
            "cleanup.policy",
            "delete,delete",
            "Configuration 'cleanup.policy' values must not be duplicated.",
        ),
        ("cleanup.policy", "delete,", "Configuration 'cleanup.policy' values must not be empty."),
        # ThrottledReplicaListValidator: the value shown is the parsed list
        (
            "leader.replication.throttled.replicas",
            "0:1, 1:x",
            "Invalid value [0:1, 1:x] for "
            "configuration leader.replication.throttled.replicas: leader.replication.throttled."
            "replicas must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
        ),
    ],
)
def test_kafka_4_2_messages(name: str, value: str, message: str) -> None:
    assert validate({name: value}) == message


def test_an_empty_cleanup_policy_is_valid_in_kafka_4_2() -> None:
    # ValidList.in allows an empty list: neither compacted nor deleted by retention
    assert validate({"cleanup.policy": ""}) is None
    assert validate({"cleanup.policy": " "}) is None


def test_incremental_append_and_subtract_work_on_every_list_config() -> None:
    from storage.topic_config import APPEND, SUBTRACT, incremental_overrides

    got = incremental_overrides(
        {}, [("leader.replication.throttled.replicas", APPEND, "0:1,1:1")], {}
    )
    assert got == {"leader.replication.throttled.replicas": "0:1,1:1"}
    got = incremental_overrides(
        {"follower.replication.throttled.replicas": "0:1,1:1"},
        [("follower.replication.throttled.replicas", SUBTRACT, "0:1")],
        {},
    )
    assert got == {"follower.replication.throttled.replicas": "1:1"}
    # Kafka 4.2 allows an empty cleanup.policy, so subtracting its last item is fine
    got = incremental_overrides({}, [("cleanup.policy", SUBTRACT, "delete")], {})
    assert got == {"cleanup.policy": ""}
    # the KRaft controller's message (ConfigurationControlManager)
    assert incremental_overrides({}, [("retention.ms", APPEND, "1")], {}) == (
        "invalid_config",
        "Can't APPEND to key retention.ms because its type is not LIST.",
    )


def test_internal_segment_bytes_sets_a_segment_size_below_segment_bytes_minimum() -> None:
    # Kafka 4.2's LogConfig: segment.bytes is atLeast(1 MiB); internal.segment.bytes (INT, no
    # default, no validator, "for testing only") replaces it as segmentSize() when set
    assert validate({"segment.bytes": "1048575"}) == (
        "Invalid value 1048575 for configuration segment.bytes: Value must be at least 1048576"
    )
    assert validate({"internal.segment.bytes": "400"}) is None
    assert validate({"internal.segment.bytes": "x"}) == (
        "Invalid value x for configuration internal.segment.bytes: Not a number of type INT"
    )
    assert TOPIC_CONFIG_TYPES["internal.segment.bytes"] == 3  # INT
    base = LogConfig(segment_bytes=1 << 30)
    cfg = topic_log_config(base, {"internal.segment.bytes": "400", "segment.bytes": "2097152"})
    assert cfg.segment_bytes == 400
    assert topic_log_config(base, {"segment.bytes": "2097152"}).segment_bytes == 2097152
    # shown (DescribeConfigs, CreateTopics' configs) only where set
    assert "internal.segment.bytes" not in effective_configs({}, {})
    shown = effective_configs({"internal.segment.bytes": "400"}, {})
    assert shown["internal.segment.bytes"] == ("400", True)
