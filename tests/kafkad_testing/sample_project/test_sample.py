"""Tests of a project that uses kafkad's fixtures with confluent-kafka."""

import json
import os
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from kafkad.testing import BrokerError

OUT = Path(os.environ.get("SAMPLE_OUT", "."))


def _record(name, broker):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    line = {
        "test": name,
        "worker": worker,
        "bootstrap": broker.bootstrap_servers,
        "pid": broker.pid,
    }
    with open(OUT / f"brokers-{worker}.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")


def test_produce_then_consume(kafkad_broker, kafkad_topic):
    _record("produce_then_consume", kafkad_broker)
    p = Producer({"bootstrap.servers": kafkad_broker.bootstrap_servers})
    for i in range(3):
        p.produce(kafkad_topic, f"v{i}".encode())
    assert p.flush(10) == 0
    c = Consumer(
        {
            "bootstrap.servers": kafkad_broker.bootstrap_servers,
            "group.id": "sample",
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([kafkad_topic])
    values = []
    try:
        while len(values) < 3:
            msg = c.poll(10)
            assert msg is not None, "no record within 10 s"
            assert msg.error() is None, msg.error()
            values.append(msg.value())
    finally:
        c.close()
    assert values == [b"v0", b"v1", b"v2"]


def test_session_configs_from_ini(kafkad_broker):
    _record("session_configs_from_ini", kafkad_broker)
    admin = AdminClient({"bootstrap.servers": kafkad_broker.bootstrap_servers})
    (node_id,) = admin.list_topics(timeout=10).brokers
    resource = ConfigResource(ConfigResource.Type.BROKER, str(node_id))
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["num.partitions"].value == "2"
    assert configs["group.initial.rebalance.delay.ms"].value == "0"


def test_topic_factory(kafkad_broker, kafkad_topic_factory):
    _record("topic_factory", kafkad_broker)
    a = kafkad_topic_factory(partitions=3)
    b = kafkad_topic_factory(configs={"cleanup.policy": "compact"})
    assert a != b
    admin = AdminClient({"bootstrap.servers": kafkad_broker.bootstrap_servers})
    topics = admin.list_topics(timeout=10).topics
    assert len(topics[a].partitions) == 3
    assert len(topics[b].partitions) == 1


@pytest.mark.kafkad("kafkad.fault.injection=create_topics:error=policy_violation")
def test_marker_gets_its_own_broker(kafkad_broker, kafkad_session_broker, kafkad_topic_factory):
    _record("marker", kafkad_broker)
    assert kafkad_broker.bootstrap_servers != kafkad_session_broker.bootstrap_servers
    with pytest.raises(BrokerError, match="error code 44"):
        kafkad_topic_factory()


@pytest.mark.kafkad({"num.partitions": 2}, auto_create_topics_enable=True)
def test_marker_with_the_session_configs_shares_its_broker(kafkad_broker, kafkad_session_broker):
    assert kafkad_broker is kafkad_session_broker


@pytest.mark.parametrize("n", range(4))
def test_spread_over_workers(kafkad_broker, n):
    _record(f"spread{n}", kafkad_broker)


def test_fails_on_purpose(kafkad_topic_factory):
    kafkad_topic_factory(name="deliberately-failing-topic")
    raise AssertionError("this test fails on purpose")
