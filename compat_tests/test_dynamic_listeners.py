"""Listeners added and removed at runtime with confluent-kafka's admin client
(IncrementalAlterConfigs of ``listeners``/``listener.security.protocol.map`` and the new SASL
listener's ``listener.name.<l>.*`` configs on the broker): stock clients produce through a
PLAINTEXT and a SASL_PLAINTEXT listener added at runtime, Metadata names the new listener's
address, the listeners outlive a ``kill -9``; advertised.listeners is not dynamic, and an
advertised listener cannot be removed (Kafka 4)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from compat_tests._support import EXTERNAL, topic_name
from compat_tests.conftest import _LIVE, BrokerProcess, BrokerStartError, _spawn

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own broker")

TIMEOUT_S = 30
PMAP = "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT,SECURE:SASL_PLAINTEXT"
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="secret";'


@pytest.fixture(scope="module")
def plain_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = _spawn(tmp_path_factory.mktemp("kafkad-dyn-listeners"), "dyn-listeners")
    yield b
    b.stop()
    _LIVE.remove(b)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def alter(admin: AdminClient, node: str, **configs: str) -> None:
    entries = [
        ConfigEntry(n.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
        for n, v in configs.items()
    ]
    resource = ConfigResource(ResourceType.BROKER, node, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT_S)


def produce(bootstrap: str, topic: str, **extra: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, **extra})
    p.produce(topic, b"v")
    assert p.flush(TIMEOUT_S) == 0


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S).close()
    except ConnectionRefusedError:
        return True
    return False


def test_listeners_added_at_runtime_serve_stock_clients(plain_broker: BrokerProcess) -> None:
    first = plain_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": first})
    node = str(admin.list_topics(timeout=TIMEOUT_S).controller_id)
    extra, secure = free_port(), free_port()
    listeners = f"PLAINTEXT://{first},EXTRA://127.0.0.1:{extra},SECURE://127.0.0.1:{secure}"
    configs = {
        "listeners": listeners,
        "listener.security.protocol.map": PMAP,
        "listener.name.secure.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.secure.plain.sasl.jaas.config": JAAS,
    }
    entries = {k.replace(".", "_"): v for k, v in configs.items()}
    alter(admin, node, **entries)
    topic = topic_name("dyn-listeners")
    produce(f"127.0.0.1:{extra}", topic)
    sasl = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "secret",
    }
    produce(f"127.0.0.1:{secure}", topic, **sasl)
    md = AdminClient({"bootstrap.servers": f"127.0.0.1:{extra}"}).list_topics(timeout=TIMEOUT_S)
    assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", extra)]
    plain_broker.kill9()
    try:
        plain_broker.start(port=int(first.rpartition(":")[2]))
    except BrokerStartError:  # the port was taken meanwhile: the test cannot go on
        pytest.skip("the first listener's port was taken during the restart")
    produce(f"127.0.0.1:{extra}", topic)
    produce(f"127.0.0.1:{secure}", topic, **sasl)
    # as Kafka 4: advertised.listeners is not dynamic (KAFKA-18405), and without it every
    # listener is advertised, so none can be removed at runtime
    admin = AdminClient({"bootstrap.servers": plain_broker.bootstrap})
    for change in (
        {"advertised_listeners": f"PLAINTEXT://{plain_broker.bootstrap}"},
        {"listeners": f"PLAINTEXT://{plain_broker.bootstrap}"},
    ):
        with pytest.raises(KafkaException) as info:
            alter(admin, node, **change)
        assert info.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert not refused(extra) and not refused(secure)
    produce(plain_broker.bootstrap, topic)
