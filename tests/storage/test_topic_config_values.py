"""Every topic config Kafka 4.2 accepts (LogConfig's ConfigDef), stored and validated as Kafka
validates it: its type (INT, LONG, DOUBLE, BOOLEAN, LIST), its range and Kafka's messages."""

from __future__ import annotations

import pytest

from storage.topic_config import TOPIC_CONFIGS, check_combination, effective_configs
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
    "message.downconversion.enable": "true",
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
    assert set(TOPIC_CONFIGS) == set(KAFKA_4_2_TOPIC_CONFIGS)
    shown = {name: value for name, (value, _) in effective_configs({}, {}).items()}
    assert shown == KAFKA_4_2_TOPIC_CONFIGS


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("leader.replication.throttled.replicas", "0:1,1:1"),
        ("follower.replication.throttled.replicas", "*"),
        ("local.retention.ms", "-2"),
        ("local.retention.bytes", "1000"),
        ("message.downconversion.enable", "false"),
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
        (
            "leader.replication.throttled.replicas",
            "0:x",
            "leader.replication.throttled.replicas must be the literal '*' or a list of "
            "replicas in the following format: [partitionId]:[brokerId],[partitionId]:"
            "[brokerId],...",
        ),
    ],
)
def test_invalid_values_with_kafkas_messages(name: str, value: str, why: str) -> None:
    assert validate({name: value}) == f"Invalid value {value} for configuration {name}: {why}"


def test_remote_storage_needs_tiered_storage_which_kafkad_has_not() -> None:
    assert check_combination({"remote.storage.enable": "true"}, {}) == (
        "Tiered Storage functionality is disabled in the broker. "
        "Topic cannot be configured with remote log storage."
    )
