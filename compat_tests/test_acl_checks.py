"""The checks each request makes once an authorizer is configured, seen from confluent-kafka
(librdkafka) against a kafkad subprocess with Kafka's StandardAuthorizer, a SASL_PLAINTEXT
listener (PLAIN), a super user ``admin`` who grants, and ``alice`` who is granted:

- a transactional producer is refused (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) by
  FindCoordinator without a grant, by InitProducerId with DESCRIBE only, and commits once alice
  may WRITE its transactional id;
- a consumer group is refused (GROUP_AUTHORIZATION_FAILED) until alice may READ the group;
- Metadata leaves out a topic alice may not DESCRIBE, and lists it once she may.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from compat_tests._support import EXTERNAL, topic_name
from compat_tests.test_acls import AclBroker, acl_broker

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(bool(EXTERNAL), reason="starts its own broker with ACLs"),
]

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclBroker]:
    yield from acl_broker(tmp_path_factory, "acl-checks")


def _grant(broker: AclBroker, resource: ResourceType, name: str, op: AclOperation) -> None:
    binding = AclBinding(
        resource,
        name,
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        op,
        AclPermissionType.ALLOW,
    )
    admin = broker.confluent("admin")  # kept alive until its futures are done
    made = admin.create_acls([binding], request_timeout=TIMEOUT_S)
    for fut in made.values():
        fut.result()


def _create_topic(broker: AclBroker, name: str) -> None:
    admin = broker.confluent("admin")
    admin.create_topics([NewTopic(name, 1)], request_timeout=TIMEOUT_S)[name].result()


def test_a_transactional_producer_needs_its_transactional_id(broker: AclBroker) -> None:
    topic, txn_id = topic_name("acl-txn"), topic_name("acl-txn-id")
    _create_topic(broker, topic)
    _grant(broker, ResourceType.TOPIC, topic, AclOperation.WRITE)
    config = {**broker.config("alice"), "transactional.id": txn_id}
    # no grant: FindCoordinator refuses it; DESCRIBE only: InitProducerId does (it needs WRITE)
    for grant in (None, AclOperation.DESCRIBE):
        if grant is not None:
            _grant(broker, ResourceType.TRANSACTIONAL_ID, txn_id, grant)
        refused = Producer(config)
        with pytest.raises(KafkaException) as err:
            refused.init_transactions(TIMEOUT_S)
        assert err.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        del refused

    _grant(broker, ResourceType.TRANSACTIONAL_ID, txn_id, AclOperation.WRITE)
    producer = Producer(config)
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"granted")
    producer.commit_transaction(TIMEOUT_S)

    reader = Consumer(
        {
            **broker.config("admin"),
            "group.id": topic_name("acl-txn-reader"),
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    reader.subscribe([topic])
    try:
        msg = _first_message(reader)
        assert msg.value() == b"granted"
    finally:
        reader.close()


def _first_message(consumer: Consumer) -> Any:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            return msg
    raise AssertionError("no message")


def test_a_consumer_group_needs_read_on_the_group(broker: AclBroker) -> None:
    topic, group = topic_name("acl-group"), topic_name("acl-group-g")
    _create_topic(broker, topic)
    producer = Producer(broker.config("admin"))
    producer.produce(topic, b"hello")
    producer.flush(TIMEOUT_S)
    _grant(broker, ResourceType.TOPIC, topic, AclOperation.READ)
    config = {
        **broker.config("alice"),
        "group.id": group,
        "auto.offset.reset": "earliest",
    }
    refused = Consumer(config)
    refused.subscribe([topic])
    try:
        deadline = time.monotonic() + TIMEOUT_S
        seen = None
        while seen is None and time.monotonic() < deadline:
            msg = refused.poll(0.5)
            if msg is not None and msg.error() is not None:
                seen = msg.error().code()
            assert msg is None or msg.error() is not None, "consumed without a group grant"
        assert seen == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        refused.close()

    _grant(broker, ResourceType.GROUP, group, AclOperation.READ)
    consumer = Consumer(config)
    consumer.subscribe([topic])
    try:
        assert _first_message(consumer).value() == b"hello"
    finally:
        consumer.close()


def test_metadata_leaves_out_a_topic_alice_may_not_describe(broker: AclBroker) -> None:
    topic = topic_name("acl-hidden")
    _create_topic(broker, topic)
    alice = broker.confluent("alice")
    assert topic not in alice.list_topics(timeout=TIMEOUT_S).topics
    _grant(broker, ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
    assert topic in alice.list_topics(timeout=TIMEOUT_S).topics
