"""A TLS listener's keystore replaced at runtime with confluent-kafka's admin client
(IncrementalAlterConfigs of ``listener.name.ssl.ssl.keystore.location`` on the broker): new
connections get the new certificate, an open producer carries on, and the change outlives a
``kill -9``."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from compat_tests._support import EXTERNAL, topic_name
from compat_tests.conftest import _LIVE, BrokerProcess, BrokerStartError, _spawn
from compat_tests.test_ssl import _refused_by_broker
from tests.cert_fixtures import cert_dir_fixture

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own SSL broker")

TIMEOUT_S = 30
KEYSTORE = "listener.name.ssl.ssl.keystore.location"


certs = cert_dir_fixture("certs")


renewed = cert_dir_fixture("renewed")


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[BrokerProcess]:
    settings = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs / "server.pem"),
    }
    b = _spawn(tmp_path_factory.mktemp("kafkad-dyn-tls"), "dyn-tls", settings)
    yield b
    b.stop()
    _LIVE.remove(b)


def client(ca: Path) -> dict[str, str]:
    return {"security.protocol": "ssl", "ssl.ca.location": str(ca / "ca.crt")}


def trusts(ca: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca / "ca.crt"))


def test_a_keystore_replaced_at_runtime(
    tls_broker: BrokerProcess, certs: Path, renewed: Path
) -> None:
    bootstrap = tls_broker.bootstrap
    p = Producer({"bootstrap.servers": bootstrap, **client(certs)})
    topic = topic_name("dyn-tls")
    p.produce(topic, b"before")
    assert p.flush(TIMEOUT_S) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap, **client(certs)})
    node = str(admin.list_topics(timeout=TIMEOUT_S).controller_id)
    entry = ConfigEntry(
        KEYSTORE, str(renewed / "server.pem"), incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.BROKER, node, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT_S)
    assert _refused_by_broker(trusts(certs), bootstrap)
    assert not _refused_by_broker(trusts(renewed), bootstrap)
    p.produce(topic, b"after")  # the open connection keeps its session
    assert p.flush(TIMEOUT_S) == 0
    fresh = Producer({"bootstrap.servers": bootstrap, **client(renewed)})
    fresh.produce(topic, b"new")
    assert fresh.flush(TIMEOUT_S) == 0
    tls_broker.kill9()
    try:
        tls_broker.start(port=int(bootstrap.rpartition(":")[2]))
    except BrokerStartError:  # the port was taken meanwhile
        tls_broker.start(port=0)
    assert not _refused_by_broker(trusts(renewed), tls_broker.bootstrap)
    assert _refused_by_broker(trusts(certs), tls_broker.bootstrap)
