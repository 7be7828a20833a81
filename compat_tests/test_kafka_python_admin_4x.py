"""kafka-python 3.x's admin client on the Kafka 4.x admin APIs: describe_metadata_quorum
(DescribeQuorum v2), list_config_resources (ListConfigResources v1), list_transactions with a
transactional-id pattern (ListTransactions v2)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaProducer

from compat_tests._support import topic_name


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="compat-kpy-4x")
    yield client
    client.close()


def test_describe_metadata_quorum(admin: KafkaAdminClient, bootstrap: str) -> None:
    quorum = admin.describe_metadata_quorum()  # errors are raised, not returned
    [topic] = quorum["topics"]
    [part] = topic["partitions"]
    node = part["leader_id"]
    assert (topic["topic_name"], part["partition_index"], part["leader_epoch"]) == (
        "__cluster_metadata",
        0,
        1,
    )
    assert part["high_watermark"] == -1  # kafkad has no metadata log
    assert [(v["replica_id"], v["log_end_offset"]) for v in part["current_voters"]] == [(node, -1)]
    assert part["observers"] == []
    port = int(bootstrap.rsplit(":", 1)[1])
    assert [(n["node_id"], [lst["port"] for lst in n["listeners"]]) for n in quorum["nodes"]] == [
        (node, [port])
    ]


def test_list_config_resources(admin: KafkaAdminClient) -> None:
    name = topic_name("kpy-lcr")
    admin.create_topics({name: {"num_partitions": 1, "replication_factor": 1}})
    every = admin.list_config_resources()
    assert name in every["topic"]
    assert len(every["broker"]) == 1
    assert set(every) == {"topic", "broker"}  # no client metrics, group or logger resources
    assert admin.list_config_resources(["BROKER"]) == {"broker": every["broker"]}


def test_list_transactions_by_pattern(admin: KafkaAdminClient, bootstrap: str) -> None:
    prefix = topic_name("kpy-ltp")
    for suffix in ("a", "b"):
        producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{prefix}-{suffix}")
        producer.init_transactions()
        producer.close()
    listed = admin.list_transactions(transactional_id_pattern=f"{prefix}-.*")
    ids = sorted(t.transactional_id for ts in listed.values() for t in ts)
    assert ids == [f"{prefix}-a", f"{prefix}-b"]
    listed = admin.list_transactions(transactional_id_pattern=prefix)  # the whole id must match
    assert [t for ts in listed.values() for t in ts] == []
