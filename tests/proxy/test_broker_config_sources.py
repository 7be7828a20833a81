"""DescribeConfigs BROKER shows the configs kafkad takes from its command line and from a
server.properties as a Kafka 4.2 node shows them when its server.properties sets them
(ConfigHelper: the value of exactly that name in the KafkaConfig, its synonyms from the
originals ``staticBrokerConfigs`` and the ConfigDef defaults ``staticDefaultConfigs``):
``--listen`` is ``listeners``, ``--advertise`` ``advertised.listeners``, the data dir
``log.dirs``; ``node.id`` and ``process.roles`` are always set (Kafka has no default for them);
``log.retention.ms`` and the other configs whose default is null show null while only their
hours/minutes alternate is set, though kafkad retains by it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from kio.schema.describe_configs.v4 import request as dc
from kio.schema.errors import ErrorCode

from proxy.server import Server
from tests.proxy.harness import broker_config, connect, running_broker
from tests.proxy.test_broker_requests import create
from tests.proxy.test_dynamic_broker_configs import (
    APPEND,
    DEFAULT,
    DYNAMIC_BROKER,
    DYNAMIC_DEFAULT,
    INT,
    LIST,
    LONG,
    SET,
    STATIC,
    alter,
    describe,
    synonyms,
)

LONG_MAX = str(2**63 - 1)
SHORT = 4


def shown(e: Any) -> tuple[str | None, int, list[tuple[str, str | None, int]]]:
    return e.value, e.config_source, synonyms(e)


@asynccontextmanager
async def broker_from(
    tmp_path: Path, properties: str, data_dir: str | None = None
) -> AsyncIterator[tuple[Server, int]]:
    """A broker started with ``--config`` a server.properties holding ``properties``."""
    path = tmp_path / "server.properties"
    path.write_text(properties)
    async with running_broker(data_dir, listen=None, config_file=str(path)) as running:
        yield running


async def test_command_line_configs_are_static_as_in_a_server_properties() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        own = await describe(c, 4, str(server.broker.node_id))
        e = own["listeners"]  # --listen 127.0.0.1:0
        assert shown(e) == (
            "PLAINTEXT://127.0.0.1:0",
            STATIC,
            [
                ("listeners", "PLAINTEXT://127.0.0.1:0", STATIC),
                ("listeners", "PLAINTEXT://:9092", DEFAULT),  # SocketServerConfigs' default
            ],
        )
        assert (e.config_type, e.read_only) == (LIST, False)
        assert shown(own["advertised.listeners"]) == (None, DEFAULT, [])  # no --advertise
        # SocketServerConfigs' default, in the order its HashMap of listener names gives
        kafka_map = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
        assert shown(own["listener.security.protocol.map"]) == (
            kafka_map,
            DEFAULT,
            [("listener.security.protocol.map", kafka_map, DEFAULT)],
        )
        e = own["log.dirs"]  # the data dir
        assert shown(e) == ("memory://", STATIC, [("log.dirs", "memory://", STATIC)])
        assert (e.config_type, e.read_only) == (LIST, True)
        e = own["log.dir"]
        assert shown(e) == ("/tmp/kafka-logs", DEFAULT, [("log.dir", "/tmp/kafka-logs", DEFAULT)])
        assert (e.config_type, e.read_only) == (LIST, True)
        # NO_DEFAULT_VALUE in KRaftConfigs: always set, no DEFAULT_CONFIG synonym
        e = own["node.id"]
        assert (shown(e), e.config_type) == (("1", STATIC, [("node.id", "1", STATIC)]), INT)
        # KafkaConfig.populateSynonyms: broker.id is node.id's string unless set itself
        e = own["broker.id"]
        assert (shown(e), e.config_type, e.read_only) == (
            ("1", STATIC, [("broker.id", "1", STATIC), ("broker.id", "-1", DEFAULT)]),
            INT,
            True,
        )
        e = own["process.roles"]
        assert shown(e) == (
            "broker,controller",
            STATIC,
            [("process.roles", "broker,controller", STATIC)],
        )
        assert (e.config_type, e.read_only) == (LIST, True)
        assert "controller.listener.names" not in own  # kafkad has no controller listener
        # set explicitly to its default: still STATIC_BROKER_CONFIG, as Kafka's originals
    async with running_broker(**{"num.partitions": "1"}) as (server, port), connect(port) as c:
        e = (await describe(c, 4, str(server.broker.node_id)))["num.partitions"]
        assert shown(e) == (
            "1",
            STATIC,
            [("num.partitions", "1", STATIC), ("num.partitions", "1", DEFAULT)],
        )


def test_listen_and_advertise_are_the_static_listeners() -> None:
    cfg = broker_config(
        listen="[::1]:9093", advertise="kafka.example:9000", data_dir="/var/lib/kafkad"
    )
    assert {n: cfg.originals[n] for n in ("listeners", "advertised.listeners", "log.dirs")} == {
        "listeners": "PLAINTEXT://[::1]:9093",
        "advertised.listeners": "PLAINTEXT://kafka.example:9000",
        "log.dirs": "/var/lib/kafkad",
    }


async def test_a_dynamic_listeners_change_is_shown_over_the_static_one() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        node = str(server.broker.node_id)
        both = "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0"
        pmap = "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT"
        assert await alter(
            c, node, ("listeners", SET, both), ("listener.security.protocol.map", SET, pmap)
        ) == (0, None)
        own = await describe(c, 4, node)
        assert shown(own["listeners"]) == (
            both,
            DYNAMIC_BROKER,
            [
                ("listeners", both, DYNAMIC_BROKER),
                ("listeners", "PLAINTEXT://127.0.0.1:0", STATIC),
                ("listeners", "PLAINTEXT://:9092", DEFAULT),
            ],
        )
        assert shown(own["listener.security.protocol.map"])[:2] == (pmap, DYNAMIC_BROKER)


async def test_time_configs_with_a_null_default_show_null_under_their_alternates(
    tmp_path: Path,
) -> None:
    props = "log.retention.hours=24\nlog.dirs=/tmp/from-file\nprocess.roles=broker, controller\n"
    async with broker_from(tmp_path, props, "memory://") as (server, port), connect(port) as c:
        assert server.broker.config.values["log.retention.ms"] == 24 * 3_600_000  # retained by
        own = await describe(c, 4, str(server.broker.node_id))
        e = own["log.retention.ms"]
        assert (shown(e), e.config_type, e.read_only) == ((None, DEFAULT, []), LONG, False)
        e = own["log.retention.hours"]
        assert shown(e) == (
            "24",
            STATIC,
            [("log.retention.hours", "24", STATIC), ("log.retention.hours", "168", DEFAULT)],
        )
        assert (e.config_type, e.read_only) == (INT, True)
        assert shown(own["log.retention.minutes"]) == (None, DEFAULT, [])
        assert shown(own["log.roll.ms"]) == (None, DEFAULT, [])
        assert shown(own["log.roll.hours"]) == (
            "168",
            DEFAULT,
            [("log.roll.hours", "168", DEFAULT)],
        )
        assert shown(own["log.flush.interval.ms"]) == (None, DEFAULT, [])
        e = own["log.flush.scheduler.interval.ms"]
        assert (shown(e), e.config_type) == (
            (LONG_MAX, DEFAULT, [("log.flush.scheduler.interval.ms", LONG_MAX, DEFAULT)]),
            LONG,
        )
        # --data-dir wins over the file's log.dirs, as kafkad uses it
        assert shown(own["log.dirs"])[:2] == ("memory://", STATIC)
        # a LIST's value as Kafka parses it (items trimmed), its synonym as given
        assert shown(own["process.roles"]) == (
            "broker,controller",
            STATIC,
            [("process.roles", "broker, controller", STATIC)],
        )
    # the ms form set: its value, the alternates after it
    one = str(tmp_path / "one-dir")
    props = f"log.retention.ms=1000\nlog.retention.hours=24\nlog.dir={one}\n"
    async with broker_from(tmp_path, props) as (server, port), connect(port) as c:
        own = await describe(c, 4, str(server.broker.node_id))
        assert shown(own["log.retention.ms"]) == (
            "1000",
            STATIC,
            [
                ("log.retention.ms", "1000", STATIC),
                ("log.retention.hours", "24", STATIC),
                ("log.retention.hours", "168", DEFAULT),
            ],
        )
        # log.dir alone names the data dir: log.dirs stays unset
        assert shown(own["log.dir"]) == (
            one,
            STATIC,
            [("log.dir", one, STATIC), ("log.dir", "/tmp/kafka-logs", DEFAULT)],
        )
        assert shown(own["log.dirs"]) == (None, DEFAULT, [])
        assert server.broker.config.data_dir == one


async def test_kafkas_own_server_properties_is_described_as_kafka_describes_it(
    tmp_path: Path,
) -> None:
    """Kafka 4.2's config/server.properties (its ports 0, its log dir here): the KRaft names
    kafkad only checks are listed as Kafka lists them when set."""
    props = (
        "process.roles=broker,controller\nnode.id=1\n"
        "controller.quorum.bootstrap.servers=localhost:9093\n"
        "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0\n"
        "inter.broker.listener.name=PLAINTEXT\ncontroller.listener.names=CONTROLLER\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n"
        f"log.dirs={tmp_path / 'logs'}\nlog.retention.hours=168\n"
    )
    async with broker_from(tmp_path, props) as (server, port), connect(port) as c:
        own = await describe(c, 4, str(server.broker.node_id))
        for name, value in (
            ("controller.quorum.bootstrap.servers", "localhost:9093"),
            ("inter.broker.listener.name", "PLAINTEXT"),
            ("controller.listener.names", "CONTROLLER"),
            ("log.dirs", str(tmp_path / "logs")),
            ("listeners", "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"),
        ):
            assert (own[name].value, own[name].config_source, own[name].read_only) == (
                value,
                STATIC,
                name != "listeners",
            ), name
        assert synonyms(own["controller.quorum.bootstrap.servers"]) == [
            ("controller.quorum.bootstrap.servers", "localhost:9093", STATIC),
            ("controller.quorum.bootstrap.servers", "", DEFAULT),  # an empty list
        ]
        assert synonyms(own["inter.broker.listener.name"]) == [
            ("inter.broker.listener.name", "PLAINTEXT", STATIC)  # null default
        ]
        assert shown(own["log.retention.ms"]) == (None, DEFAULT, [])


async def test_the_cluster_default_shows_its_strings_as_stored() -> None:
    """Kafka's cluster default is described from its stored strings
    (currentDynamicDefaultConfigs); a broker's from its parsed config, a LIST's items trimmed."""
    async with running_broker() as (server, port), connect(port) as c:
        node = str(server.broker.node_id)
        assert await alter(c, "", ("log.cleanup.policy", SET, "compact, delete")) == (0, None)
        e = (await describe(c, 4, ""))["log.cleanup.policy"]
        assert (e.value, synonyms(e)) == (
            "compact, delete",
            [("log.cleanup.policy", "compact, delete", DYNAMIC_DEFAULT)],
        )
        e = (await describe(c, 4, node))["log.cleanup.policy"]
        assert (e.value, synonyms(e)[0]) == (
            "compact,delete",
            ("log.cleanup.policy", "compact, delete", DYNAMIC_DEFAULT),
        )


async def test_a_double_is_shown_as_javas_double_to_string(tmp_path: Path) -> None:
    """Kafka prints a DOUBLE config's parsed value with Java's Double.toString
    (ConfigDef.convertToString): 1.0E7, not Python's 10000000.0; its synonyms as given."""
    props = "log.cleaner.io.max.bytes.per.second=1e7\nlog.cleaner.min.cleanable.ratio=0.0001\n"
    async with broker_from(tmp_path, props, "memory://") as (server, port), connect(port) as c:
        node = str(server.broker.node_id)
        own = await describe(c, 4, node)
        assert shown(own["log.cleaner.io.max.bytes.per.second"]) == (
            "1.0E7",
            STATIC,
            [
                ("log.cleaner.io.max.bytes.per.second", "1e7", STATIC),
                ("log.cleaner.io.max.bytes.per.second", "1.7976931348623157E308", DEFAULT),
            ],
        )
        assert shown(own["log.cleaner.min.cleanable.ratio"])[:2] == ("1.0E-4", STATIC)
        assert await alter(c, node, ("log.cleaner.min.cleanable.ratio", SET, "0.25")) == (0, None)
        e = (await describe(c, 4, node))["log.cleaner.min.cleanable.ratio"]
        assert (e.value, e.config_source) == ("0.25", DYNAMIC_BROKER)
    async with running_broker() as (server, port), connect(port) as c:
        e = (await describe(c, 4, str(server.broker.node_id)))[
            "log.cleaner.io.max.bytes.per.second"
        ]
        assert shown(e) == (  # Double.MAX_VALUE, as its DEFAULT synonym shows it
            "1.7976931348623157E308",
            DEFAULT,
            [("log.cleaner.io.max.bytes.per.second", "1.7976931348623157E308", DEFAULT)],
        )


async def test_an_empty_list_of_config_names_asks_for_every_config() -> None:
    """Kafka's ConfigHelperUtils: configurationKeys null or empty -> every config."""
    async with running_broker() as (server, port), connect(port) as c:
        assert await create(c, "t", 1) == ErrorCode.none
        for kind, name in ((4, str(server.broker.node_id)), (2, "t")):
            every = await describe(c, kind, name)
            resp = await c.request(
                dc.DescribeConfigsRequest(
                    resources=(
                        dc.DescribeConfigsResource(
                            resource_type=kind, resource_name=name, configuration_keys=()
                        ),
                    ),
                    include_synonyms=True,
                    include_documentation=True,
                )
            )
            assert resp.results[0].error_code == ErrorCode.none
            assert [e.name for e in resp.results[0].configs] == list(every), kind


async def test_a_listener_override_shows_its_string_as_set(tmp_path: Path) -> None:
    """A listener.name.<l>.<config> is no KafkaConfig key: Kafka lists it from the originals
    (ConfigHelperUtils), its value the string as set, not parsed and printed back."""
    props = "listener.name.plaintext.max.connections=05\n"
    async with broker_from(tmp_path, props, "memory://") as (server, port), connect(port) as c:
        node = str(server.broker.node_id)
        rate = "listener.name.plaintext.max.connection.creation.rate"
        assert await alter(c, node, (rate, SET, "070")) == (0, None)
        own = await describe(c, 4, node)
        assert shown(own["listener.name.plaintext.max.connections"]) == (
            "05",
            STATIC,
            [
                ("listener.name.plaintext.max.connections", "05", STATIC),
                ("max.connections", "2147483647", DEFAULT),
            ],
        )
        assert shown(own[rate])[:2] == ("070", DYNAMIC_BROKER)


async def test_a_broker_resource_name_is_read_as_kafka_reads_a_broker_id() -> None:
    """Kafka's ConfigHelper: the name is parsed as an int (resourceNameToBrokerId: "+1" and
    "01" are node 1, described as it) before it is compared with the node id."""
    async with running_broker() as (server, port), connect(port) as c:
        node = server.broker.node_id
        assert await alter(c, str(node), ("log.retention.ms", SET, "5000")) == (0, None)
        for name in (f"+{node}", f"0{node}"):
            resp = await c.request(
                dc.DescribeConfigsRequest(
                    resources=(
                        dc.DescribeConfigsResource(
                            resource_type=4, resource_name=name, configuration_keys=None
                        ),
                    ),
                    include_synonyms=True,
                    include_documentation=False,
                )
            )
            (result,) = resp.results
            assert (result.error_code, result.resource_name) == (ErrorCode.none, name)
            own = {e.name: e for e in result.configs}
            assert shown(own["log.retention.ms"])[:2] == ("5000", DYNAMIC_BROKER)
        for name, message in (
            ("x1", "Broker id must be an integer, but it is: x1"),
            (f" {node}", f"Broker id must be an integer, but it is:  {node}"),
            ("99999999999", "Broker id must be an integer, but it is: 99999999999"),
            ("7", f"Unexpected broker id, expected {node} or empty string, but received 7"),
        ):
            resp = await c.request(
                dc.DescribeConfigsRequest(
                    resources=(
                        dc.DescribeConfigsResource(
                            resource_type=4, resource_name=name, configuration_keys=None
                        ),
                    ),
                    include_synonyms=False,
                    include_documentation=False,
                )
            )
            (result,) = resp.results
            assert (result.error_code, result.error_message, result.configs) == (
                ErrorCode.invalid_request,
                message,
                (),
            ), name


async def test_kafkas_tuning_configs_a_server_properties_sets_are_listed_as_set(
    tmp_path: Path,
) -> None:
    """Kafka's own config/server.properties sets thread pools, socket buffers and internal
    topics' replication, which kafkad reads but does not serve: a Kafka node lists them as
    STATIC_BROKER_CONFIG with Kafka's type and default (kafkad omitted them)."""
    props = (
        "num.network.threads=3\nnum.io.threads=8\nsocket.send.buffer.bytes=102400\n"
        "num.recovery.threads.per.data.dir=2\noffsets.topic.replication.factor=1\n"
        "share.coordinator.state.topic.min.isr=1\ntransaction.state.log.min.isr=1\n"
    )
    async with broker_from(tmp_path, props, "memory://") as (server, port), connect(port) as c:
        node = str(server.broker.node_id)
        own = await describe(c, 4, node)
        e = own["offsets.topic.replication.factor"]
        assert shown(e) == (
            "1",
            STATIC,
            [
                ("offsets.topic.replication.factor", "1", STATIC),
                ("offsets.topic.replication.factor", "3", DEFAULT),
            ],
        )
        assert (e.config_type, e.read_only) == (SHORT, True)
        e = own["num.io.threads"]  # DynamicThreadPool's: dynamic in Kafka
        assert shown(e) == (
            "8",
            STATIC,
            [("num.io.threads", "8", STATIC), ("num.io.threads", "8", DEFAULT)],
        )
        assert (e.config_type, e.read_only) == (INT, False)
        for line in props.splitlines():
            name = line.partition("=")[0]
            assert own[name].config_source == STATIC, name
        e = own["background.threads"]  # not set: listed at Kafka's default, as every config
        assert (e.value, e.config_source, e.read_only) == ("10", DEFAULT, False)
        assert await alter(c, node, ("num.io.threads", APPEND, "1")) == (
            ErrorCode.invalid_config,
            "Config value append is not allowed for config key: num.io.threads",
        )
