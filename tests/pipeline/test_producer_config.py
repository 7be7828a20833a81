"""The sink's producer settings (no Spark, no broker)."""

from __future__ import annotations

from pipeline.kafka_io import TRANSACTION_TIMEOUT_MS, producer_config
from pipeline.options import parse_write_options

BS = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t"}


def test_defaults_murmur2_and_a_task_sized_transaction_timeout() -> None:
    config = producer_config(parse_write_options(BS), "tid")
    assert config["partitioner"] == "murmur2_random"  # the Java client's for keyed records
    assert config["transaction.timeout.ms"] == TRANSACTION_TIMEOUT_MS == 15 * 60 * 1000
    assert config["transactional.id"] == "tid"


def test_kafka_options_override_the_defaults() -> None:
    opts = parse_write_options(
        {**BS, "kafka.transaction.timeout.ms": "120000", "kafka.partitioner": "consistent"}
    )
    config = producer_config(opts, "tid")
    assert (config["transaction.timeout.ms"], config["partitioner"]) == ("120000", "consistent")
