"""Dynamic broker configs (issue 15 point 6): IncrementalAlterConfigs and AlterConfigs on
BROKER resources ("" the cluster default, or the node id) as Kafka's ConfigAdminManager and
DynamicBrokerConfig answer them, applied at once, kept across a restart; DescribeConfigs'
sources, synonyms, types and read-only flags as Kafka's ConfigHelper."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kio.schema.alter_configs.v2 import request as ac
from kio.schema.describe_configs.v4 import request as dc
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1 import request as iac

from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_broker_requests import create

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST, PASSWORD, UNKNOWN = 1, 2, 3, 5, 6, 7, 9, 0


async def alter(
    c: RawClient, resource: str, *ops: tuple[str, int, str | None], validate_only: bool = False
) -> tuple[ErrorCode, str | None]:
    resp = await c.request(
        iac.IncrementalAlterConfigsRequest(
            resources=(
                iac.AlterConfigsResource(
                    resource_type=4,
                    resource_name=resource,
                    configs=tuple(
                        iac.AlterableConfig(name=n, config_operation=o, value=v) for n, o, v in ops
                    ),
                ),
            ),
            validate_only=validate_only,
        )
    )
    r = resp.responses[0]
    return r.error_code, r.error_message


async def describe(c: RawClient, resource_type: int, name: str) -> dict[str, Any]:
    resp = await c.request(
        dc.DescribeConfigsRequest(
            resources=(
                dc.DescribeConfigsResource(
                    resource_type=resource_type, resource_name=name, configuration_keys=None
                ),
            ),
            include_synonyms=True,
            include_documentation=True,
        )
    )
    assert resp.results[0].error_code == ErrorCode.none, resp.results[0].error_message
    return {e.name: e for e in resp.results[0].configs}


def synonyms(entry: Any) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


async def test_cluster_default_and_per_broker_layers_in_kafka_order() -> None:
    static = {"log.segment.bytes": "2000000"}
    async with running_broker(**static) as (server, port), connect(port) as c:
        node = str(server.broker.node_id)
        assert await create(c, "t", 1) == ErrorCode.none
        assert await alter(c, "", ("log.retention.ms", SET, "5000")) == (ErrorCode.none, None)
        p = server.broker.topics.partition("t", 0)
        assert p is not None and p.config.retention_ms == 5000  # applied at once
        own = await describe(c, 4, node)
        e = own["log.retention.ms"]
        assert (e.value, e.config_source, e.read_only, e.config_type) == (
            "5000",
            DYNAMIC_DEFAULT,
            False,
            LONG,
        )
        assert synonyms(e) == [
            ("log.retention.ms", "5000", DYNAMIC_DEFAULT),
            ("log.retention.hours", "168", DEFAULT),
        ]
        assert e.documentation
        cluster = await describe(c, 4, "")
        assert list(cluster) == ["log.retention.ms"]
        assert synonyms(cluster["log.retention.ms"]) == [
            ("log.retention.ms", "5000", DYNAMIC_DEFAULT)
        ]
        # the node's own value wins over the cluster default
        assert await alter(c, node, ("log.retention.ms", SET, "7000")) == (ErrorCode.none, None)
        e = (await describe(c, 4, node))["log.retention.ms"]
        assert (e.value, e.config_source) == ("7000", DYNAMIC_BROKER)
        assert synonyms(e)[:2] == [
            ("log.retention.ms", "7000", DYNAMIC_BROKER),
            ("log.retention.ms", "5000", DYNAMIC_DEFAULT),
        ]
        assert p.config.retention_ms == 7000
        # a topic without an override follows, with the broker synonyms
        topic = (await describe(c, 2, "t"))["retention.ms"]
        assert (topic.value, topic.config_source) == ("7000", DYNAMIC_BROKER)
        # static, then dynamic over it
        e = (await describe(c, 4, node))["log.segment.bytes"]
        assert (e.config_source, synonyms(e)) == (
            STATIC,
            [
                ("log.segment.bytes", "2000000", STATIC),
                ("log.segment.bytes", "1073741824", DEFAULT),
            ],
        )
        assert await alter(c, node, ("log.segment.bytes", SET, "3000000")) == (
            ErrorCode.none,
            None,
        )
        assert p.config.segment_bytes == 3000000
        assert await alter(c, node, ("log.retention.ms", DELETE, None)) == (
            ErrorCode.none,
            None,
        )
        assert p.config.retention_ms == 5000
        # message.max.bytes reaches the topics' effective max.message.bytes
        assert await alter(c, "", ("message.max.bytes", SET, "2000")) == (ErrorCode.none, None)
        assert (await describe(c, 2, "t"))["max.message.bytes"].value == "2000"


async def test_read_only_unknown_and_invalid_changes_are_refused_as_kafka() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        node = str(server.broker.node_id)
        assert await alter(c, node, ("auto.create.topics.enable", SET, "false")) == (
            ErrorCode.invalid_request,
            "Cannot update these configs dynamically: Set(auto.create.topics.enable)",
        )
        # Kafka configs kafkad only reads from server.properties: not dynamic in Kafka either
        for name, value in (("process.roles", "broker"), ("socket.send.buffer.bytes", "1")):
            assert await alter(c, node, (name, SET, value)) == (
                ErrorCode.invalid_request,
                f"Cannot update these configs dynamically: Set({name})",
            )
        assert await alter(c, "", ("log.retention.hours", SET, "1")) == (
            ErrorCode.invalid_request,
            "Cannot update these configs dynamically: Set(log.retention.hours)",
        )
        assert await alter(c, node, ("ssl.keystore.location", SET, "/k.jks")) == (
            ErrorCode.invalid_request,
            "These security configs can be dynamically updated only per-listener using the "
            "listener prefix: Set(ssl.keystore.location)",
        )
        code, message = await alter(c, "", ("log.segment.bytes", SET, "1"))
        assert code == ErrorCode.invalid_request
        assert message is not None and message.startswith(
            "Invalid value 1 for configuration log.segment.bytes"
        )
        # Kafka's per-broker configs (kafkad cannot change them) at the cluster default
        for name in ("listeners", "listener.name.plaintext.ssl.keystore.location"):
            assert await alter(c, "", (name, SET, "x")) == (
                ErrorCode.invalid_request,
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: Set({name})",
            )
        assert await alter(c, node, ("listeners", SET, "x")) == (
            ErrorCode.invalid_request,
            "Unable to parse x to a broker endpoint",  # listeners are dynamic per broker
        )
        # Kafka's ConfigDef words for a bad value
        for name, value, why in (
            ("log.retention.ms", "abc", "Not a number of type LONG"),
            ("message.max.bytes", "3000000000", "Not a number of type INT"),
            ("min.insync.replicas", "0", "Value must be at least 1"),
            (
                "compression.type",
                "foo",
                "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
            ),
            ("log.message.timestamp.type", "x", "String must be one of: CreateTime, LogAppendTime"),
        ):
            assert await alter(c, "", (name, SET, value)) == (
                ErrorCode.invalid_request,
                f"Invalid value {value} for configuration {name}: {why}",
            )
        assert await alter(c, "", ("log.cleanup.policy", SET, "compact,foo")) == (
            ErrorCode.invalid_request,
            "Invalid value foo for configuration log.cleanup.policy: String must be one of: "
            "compact, delete",
        )
        assert await alter(c, "", ("message.max.bytes", APPEND, "1")) == (
            ErrorCode.invalid_config,
            "Config value append is not allowed for config key: message.max.bytes",
        )
        # APPEND/SUBTRACT on a name KafkaConfig does not define: Kafka's prepareIncrementalConfigs
        # looks it up in a Scala map (NoSuchElementException): UNKNOWN_SERVER_ERROR, no message
        for name, op in (
            ("custom.thing", APPEND),
            ("kafkad.http.listeners", SUBTRACT),
            ("listener.name.plaintext.ssl.cipher.suites", APPEND),
        ):
            assert await alter(c, node, (name, op, "x")) == (ErrorCode.unknown_server_error, None)
        # a Kafka config that is not a list, though kafkad lists it under no ConfigDef type
        assert await alter(c, node, ("group.consumer.migration.policy", APPEND, "x")) == (
            ErrorCode.invalid_config,
            "Config value append is not allowed for config key: group.consumer.migration.policy",
        )
        # Kafka's static LIST configs kafkad does not model: the list operation applies, then
        # DynamicBrokerConfig refuses the change; one with no default (process.roles,
        # controller.listener.names) fails casting ConfigDef.NO_DEFAULT_VALUE to a List
        for name, op in (("log.dirs", APPEND), ("log.dir", SUBTRACT)):
            assert await alter(c, node, (name, op, "/x")) == (
                ErrorCode.invalid_request,
                f"Cannot update these configs dynamically: Set({name})",
            )
        for name in ("process.roles", "controller.listener.names"):
            assert await alter(c, node, (name, APPEND, "x")) == (
                ErrorCode.unknown_server_error,
                None,
            )
        assert await alter(c, "7", ("log.retention.ms", SET, "1")) == (
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {node}, but received 7",
        )
        assert await alter(c, "x", ("log.retention.ms", SET, "1")) == (
            ErrorCode.invalid_request,
            "Node id must be an integer, but it is: x",
        )
        assert await alter(c, "", ("log.retention.ms", SET, None)) == (
            ErrorCode.invalid_request,
            "Null value not supported for : log.retention.ms",
        )
        assert await alter(c, "", ("log.retention.ms", SET, "1"), validate_only=True) == (
            ErrorCode.none,
            None,
        )
        assert await describe(c, 4, "") == {}
        # a name Kafka does not define is stored unchecked, as Kafka; shown as sensitive
        assert await alter(c, node, ("custom.thing", SET, "x")) == (ErrorCode.none, None)
        e = (await describe(c, 4, node))["custom.thing"]
        assert (e.value, e.is_sensitive, e.config_source, e.read_only) == (
            None,
            True,
            DYNAMIC_BROKER,
            True,
        )
        assert await alter(c, node, ("custom.thing", DELETE, None)) == (ErrorCode.none, None)
        # a list config: APPEND and SUBTRACT from Kafka's default
        assert await alter(c, "", ("log.cleanup.policy", APPEND, "compact")) == (
            ErrorCode.none,
            None,
        )
        assert (await describe(c, 4, ""))["log.cleanup.policy"].value == "delete,compact"
        assert await alter(c, "", ("log.cleanup.policy", SUBTRACT, "delete")) == (
            ErrorCode.none,
            None,
        )
        assert (await describe(c, 4, ""))["log.cleanup.policy"].value == "compact"
        # AlterConfigs replaces the resource's whole dynamic set
        resp = await c.request(
            ac.AlterConfigsRequest(
                resources=(
                    ac.AlterConfigsResource(
                        resource_type=4,
                        resource_name="",
                        configs=(ac.AlterableConfig(name="log.retention.bytes", value="9"),),
                    ),
                ),
                validate_only=False,
            )
        )
        assert resp.responses[0].error_code == ErrorCode.none
        assert sorted(await describe(c, 4, "")) == ["log.retention.bytes"]


async def test_describe_broker_types_read_only_and_unknown_configs() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        own = await describe(c, 4, str(server.broker.node_id))
        e = own["auto.create.topics.enable"]
        assert (e.value, e.read_only, e.config_type, e.config_source) == (
            "true",
            True,
            BOOLEAN,
            DEFAULT,
        )
        assert own["num.partitions"].config_type == INT
        assert own["log.cleaner.min.cleanable.ratio"].config_type == DOUBLE
        assert own["log.cleanup.policy"].config_type == LIST
        assert own["message.max.bytes"].read_only is False
        assert own["ssl.keystore.password"].config_type == PASSWORD
        # a config Kafka does not define: unknown type, so sensitive, as Kafka's ConfigHelper
        e = own["kafkad.http.listeners"]
        assert (e.value, e.is_sensitive, e.config_type, e.read_only) == (None, True, UNKNOWN, True)
        # Kafka's ConfigDef default is null: unset, shown null from DEFAULT_CONFIG with no
        # synonym (staticDefaultConfigs leaves null defaults out); listeners are LIST in 4.2
        for name, kind, hidden in (
            ("advertised.listeners", LIST, False),
            ("ssl.keystore.location", STRING, False),
            ("ssl.truststore.location", STRING, False),
            ("ssl.keystore.password", PASSWORD, True),
        ):
            e = own[name]
            assert (e.value, e.config_source, synonyms(e), e.config_type, e.is_sensitive) == (
                None,
                DEFAULT,
                [],
                kind,
                hidden,
            ), name
        assert own["listeners"].config_type == LIST
        # a Kafka STRING config: typed and shown, not UNKNOWN and hidden
        e = own["group.consumer.migration.policy"]
        assert (e.value, e.config_type, e.is_sensitive) == ("bidirectional", STRING, False)
        # a null default set in the server's configs: its value, STATIC_BROKER_CONFIG
    # a STRING shown as given (ConfigDef trims it, nothing more): a keystore type too
    async with running_broker(**{"ssl.keystore.type": "pem"}) as (server, port), connect(port) as c:
        e = (await describe(c, 4, str(server.broker.node_id)))["ssl.keystore.type"]
        assert (e.value, synonyms(e)[0]) == ("pem", ("ssl.keystore.type", "pem", STATIC))
    async with running_broker(**{"ssl.provider": "SunJSSE"}) as (server, port), connect(port) as c:
        e = (await describe(c, 4, str(server.broker.node_id)))["ssl.provider"]
        assert (e.value, e.config_source, synonyms(e)) == (
            "SunJSSE",
            STATIC,
            [("ssl.provider", "SunJSSE", STATIC)],
        )


async def test_dynamic_configs_survive_a_restart(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    async with running_broker(data) as (server, port), connect(port) as c:
        node = str(server.broker.node_id)
        assert await create(c, "t", 1) == ErrorCode.none
        assert await alter(c, "", ("log.retention.ms", SET, "5000")) == (ErrorCode.none, None)
        assert await alter(c, node, ("log.retention.bytes", SET, "12345")) == (
            ErrorCode.none,
            None,
        )
    async with running_broker(data) as (server, port), connect(port) as c:
        own = await describe(c, 4, node)
        assert (own["log.retention.ms"].value, own["log.retention.ms"].config_source) == (
            "5000",
            DYNAMIC_DEFAULT,
        )
        assert own["log.retention.bytes"].config_source == DYNAMIC_BROKER
        p = server.broker.topics.partition("t", 0)
        assert p is not None
        assert (p.config.retention_ms, p.config.retention_bytes) == (5000, 12345)


async def test_internal_configs_are_listed_only_when_set() -> None:
    """Kafka's internal configs (defineInternal: group.consumer.regex.refresh.interval.ms,
    producer.id.expiration.check.interval.ms) are in a broker's DescribeConfigs only when its
    config sets them (ConfigHelperUtils.createResponseConfig: originals + nonInternalValues)."""
    internal = "group.consumer.regex.refresh.interval.ms"
    async with running_broker() as (server, port), connect(port) as c:
        own = await describe(c, 4, str(server.broker.node_id))
        assert internal not in own and "producer.id.expiration.check.interval.ms" not in own
        assert "group.consumer.session.timeout.ms" in own
    async with running_broker(**{internal: "20000"}) as (server, port), connect(port) as c:
        e = (await describe(c, 4, str(server.broker.node_id)))[internal]
        # an INT, not a config of unknown type (which Kafka would hide as sensitive)
        assert (e.value, e.config_source, e.config_type, e.is_sensitive) == (
            "20000",
            STATIC,
            INT,
            False,
        )


async def test_broker_quota_rates_are_kafka_longs_of_at_least_zero() -> None:
    # Kafka's QuotaConfig.brokerQuotaConfigs (DynamicConfig.Broker, not KafkaConfig): a
    # change is parsed as a LONG of at least 0 (INVALID_REQUEST), described as LONG and shown
    # (not UNKNOWN and hidden), read-only (not in AllDynamicConfigs); APPEND finds no KafkaConfig
    # key (UNKNOWN_SERVER_ERROR)
    async with running_broker() as (server, port), connect(port) as c:
        node = str(server.broker.node_id)
        for name in (
            "leader.replication.throttled.rate",
            "follower.replication.throttled.rate",
            "replica.alter.log.dirs.io.max.bytes.per.second",
        ):
            assert await alter(c, node, (name, SET, "abc")) == (
                ErrorCode.invalid_request,
                f"Invalid value abc for configuration {name}: Not a number of type LONG",
            )
            assert await alter(c, "", (name, SET, "-1")) == (
                ErrorCode.invalid_request,
                f"Invalid value -1 for configuration {name}: Value must be at least 0",
            )
            assert await alter(c, node, (name, APPEND, "1")) == (
                ErrorCode.unknown_server_error,
                None,
            )
            assert await alter(c, node, (name, SET, "100")) == (ErrorCode.none, None)
            e = (await describe(c, 4, node))[name]
            assert (e.value, e.config_type, e.is_sensitive, e.read_only, e.config_source) == (
                "100",
                LONG,
                False,
                True,
                DYNAMIC_BROKER,
            )
