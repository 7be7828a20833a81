"""Dynamic broker configs through confluent-kafka's AdminClient (issue 15 point 6):
incremental_alter_configs on the BROKER resource (the node id: librdkafka refuses an empty
resource name, so the cluster default "" is covered by tests/proxy/test_dynamic_broker_configs.py),
describe_configs showing the source and read-only flags, Kafka's refusal of a read-only config, and
the values kept across a kill -9 and restart."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)

from compat_tests._support import EXTERNAL
from compat_tests.conftest import BrokerProcess

pytestmark = pytest.mark.timeout(120)
TIMEOUT_S = 30
SET = AlterConfigOpType.SET


def _alter(admin: AdminClient, name: str, *entries: ConfigEntry) -> None:
    (future,) = admin.incremental_alter_configs(
        [ConfigResource("broker", name, incremental_configs=list(entries))]
    ).values()
    future.result(TIMEOUT_S)


def _describe(admin: AdminClient, name: str) -> dict[str, ConfigEntry]:
    (future,) = admin.describe_configs([ConfigResource("broker", name)]).values()
    return future.result(TIMEOUT_S)


def _node_id(admin: AdminClient) -> str:
    return str(admin.list_topics(timeout=TIMEOUT_S).brokers.popitem()[0])


@pytest.mark.skipif(EXTERNAL, reason="kills the broker")
def test_broker_configs_altered_described_and_kept(own_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": own_broker.bootstrap})
    node = _node_id(admin)
    _alter(
        admin,
        node,
        ConfigEntry("log.retention.ms", "5000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("log.retention.bytes", "12345", incremental_operation=AlterConfigOpType.SET),
    )
    own = _describe(admin, node)
    assert own["log.retention.ms"].value == "5000"
    assert own["log.retention.bytes"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert not own["log.retention.bytes"].is_read_only
    assert own["auto.create.topics.enable"].is_read_only
    with pytest.raises(KafkaException, match="Cannot update these configs dynamically"):
        _alter(
            admin,
            node,
            ConfigEntry(
                "auto.create.topics.enable", "false", incremental_operation=AlterConfigOpType.SET
            ),
        )
    own_broker.kill9()
    own_broker.restart()
    admin = AdminClient({"bootstrap.servers": own_broker.bootstrap})
    own = _describe(admin, node)
    assert own["log.retention.ms"].value == "5000"
    assert own["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert own["log.retention.bytes"].value == "12345"


@pytest.mark.skipif(EXTERNAL, reason="changes the broker's configs")
def test_connection_quotas_altered_and_refused_as_kafka(own_broker: BrokerProcess) -> None:
    """Connection quotas (proxy/connection_quotas.py) through a stock AdminClient: dynamic,
    described with their source, refused with Kafka's texts; the behaviour itself is covered over
    real sockets in tests/proxy/test_connection_quotas.py."""
    admin = AdminClient({"bootstrap.servers": own_broker.bootstrap})
    node = _node_id(admin)
    before = _describe(admin, node)
    assert before["max.connections"].value == "2147483647"
    assert not before["max.connections.per.ip.overrides"].is_read_only
    with pytest.raises(KafkaException, match="can be set to zero only if"):
        _alter(
            admin,
            node,
            ConfigEntry("max.connections.per.ip", "0", incremental_operation=AlterConfigOpType.SET),
        )
    with pytest.raises(KafkaException, match=r"Invalid max\.connections 0"):
        _alter(
            admin,
            node,
            ConfigEntry("max.connections", "0", incremental_operation=AlterConfigOpType.SET),
        )
    rate = "listener.name.plaintext.max.connection.creation.rate"
    _alter(admin, node, ConfigEntry(rate, "1000", incremental_operation=AlterConfigOpType.SET))
    own = _describe(admin, node)
    assert own[rate].value == "1000"
    assert own[rate].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    _alter(admin, node, ConfigEntry(rate, None, incremental_operation=AlterConfigOpType.DELETE))
    assert rate not in _describe(admin, node)


def test_static_configs_described_as_a_kafka_node_shows_them(bootstrap: str) -> None:
    """What the command line and server.properties set, as Kafka 4.2 shows a server.properties
    that sets it (STATIC_BROKER_CONFIG); a config whose default is null, null."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    own = _describe(admin, _node_id(admin))
    static = ConfigSource.STATIC_BROKER_CONFIG.value
    for name in ("listeners", "log.dirs", "node.id", "process.roles"):
        assert own[name].source == static, name
        assert own[name].is_read_only == (name != "listeners"), name
    assert own["listeners"].value.startswith("PLAINTEXT://")
    assert own["node.id"].value == _node_id(admin)
    for name in ("log.retention.ms", "log.roll.ms", "log.flush.interval.ms"):
        entry = own[name]
        assert (entry.value, entry.source) == (None, ConfigSource.DEFAULT_CONFIG.value), name
    assert own["log.retention.hours"].value == "168"
    assert own["log.dir"].source == ConfigSource.DEFAULT_CONFIG.value


@pytest.mark.skipif(EXTERNAL, reason="changes the broker's configs")
def test_every_kafka_config_listed_and_kafkas_dynamic_ones_kept(own_broker: BrokerProcess) -> None:
    """Kafka 4.2's configs kafkad has no use for: listed at Kafka's default, the dynamic ones
    (num.io.threads) altered and kept across a kill -9, the read-only ones refused."""
    admin = AdminClient({"bootstrap.servers": own_broker.bootstrap})
    node = _node_id(admin)
    own = _describe(admin, node)
    assert len(own) >= 330  # Kafka 4.2 lists about 330 configs of a broker
    for name, value, read_only in (
        ("num.io.threads", "8", False),
        ("num.network.threads", "3", False),
        ("queued.max.requests", "500", True),
        ("replica.fetch.max.bytes", "1048576", True),
    ):
        e = own[name]
        assert (e.value, e.is_read_only, e.source) == (
            value,
            read_only,
            ConfigSource.DEFAULT_CONFIG.value,
        ), name
    _alter(admin, node, ConfigEntry("num.io.threads", "12", incremental_operation=SET))
    with pytest.raises(KafkaException, match=r"Cannot update these configs dynamically"):
        _alter(admin, node, ConfigEntry("queued.max.requests", "7", incremental_operation=SET))
    own_broker.kill9()
    own_broker.restart()
    admin = AdminClient({"bootstrap.servers": own_broker.bootstrap})
    e = _describe(admin, node)["num.io.threads"]
    assert (e.value, e.source) == ("12", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
