"""Client quotas with a stock client (issue 15.7): kafka-python's own AlterClientQuotas and
DescribeClientQuotas messages sent through its KafkaAdminClient (neither confluent-kafka 2.16
nor kafka-python 3 has admin methods for them; kafkajs and aiokafka neither), and the quotas
across a ``kill -9`` of a real broker."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

from compat_tests._support import EXTERNAL, topic_name
from compat_tests.conftest import BrokerProcess

pytestmark = pytest.mark.timeout(120)

NONE, INVALID_REQUEST = 0, 42
EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def send(admin: KafkaAdminClient, request: Any) -> Any:
    return admin._manager.run(admin._manager.send, request)


def alter(
    admin: KafkaAdminClient,
    entity: list[tuple[str, str | None]],
    ops: list[tuple[str, float | None]],
    validate_only: bool = False,
) -> list[tuple[int, str | None, dict[str, str | None]]]:
    resp = send(
        admin,
        AlterClientQuotasRequest(
            entries=[(entity, [(k, 0.0 if v is None else v, v is None) for k, v in ops])],
            validate_only=validate_only,
        ),
    )
    return [
        (e.error_code, e.error_message, {x.entity_type: x.entity_name for x in e.entity})
        for e in resp.entries
    ]


def describe(
    admin: KafkaAdminClient, components: list[tuple[str, int, str | None]], strict: bool = False
) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    resp = send(admin, DescribeClientQuotasRequest(components=components, strict=strict))
    assert (resp.error_code, resp.error_message) == (NONE, None)
    return {
        tuple(sorted((x.entity_type, x.entity_name) for x in entry.entity)): {
            v.key: v.value for v in entry.values
        }
        for entry in resp.entries
    }


def test_kafka_python_alter_and_describe(bootstrap: str) -> None:
    user, client = topic_name("quser"), topic_name("qclient")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        entity = [("user", user), ("client-id", client)]
        assert alter(
            admin, entity, [("producer_byte_rate", 1024.0), ("request_percentage", 12.5)]
        ) == [(NONE, None, {"user": user, "client-id": client})]
        assert alter(admin, [("user", user)], [("consumer_byte_rate", 2048.0)]) == [
            (NONE, None, {"user": user})
        ]
        assert describe(admin, [("user", EXACT, user)]) == {
            (("client-id", client), ("user", user)): {
                "producer_byte_rate": 1024.0,
                "request_percentage": 12.5,
            },
            (("user", user),): {"consumer_byte_rate": 2048.0},
        }
        assert describe(admin, [("user", EXACT, user)], strict=True) == {
            (("user", user),): {"consumer_byte_rate": 2048.0}
        }
        assert alter(admin, [("user", user)], [("consumer_byte_rate", 1.5)]) == [
            (INVALID_REQUEST, "consumer_byte_rate cannot be a fractional value.", {"user": user})
        ]
        assert alter(admin, [("user", user)], [("connection_creation_rate", 5.0)]) == [
            (INVALID_REQUEST, "Invalid configuration key connection_creation_rate", {"user": user})
        ]
        assert (
            alter(admin, [("user", user)], [("consumer_byte_rate", 99.0)], validate_only=True)[0][0]
            == NONE
        )
        assert describe(admin, [("user", EXACT, user)], strict=True) == {
            (("user", user),): {"consumer_byte_rate": 2048.0}
        }
        alter(admin, [("user", user)], [("consumer_byte_rate", None)])
        alter(admin, entity, [("producer_byte_rate", None), ("request_percentage", None)])
        assert describe(admin, [("user", EXACT, user)]) == {}
    finally:
        admin.close()


@pytest.mark.skipif(EXTERNAL, reason="kills the broker")
def test_quotas_survive_kill9(own_broker: BrokerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=own_broker.bootstrap)
    try:
        assert alter(admin, [("user", None)], [("producer_byte_rate", 4096.0)])[0][0] == NONE
        assert (
            alter(admin, [("ip", "127.0.0.1")], [("connection_creation_rate", 10.0)])[0][0] == NONE
        )
    finally:
        admin.close()
    own_broker.kill9()
    own_broker.restart()
    admin = KafkaAdminClient(bootstrap_servers=own_broker.bootstrap)
    try:
        assert describe(admin, [("user", DEFAULT, None)]) == {
            (("user", None),): {"producer_byte_rate": 4096.0}
        }
        assert describe(admin, [("ip", SPECIFIED, None)]) == {
            (("ip", "127.0.0.1"),): {"connection_creation_rate": 10.0}
        }
    finally:
        admin.close()


def test_confluent_producer_is_throttled(bootstrap: str) -> None:
    """librdkafka reports the broker's throttle time (``throttle_cb``) for a client id whose
    producer_byte_rate it exceeds: 200 KB in the first second against 10 KB/s (the first
    window counts as 10 s: 20 KB/s, throttled (20 - 10) / 10 * 10 s = 10 s)."""
    from confluent_kafka import Producer

    from compat_tests.txn_support import create

    topic = create(bootstrap, topic_name("quota-produce"), 1)
    client_id = topic_name("throttled")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    entity = [("client-id", client_id)]
    throttles: list[float] = []
    try:
        assert alter(admin, entity, [("producer_byte_rate", 10_000.0)])[0][0] == NONE
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "linger.ms": 50,
                "throttle_cb": lambda event: throttles.append(event.throttle_time),
            }
        )
        for _ in range(200):
            producer.produce(topic, b"x" * 1000, partition=0)
        assert producer.flush(60) == 0
        for _ in range(20):
            if throttles:
                break
            producer.poll(0.5)
        assert throttles and max(throttles) > 1.0, throttles
    finally:
        alter(admin, entity, [("producer_byte_rate", None)])
        admin.close()


def test_confluent_producer_is_throttled_by_a_request_quota(bootstrap: str) -> None:
    """request_percentage (Kafka's ClientRequestQuotaManager): a client id allowed a
    vanishing share of the broker's time is throttled on its requests, for at most one window
    (quota.window.size.seconds, 1 s), and librdkafka reports it (``throttle_cb``); its records
    are still written."""
    from confluent_kafka import Producer

    from compat_tests.txn_support import create

    topic = create(bootstrap, topic_name("quota-request"), 1)
    client_id = topic_name("request-throttled")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    entity = [("client-id", client_id)]
    throttles: list[float] = []
    try:
        assert alter(admin, entity, [("request_percentage", 1e-9)])[0][0] == NONE
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "throttle_cb": lambda event: throttles.append(event.throttle_time),
            }
        )
        for _ in range(5):
            producer.produce(topic, b"x", partition=0)
            assert producer.flush(30) == 0
        for _ in range(20):
            if throttles:
                break
            producer.poll(0.5)
        assert throttles and 0 < max(throttles) <= 1.0, throttles
    finally:
        alter(admin, entity, [("request_percentage", None)])
        admin.close()
