"""What the SASL compat tests (``test_sasl.py``, ``test_sasl_oauth_jwt.py``) share: the payloads
they write, a librdkafka consumer that reads them back, the errors of a refused login, and the
OAUTHBEARER producers of kafka-python, aiokafka and kafkajs, each handed its token by the test.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer

from compat_tests.test_kafkajs import run as kafkajs_run

TIMEOUT_S = 30
N = 10


def payloads(tag: str, n: int = N) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


def consume(cfg: dict[str, Any], topic: str, n: int) -> list[bytes]:
    """Up to ``n`` values of ``topic`` from its start, read by librdkafka with ``cfg``."""
    consumer = Consumer(
        {**cfg, "group.id": topic, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def login_errors(cfg: dict[str, Any]) -> list[str]:
    """The errors librdkafka reports (``error_cb``) with ``cfg``, whose login is refused."""
    errors: list[str] = []
    producer = Producer({**cfg, "error_cb": lambda e: errors.append(str(e))})
    with pytest.raises(KafkaException):
        producer.list_topics(timeout=5)
    for _ in range(20):  # error_cb is served by poll
        if errors:
            break
        producer.poll(0.25)
    return errors


def produce_with_python_token_providers(
    bootstrap: str, topic: str, kp_token: Callable[[], str], aio_token: Callable[[], str]
) -> None:
    """``payloads(topic)`` twice over SASL_PLAINTEXT OAUTHBEARER: once by kafka-python, then by
    aiokafka, each client's token provider answering the given function's token."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider as AioTokenProvider
    from kafka import KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Token(AbstractTokenProvider):
        def token(self) -> str:
            return kp_token()

    class AioToken(AioTokenProvider):
        async def token(self) -> str:
            return aio_token()

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=Token(),
    )
    for v in payloads(topic):
        producer.send(topic, v)
    producer.flush(TIMEOUT_S)
    producer.close()

    async def aio() -> None:
        p = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=AioToken(),
        )
        await p.start()
        try:
            for v in payloads(topic):
                await p.send_and_wait(topic, v)
        finally:
            await p.stop()

    asyncio.run(aio())


def kafkajs_send_with_token(bootstrap: str, topic: str, token: str) -> None:
    """kafkajs creates ``topic`` and sends N values ``b"kjs"`` with an OAUTHBEARER token."""
    messages = [{"key": None, "value": "a2pz", "headers": []} for _ in range(N)]  # "kjs"
    kafkajs_run(
        bootstrap,
        {"op": "createTopics", "topics": [{"topic": topic, "numPartitions": 1}]},
        {"op": "send", "topic": topic, "acks": -1, "messages": messages},
        sasl={"mechanism": "oauthbearer", "token": token},
    )
