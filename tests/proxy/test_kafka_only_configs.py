"""Issue 15 point 6: DescribeConfigs BROKER lists every config Kafka 4.2's KafkaConfig defines,
those kafkad has no use for (proxy/kafka_only_configs.py) at Kafka's default with Kafka's type
and read-only flag; the ones Kafka changes at runtime are altered, stored and kept across a
restart; the others are refused as Kafka refuses them; a server.properties may set them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import trio
from kio.schema.errors import ErrorCode

from proxy.kafka_only_configs import INTERNAL, KAFKA_ONLY_CONFIGS
from proxy.kafka_only_docs import DOCS
from proxy.properties_file import ConfigError
from proxy.server import Server
from tests.proxy.harness import broker_config, connect, running_broker
from tests.proxy.test_broker_config_sources import broker_from, shown
from tests.proxy.test_dynamic_broker_configs import (
    BOOLEAN,
    DEFAULT,
    DOUBLE,
    DYNAMIC_BROKER,
    DYNAMIC_DEFAULT,
    INT,
    LIST,
    LONG,
    PASSWORD,
    SET,
    STATIC,
    STRING,
    alter,
    describe,
)

SHORT, CLASS = 4, 8
LONG_MAX = str(2**63 - 1)

# name -> (type, Kafka 4.2's default as DescribeConfigs shows it, read_only)
SAMPLE = {
    "num.network.threads": (INT, "3", False),
    "num.io.threads": (INT, "8", False),
    "background.threads": (INT, "10", False),
    "num.replica.fetchers": (INT, "1", False),
    "num.recovery.threads.per.data.dir": (INT, "2", False),
    "log.cleaner.threads": (INT, "1", False),
    "log.cleaner.io.buffer.load.factor": (DOUBLE, "0.9", False),
    "log.roll.jitter.hours": (INT, "0", True),
    "log.roll.jitter.ms": (LONG, None, False),
    "log.preallocate": (BOOLEAN, "false", False),
    "unclean.leader.election.enable": (BOOLEAN, "false", False),
    "queued.max.requests": (INT, "500", True),
    "replica.fetch.max.bytes": (INT, "1048576", True),
    "replica.lag.time.max.ms": (LONG, "30000", True),
    "offsets.topic.replication.factor": (SHORT, "3", True),
    "metric.reporters": (LIST, "org.apache.kafka.common.metrics.JmxReporter", False),
    "metrics.recording.level": (STRING, "INFO", True),
    "remote.log.storage.system.enable": (BOOLEAN, "false", True),
    "remote.log.reader.threads": (INT, "10", False),
    "share.coordinator.state.topic.num.partitions": (INT, "50", True),
    "group.share.max.size": (INT, "200", True),
    "principal.builder.class": (
        CLASS,
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
        True,  # Kafka: dynamic per broker; kafkad refuses its unprefixed security configs
    ),
    "sasl.kerberos.ticket.renew.window.factor": (DOUBLE, "0.8", True),
    "broker.rack": (STRING, None, True),
    "inter.broker.listener.name": (STRING, None, True),  # kafkad: PLAINTEXT, unset
    "request.timeout.ms": (INT, "30000", True),
    "socket.send.buffer.bytes": (INT, "102400", True),
    "transaction.partition.verification.enable": (BOOLEAN, "true", False),
    "sasl.oauthbearer.client.credentials.client.secret": (PASSWORD, None, True),
}


async def test_every_kafka_config_is_described_with_kafkas_type_default_and_read_only() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        own = await describe(c, 4, str(server.broker.node_id))
        for name, (kind, default, read_only) in SAMPLE.items():
            e = own[name]
            hidden = kind == PASSWORD
            assert (e.config_type, e.value, e.read_only, e.is_sensitive) == (
                kind,
                None if hidden else default,
                read_only,
                hidden,
            ), name
            assert e.config_source == DEFAULT, name
            assert shown(e)[2] == ([] if default is None else [(name, default, DEFAULT)]), name
        # their ConfigDef documentation's first sentence (v3+)
        assert own["broker.rack"].documentation == "Rack of the broker."
        assert own["num.io.threads"].documentation == (
            "The number of threads that the server uses for processing requests, which may "
            "include disk I/O"
        )
        assert set(KAFKA_ONLY_CONFIGS) - INTERNAL <= set(own)
        assert not INTERNAL & set(own)  # Kafka's internal configs: only when set
        assert "unstable.api.versions.enable" not in own


async def test_kafkas_dynamic_configs_are_stored_and_survive_a_restart(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    async with running_broker(data) as (server, port), connect(port) as c:
        node = str(server.broker.node_id)
        assert await alter(c, "", ("num.io.threads", SET, "16")) == (ErrorCode.none, None)
        assert await alter(c, node, ("num.network.threads", SET, "5")) == (ErrorCode.none, None)
        assert await alter(c, node, ("log.preallocate", SET, "TRUE")) == (ErrorCode.none, None)
        assert await alter(c, "", ("num.io.threads", SET, "0")) == (
            ErrorCode.invalid_request,
            "Invalid value 0 for configuration num.io.threads: Value must be at least 1",
        )
        assert await alter(c, node, ("num.network.threads", SET, "x")) == (
            ErrorCode.invalid_request,
            "Invalid value x for configuration num.network.threads: Not a number of type INT",
        )
    async with running_broker(data) as (server, port), connect(port) as c:
        own = await describe(c, 4, node)
        assert shown(own["num.io.threads"]) == (
            "16",
            DYNAMIC_DEFAULT,
            [("num.io.threads", "16", DYNAMIC_DEFAULT), ("num.io.threads", "8", DEFAULT)],
        )
        assert shown(own["num.network.threads"]) == (
            "5",
            DYNAMIC_BROKER,
            [("num.network.threads", "5", DYNAMIC_BROKER), ("num.network.threads", "3", DEFAULT)],
        )
        assert shown(own["log.preallocate"]) == (  # Kafka's value parsed, its synonym as stored
            "true",
            DYNAMIC_BROKER,
            [("log.preallocate", "TRUE", DYNAMIC_BROKER), ("log.preallocate", "false", DEFAULT)],
        )
        cluster = await describe(c, 4, "")
        assert shown(cluster["num.io.threads"]) == (
            "16",
            DYNAMIC_DEFAULT,
            [("num.io.threads", "16", DYNAMIC_DEFAULT)],
        )


async def test_kafkas_read_only_configs_are_refused() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        node = str(server.broker.node_id)
        for resource in ("", node):
            for name, value in (("replica.fetch.max.bytes", "2097152"), ("broker.rack", "r1")):
                assert await alter(c, resource, (name, SET, value)) == (
                    ErrorCode.invalid_request,
                    f"Cannot update these configs dynamically: Set({name})",
                )
        assert "replica.fetch.max.bytes" not in server.broker.dynamic.layer(node)


async def test_a_server_properties_sets_them_shown_static(tmp_path: Path) -> None:
    props = "num.network.threads=3\nnum.io.threads=4\nreplica.fetch.max.bytes=2097152\n"
    props += "unstable.api.versions.enable=false\n"
    async with broker_from(tmp_path, props) as (server, port), connect(port) as c:
        own = await describe(c, 4, str(server.broker.node_id))
        assert shown(own["num.network.threads"]) == (
            "3",
            STATIC,
            [("num.network.threads", "3", STATIC), ("num.network.threads", "3", DEFAULT)],
        )
        assert shown(own["num.io.threads"])[:2] == ("4", STATIC)
        assert shown(own["replica.fetch.max.bytes"])[:2] == ("2097152", STATIC)
        e = own["unstable.api.versions.enable"]  # internal: listed once set
        assert (e.value, e.config_source, e.config_type) == ("false", STATIC, BOOLEAN)


def _start_error(path: Path) -> pytest.ExceptionInfo[ConfigError]:
    """The ConfigError of a start from the config file at ``path``."""
    with pytest.raises(ConfigError) as info:
        broker_config(listen=None, data_dir=None, config_file=str(path))
    return info


def test_a_bad_value_for_one_is_refused_at_start_up(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "num.io.threads=0\nreplica.lag.time.max.ms=soon\n"
        "controller.quorum.request.timeout.ms=-1\ncontroller.quorum.retry.backoff.ms=-5\n"
    )
    info = _start_error(path)
    message = str(info.value)
    assert f"num.io.threads=0 from config file {path}: must be at least 1" in message
    assert (
        f"replica.lag.time.max.ms=soon from config file {path}: must be a whole number" in message
    )
    for name, value in (("request.timeout.ms", "-1"), ("retry.backoff.ms", "-5")):  # atLeast(0)
        assert (
            f"controller.quorum.{name}={value} from config file {path}: must be at least 0"
        ) in message


async def test_a_thread_count_stays_within_half_and_double_its_current_value() -> None:
    """Kafka's DynamicThreadPool / SocketServer checks, in processReconfiguration's words."""

    def refused(why: str) -> tuple[ErrorCode, str]:
        return (
            ErrorCode.invalid_request,
            "Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread count "
            f"update validation failed for {why} for configuration Invalid dynamic configuration",
        )

    async with running_broker() as (server, port), connect(port) as c:
        node = str(server.broker.node_id)
        assert await alter(c, "", ("num.io.threads", SET, "17")) == refused(
            "num.io.threads=17, value should not be greater than double the current value 8"
        )
        assert await alter(c, node, ("background.threads", SET, "4")) == refused(
            "background.threads=4, value should be at least half the current value 10"
        )
        assert await alter(c, node, ("num.network.threads", SET, "6")) == (ErrorCode.none, None)
        assert await alter(c, "", ("num.network.threads", SET, "13")) == (ErrorCode.none, None)
        assert await alter(c, node, ("num.network.threads", SET, "13")) == refused(
            "num.network.threads=13, value should not be greater than double the current value 6"
        )
        assert await alter(c, node, ("remote.log.reader.threads", SET, "21")) == refused(
            "remote.log.reader.threads=21, value should not be greater than double the current "
            "value 10"
        )
        wrapped = (
            "Invalid value org.apache.kafka.common.config.ConfigException: {} for configuration "
            "Invalid dynamic configuration"
        )
        # ConfigDef's atLeast(1) before DynamicRemoteLogConfig's own check
        rate = "remote.log.manager.copy.max.bytes.per.second"
        assert await alter(c, node, (rate, SET, "0")) == (
            ErrorCode.invalid_request,
            f"Invalid value 0 for configuration {rate}: Value must be at least 1",
        )
        # DynamicLogConfig: the local retention within log.retention.ms (7 days by default)
        assert await alter(c, node, ("log.local.retention.ms", SET, "-1")) == (
            ErrorCode.invalid_request,
            wrapped.format(
                "Invalid value -1 for configuration log.local.retention.ms: Value must not be -1 "
                "as log.retention.ms value is set as 604800000."
            ),
        )
        assert await alter(c, node, ("log.local.retention.ms", SET, "604800001")) == (
            ErrorCode.invalid_request,
            wrapped.format(
                "Invalid value 604800001 for configuration log.local.retention.ms: Value must "
                "not be more than log.retention.ms property value: 604800000"
            ),
        )
        assert await alter(c, node, ("log.local.retention.ms", SET, "1000")) == (
            ErrorCode.none,
            None,
        )
        # log.retention.bytes is unlimited (-1) by default: any local retention
        assert await alter(c, node, ("log.local.retention.bytes", SET, "-1")) == (
            ErrorCode.none,
            None,
        )


async def test_the_follower_pool_is_checked_against_the_older_thread_pool_size() -> None:
    """Kafka's DynamicRemoteLogConfig, once one of its configs changes: the follower pool's
    current size is remote.log.manager.thread.pool.size's while its own config is not set
    (RemoteLogManagerConfig.remoteLogManagerFollowerThreadPoolSize), so a static pool size of
    10 refuses any remote change until the follower's own config is given with it."""
    follower = "remote.log.manager.follower.thread.pool.size"
    async with (
        running_broker(**{"remote.log.manager.thread.pool.size": "10"}) as (
            server,
            port,
        ),
        connect(port) as c,
    ):
        node = str(server.broker.node_id)
        assert await alter(c, node, ("num.io.threads", SET, "16")) == (ErrorCode.none, None)
        assert await alter(c, node, ("remote.fetch.max.wait.ms", SET, "400")) == (
            ErrorCode.invalid_request,
            "Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread count "
            f"update validation failed for {follower}=2, value should be at least half the "
            "current value 10 for configuration Invalid dynamic configuration",
        )
        assert await alter(
            c, node, ("remote.fetch.max.wait.ms", SET, "400"), (follower, SET, "5")
        ) == (ErrorCode.none, None)
        assert await alter(c, node, ("remote.log.reader.threads", SET, "12")) == (
            ErrorCode.none,
            None,
        )


async def test_a_double_is_shown_as_javas_double_to_string() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        node = str(server.broker.node_id)
        assert await alter(c, node, ("log.cleaner.io.buffer.load.factor", SET, "0.90")) == (
            ErrorCode.none,
            None,
        )
        own = await describe(c, 4, node)
        e = own["log.cleaner.io.max.bytes.per.second"]  # kafkad's own, Double.MAX_VALUE
        assert (e.value, e.config_type) == ("1.7976931348623157E308", DOUBLE)
        assert shown(own["log.cleaner.io.buffer.load.factor"]) == (
            "0.9",
            DYNAMIC_BROKER,
            [
                ("log.cleaner.io.buffer.load.factor", "0.90", DYNAMIC_BROKER),  # as stored
                ("log.cleaner.io.buffer.load.factor", "0.9", DEFAULT),
            ],
        )


async def test_set_and_the_environment_give_them_too(tmp_path: Path) -> None:
    cfg = broker_config(
        {"num.io.threads": "4"},
        data_dir=str(tmp_path / "data"),
        environ={"KAFKAD_REPLICA_FETCH_MAX_BYTES": "2097152"},
    )
    server = Server(cfg)
    async with trio.open_nursery() as nursery:
        _, port = await nursery.start(server.run)
        try:
            async with connect(port) as c:
                own = await describe(c, 4, str(server.broker.node_id))
                assert shown(own["num.io.threads"])[:2] == ("4", STATIC)
                assert shown(own["replica.fetch.max.bytes"])[:2] == ("2097152", STATIC)
        finally:
            server.stop()
    with pytest.raises(ConfigError) as info:
        broker_config(
            {"num.io.threads": "0"},
            listen=None,
            data_dir=None,
            environ={"KAFKAD_BACKGROUND_THREADS": "x"},
        )
    assert str(info.value) == (
        "background.threads=x from environment variable KAFKAD_BACKGROUND_THREADS: must be a "
        "whole number; num.io.threads=0 from --set: must be at least 1"
    )


def test_their_documentation_is_one_sentence() -> None:
    """The first sentence of Kafka's ConfigDef documentation only, no later one run into it
    where an HTML paragraph break was dropped ("locally.Note: ..."), nor a second sentence."""
    for name, doc in DOCS.items():
        body = re.sub(r"\borg(?:\.[a-z]+)+\.[A-Z]\w*", "", doc)  # a class: org.apache...Persister
        assert not re.search(r"[a-z0-9)]\.[A-Z][a-z]|[a-z]Note:|\. [A-Z]", body), name


def test_a_plugin_class_is_refused_not_silently_ignored(tmp_path: Path) -> None:
    """A topic policy or quota callback class would not be enforced: refused at start-up, as a
    Kafka without the class refuses it; empty (unset) is accepted."""
    path = tmp_path / "server.properties"
    path.write_text(
        "create.topic.policy.class.name=com.acme.TopicPolicy\n"
        "alter.config.policy.class.name= \n"
        "principal.builder.class="
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder\n"
    )
    info = _start_error(path)
    assert str(info.value).endswith(
        f"create.topic.policy.class.name=com.acme.TopicPolicy from config file {path}: Class "
        "com.acme.TopicPolicy could not be found (kafkad runs no Java plugin; leave it unset)"
    )
    with pytest.raises(
        ConfigError, match=re.escape("client.quota.callback.class=x.Y from --set: Class x.Y")
    ):
        broker_config({"client.quota.callback.class": "x.Y"}, listen=None)
    path.write_text("alter.config.policy.class.name=\n")
    broker_config(listen=None, config_file=str(path))


async def test_a_metric_reporter_a_stock_kafka_cannot_load_is_refused() -> None:
    """Kafka's DynamicMetricsReporters loads every class of a changed metric.reporters; one it
    cannot load fails processReconfigurable; stock Kafka's own reporters (and none) pass."""
    async with running_broker() as (server, port), connect(port) as c:
        node = str(server.broker.node_id)
        assert await alter(c, "", ("metric.reporters", SET, "com.acme.Reporter")) == (
            ErrorCode.invalid_request,
            "Invalid value org.apache.kafka.common.config.ConfigException: Validation of dynamic "
            "config update of Set(metric.reporters) failed with class class "
            "kafka.server.DynamicMetricsReporters for configuration Invalid dynamic configuration",
        )
        jmx = "org.apache.kafka.common.metrics.JmxReporter"
        push = "org.apache.kafka.tools.PushHttpMetricsReporter"
        assert await alter(c, node, ("metric.reporters", SET, f"{jmx}, {push}")) == (
            ErrorCode.none,
            None,
        )
        assert await alter(c, "", ("metric.reporters", SET, "")) == (ErrorCode.none, None)


async def test_each_listeners_acceptor_checks_its_own_network_threads() -> None:
    """Kafka's acceptors check num.network.threads with their listener's override
    (listener.name.<l>.num.network.threads) over the broker's, each against its own count."""
    async with running_broker() as (server, port), connect(port) as c:
        node = str(server.broker.node_id)
        own = "listener.name.plaintext.num.network.threads"
        assert await alter(c, node, (own, SET, "4")) == (ErrorCode.none, None)
        assert await alter(c, node, (own, SET, "9")) == (
            ErrorCode.invalid_request,
            "Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread count "
            "update validation failed for num.network.threads=9, value should not be greater "
            "than double the current value 4 for configuration Invalid dynamic configuration",
        )
        # the one listener keeps its 4: the broker's 3 may go to 20
        assert await alter(c, "", ("num.network.threads", SET, "20")) == (ErrorCode.none, None)


def test_set_and_the_environment_take_a_replication_setting_of_one_only() -> None:
    """As a server.properties may: offsets.topic.replication.factor=1 is accepted and kept as an
    original (it was refused as unknown from --set); any other value is refused."""

    def load(overrides: dict[str, str], environ: dict[str, str]) -> dict[str, str]:
        return dict(broker_config(overrides, environ=environ).originals)

    assert (
        load({"offsets.topic.replication.factor": "1"}, {})["offsets.topic.replication.factor"]
        == "1"
    )
    with pytest.raises(
        ConfigError, match=re.escape("offsets.topic.replication.factor=3 from --set: kafkad")
    ):
        load({"offsets.topic.replication.factor": "3"}, {})
    with pytest.raises(ConfigError, match="KAFKAD_TRANSACTION_STATE_LOG_MIN_ISR: kafkad is one"):
        load({}, {"KAFKAD_TRANSACTION_STATE_LOG_MIN_ISR": "2"})
