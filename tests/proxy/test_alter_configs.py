"""AlterConfigs (33) and IncrementalAlterConfigs (44) on topics: validation like Kafka,
validate_only, changes visible in DescribeConfigs and reaching the open partitions."""

from __future__ import annotations

from typing import Any

from kio.schema.alter_configs.v2 import request as ac
from kio.schema.describe_configs.v4 import request as dc
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1 import request as iac

from proxy.broker import Broker
from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_broker_requests import create, produce
from wire.records import Record, build_batch

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


async def incremental(
    c: RawClient, topic: str, *ops: tuple[str, int, str | None], validate_only: bool = False
) -> Any:
    resp = await c.request(
        iac.IncrementalAlterConfigsRequest(
            resources=(
                iac.AlterConfigsResource(
                    resource_type=2,
                    resource_name=topic,
                    configs=tuple(
                        iac.AlterableConfig(name=n, config_operation=o, value=v) for n, o, v in ops
                    ),
                ),
            ),
            validate_only=validate_only,
        )
    )
    return resp.responses[0]


async def replace_all(c: RawClient, topic: str, configs: dict[str, str | None]) -> Any:
    """AlterConfigs (the legacy API: the topic's overrides become ``configs``)."""
    resp = await c.request(
        ac.AlterConfigsRequest(
            resources=(
                ac.AlterConfigsResource(
                    resource_type=2,
                    resource_name=topic,
                    configs=tuple(ac.AlterableConfig(name=n, value=v) for n, v in configs.items()),
                ),
            ),
            validate_only=False,
        )
    )
    return resp.responses[0]


async def described(c: RawClient, topic: str) -> dict[str, tuple[str | None, int]]:
    resp = await c.request(
        dc.DescribeConfigsRequest(
            resources=(
                dc.DescribeConfigsResource(
                    resource_type=2, resource_name=topic, configuration_keys=None
                ),
            ),
            include_synonyms=False,
            include_documentation=False,
        )
    )
    return {e.name: (e.value, e.config_source) for e in resp.results[0].configs}


async def test_incremental_alter_configs() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        assert await create(c, "t", 1, retention_ms="1000") == ErrorCode.none
        broker: Broker = server.broker
        r = await incremental(c, "t", ("cleanup.policy", SET, "compact"), validate_only=True)
        assert r.error_code == ErrorCode.none
        assert (await described(c, "t"))["cleanup.policy"] == ("delete", 5)
        r = await incremental(
            c, "t", ("cleanup.policy", APPEND, "compact"), ("retention.ms", DELETE, None)
        )
        assert r.error_code == ErrorCode.none
        configs = await described(c, "t")
        assert configs["cleanup.policy"] == ("delete,compact", 1)
        assert configs["retention.ms"] == ("604800000", 5)
        p = broker.topics.partition("t", 0)
        assert p is not None and p.config.compact and p.config.delete
        assert p.config.retention_ms == 604800000
        r = await incremental(c, "t", ("cleanup.policy", SUBTRACT, "delete"))
        assert r.error_code == ErrorCode.none
        assert p.config.compact and not p.config.delete
        # a compacted topic refuses records without a key
        keyless = build_batch([Record(0, 0, None, b"v")], base_timestamp=1_700_000_000_000)
        assert (await produce(c, "t", keyless)).error_code == ErrorCode.invalid_record
        keyed = build_batch([Record(0, 0, b"k", b"v")], base_timestamp=1_700_000_000_000)
        assert (await produce(c, "t", keyed)).error_code == ErrorCode.none
        # Kafka 4.2 allows an empty cleanup.policy: neither compacted nor deleted by retention
        r = await incremental(c, "t", ("cleanup.policy", SUBTRACT, "compact"))
        assert r.error_code == ErrorCode.none
        assert (await described(c, "t"))["cleanup.policy"] == ("", 1)
        assert not p.config.compact and not p.config.delete

        errors = [
            (("nope", SET, "1"), ErrorCode.invalid_config),
            (("retention.ms", SET, "abc"), ErrorCode.invalid_config),
            (("retention.ms", APPEND, "1"), ErrorCode.invalid_config),
            (("cleanup.policy", SET, "shrink"), ErrorCode.invalid_config),
            (("min.cleanable.dirty.ratio", SET, "1.5"), ErrorCode.invalid_config),
            (("retention.ms", SET, None), ErrorCode.invalid_request),
        ]
        for op, code in errors:
            assert (await incremental(c, "t", op)).error_code == code, op
        r = await incremental(c, "t", ("retention.ms", SET, "1"), ("retention.ms", SET, "2"))
        assert r.error_code == ErrorCode.invalid_request
        r = await incremental(
            c, "t", ("min.compaction.lag.ms", SET, "10"), ("max.compaction.lag.ms", SET, "5")
        )
        assert r.error_code == ErrorCode.invalid_config
        assert (await incremental(c, "gone", ("retention.ms", SET, "1"))).error_code == (
            ErrorCode.unknown_topic_or_partition
        )
        assert (await described(c, "t"))["cleanup.policy"] == ("", 1)


async def test_alter_configs_replaces_every_override() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        assert await create(c, "t", 2, retention_ms="1000", segment_ms="5000") == ErrorCode.none

        async def alter(topic: str, validate_only: bool = False, **configs: str | None) -> Any:
            resp = await c.request(
                ac.AlterConfigsRequest(
                    resources=(
                        ac.AlterConfigsResource(
                            resource_type=2,
                            resource_name=topic,
                            configs=tuple(
                                ac.AlterableConfig(name=k.replace("_", "."), value=v)
                                for k, v in configs.items()
                            ),
                        ),
                    ),
                    validate_only=validate_only,
                )
            )
            return resp.responses[0]

        assert (await alter("t", True, retention_ms="7")).error_code == ErrorCode.none
        assert (await described(c, "t"))["retention.ms"] == ("1000", 1)
        assert (await alter("t", retention_ms="7")).error_code == ErrorCode.none
        configs = await described(c, "t")
        assert configs["retention.ms"] == ("7", 1)
        assert configs["segment.ms"] == ("604800000", 5)  # not listed: back to the default
        for p in server.broker.topics.get("t").partitions:
            assert p.config.retention_ms == 7 and p.log.config.retention_ms == 7
        assert (await alter("t", segment_bytes="12")).error_code == ErrorCode.invalid_config
        assert (await alter("t", retention_ms=None)).error_code == ErrorCode.invalid_config
        assert (await alter("x", retention_ms="1")).error_code == (
            ErrorCode.unknown_topic_or_partition
        )
        broker_res = await c.request(
            ac.AlterConfigsRequest(
                resources=(
                    ac.AlterConfigsResource(
                        resource_type=4,
                        resource_name="1",
                        configs=(ac.AlterableConfig(name="num.partitions", value="3"),),
                    ),
                ),
                validate_only=False,
            )
        )
        assert broker_res.responses[0].error_code == ErrorCode.invalid_request


async def test_every_kafka_topic_config_is_stored_and_shown_with_its_type() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t", 1) == ErrorCode.none
        r = await incremental(
            c,
            "t",
            ("leader.replication.throttled.replicas", SET, "0:1"),
            ("local.retention.ms", SET, "1000"),
            ("follower.replication.throttled.replicas", APPEND, "0:1"),
        )
        assert r.error_code == ErrorCode.none
        resp = await c.request(
            dc.DescribeConfigsRequest(
                resources=(
                    dc.DescribeConfigsResource(
                        resource_type=2, resource_name="t", configuration_keys=None
                    ),
                ),
                include_synonyms=False,
                include_documentation=True,
            )
        )
        shown = {e.name: (e.value, e.config_source, e.config_type) for e in resp.results[0].configs}
        LONG, LIST, BOOLEAN, INT = 5, 7, 1, 3
        assert shown["leader.replication.throttled.replicas"] == ("0:1", 1, LIST)
        assert shown["follower.replication.throttled.replicas"] == ("0:1", 1, LIST)
        assert shown["local.retention.ms"] == ("1000", 1, LONG)
        assert "message.downconversion.enable" not in shown  # gone from Kafka 4's LogConfig
        assert shown["remote.storage.enable"] == ("false", 5, BOOLEAN)
        assert shown["max.message.bytes"][2] == INT
        assert shown["segment.jitter.ms"][2] == LONG
        r = await incremental(c, "t", ("remote.storage.enable", SET, "true"))
        assert (r.error_code, r.error_message) == (
            ErrorCode.invalid_config,
            "Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage.",
        )
        r = await incremental(c, "t", ("retention.ms", SET, "-2"))
        assert (r.error_code, r.error_message) == (
            ErrorCode.invalid_config,
            "Invalid value -2 for configuration retention.ms: Value must be at least -1",
        )


async def test_the_cluster_default_broker_resource_lists_only_dynamic_defaults() -> None:
    # Kafka's ConfigHelper: resource name "" answers the dynamic cluster-wide defaults
    # (currentDynamicDefaultConfigs), which kafkad has none of; the node id answers them all
    async with running_broker() as (server, port), connect(port) as c:
        node = str(server.broker.node_id)
        resp = await c.request(
            dc.DescribeConfigsRequest(
                resources=tuple(
                    dc.DescribeConfigsResource(
                        resource_type=4, resource_name=name, configuration_keys=None
                    )
                    for name in ("", node)
                ),
                include_synonyms=True,
                include_documentation=False,
            )
        )
        default, own = resp.results
        assert (default.error_code, default.resource_name, default.configs) == (
            ErrorCode.none,
            "",
            (),
        )
        assert own.error_code == ErrorCode.none
        names = {e.name for e in own.configs}
        assert {"advertised.listeners", "log.retention.ms", "node.id"} <= names
