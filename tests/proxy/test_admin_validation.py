"""Request validation as Kafka 4.x does it (issue 26.4-26.6): CreateTopics and DeleteTopics
duplicate names, CreateTopics of ``__cluster_metadata``, ListOffsets duplicates / timestamps /
leader epochs, DescribeConfigs topic names and sources."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.create_topics.v7 import request as ct
from kio.schema.delete_topics.v1.request import DeleteTopicsRequest as DeleteTopicsV1
from kio.schema.delete_topics.v5.request import DeleteTopicsRequest
from kio.schema.describe_configs.v4 import request as dc
from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v5 import request as lo5
from kio.schema.list_offsets.v7 import request as lo7

from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_broker_requests import batch, create, produce

MS = datetime.timedelta(milliseconds=1)
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5


async def test_delete_topics_duplicate_name_deletes_nothing() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        assert server.broker is not None
        assert await create(c, "dup") == ErrorCode.none
        assert await create(c, "single") == ErrorCode.none
        resp = await c.request(
            DeleteTopicsRequest(topic_names=("dup", "single", "dup"), timeout=1000 * MS)
        )
        got = [(r.name, r.error_code, r.error_message) for r in resp.responses]
        assert got == [
            ("dup", ErrorCode.invalid_request, "Duplicate topic name."),
            ("single", ErrorCode.none, None),
        ]
        assert server.broker.topics.get("dup") is not None
        assert server.broker.topics.get("single") is None


def creatable(name: str) -> Any:
    return ct.CreatableTopic(
        name=name, num_partitions=1, replication_factor=-1, assignments=(), configs=()
    )


async def test_create_topics_answers_a_duplicate_name_once() -> None:
    # Kafka's ControllerApis.createTopics: the others are created first, then each duplicated
    # name is answered once, INVALID_REQUEST "Duplicate topic name.", and not created
    async with running_broker() as (server, port), connect(port) as c:
        assert server.broker is not None
        names = ("dup", "single", "dup", "dup")
        resp = await c.request(
            ct.CreateTopicsRequest(
                topics=tuple(creatable(n) for n in names), timeout=1000 * MS, validate_only=False
            )
        )
        got = [(r.name, r.error_code, r.error_message) for r in resp.topics]
        assert got == [
            ("single", ErrorCode.none, None),
            ("dup", ErrorCode.invalid_request, "Duplicate topic name."),
        ]
        assert server.broker.topics.get("dup") is None


async def test_create_topics_refuses_the_cluster_metadata_topic() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        assert server.broker is not None
        for validate_only in (True, False):
            resp = await c.request(
                ct.CreateTopicsRequest(
                    topics=(creatable("__cluster_metadata"), creatable("ok")),
                    timeout=1000 * MS,
                    validate_only=validate_only,
                )
            )
            got = [(r.name, r.error_code, r.error_message) for r in resp.topics]
            assert got == [
                ("ok", ErrorCode.none, None),
                (
                    "__cluster_metadata",
                    ErrorCode.invalid_request,
                    "Creation of internal topic __cluster_metadata is prohibited.",
                ),
            ]
        assert server.broker.topics.get("__cluster_metadata") is None


async def test_delete_topics_disabled_below_v3_is_invalid_request() -> None:
    async with running_broker(**{"delete.topic.enable": "false"}) as (server, port):
        assert server.broker is not None
        async with connect(port) as c:
            assert await create(c, "kept") == ErrorCode.none
            old = await c.request(DeleteTopicsV1(topic_names=("kept",), timeout=1000 * MS))
            assert [r.error_code for r in old.responses] == [ErrorCode.invalid_request]
            new = await c.request(DeleteTopicsRequest(topic_names=("kept",), timeout=1000 * MS))
            assert [r.error_code for r in new.responses] == [ErrorCode.topic_deletion_disabled]
        assert server.broker.topics.get("kept") is not None


async def list_offsets(c: RawClient, mod: Any, *parts: tuple[int, int, int]) -> list[Any]:
    """ListOffsets for topic "lo": (partition, timestamp, current_leader_epoch) each."""
    resp = await c.request(
        mod.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=(
                mod.ListOffsetsTopic(
                    name="lo",
                    partitions=tuple(
                        mod.ListOffsetsPartition(
                            partition_index=p, current_leader_epoch=e, timestamp=ts
                        )
                        for p, ts, e in parts
                    ),
                ),
            ),
        )
    )
    return [(p.partition_index, p.error_code, p.offset) for t in resp.topics for p in t.partitions]


async def test_list_offsets_validation() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "lo", 2) == ErrorCode.none
        await produce(c, "lo", batch([b"a", b"b"], ts=1000))
        assert await list_offsets(c, lo7, (0, -1, -1), (1, -2, -1), (0, -2, -1)) == [
            (0, ErrorCode.invalid_request, -1),
            (1, ErrorCode.none, 0),
        ]
        assert await list_offsets(c, lo7, (0, -4, -1), (1, -5, -1)) == [
            (0, ErrorCode.unsupported_version, -1),
            (1, ErrorCode.unsupported_version, -1),
        ]
        assert await list_offsets(c, lo7, (0, -7, -1)) == [(0, ErrorCode.unsupported_version, -1)]
        assert await list_offsets(c, lo5, (0, -3, -1)) == [(0, ErrorCode.unsupported_version, -1)]
        assert await list_offsets(c, lo7, (0, -3, -1)) == [(0, ErrorCode.none, 1)]
        assert await list_offsets(c, lo7, (0, -1, 1)) == [(0, ErrorCode.unknown_leader_epoch, -1)]
        assert await list_offsets(c, lo7, (0, -1, 0), (1, -1, -1)) == [
            (0, ErrorCode.none, 2),
            (1, ErrorCode.none, 0),
        ]
        assert await list_offsets(c, lo7, (5, -1, -1)) == [
            (5, ErrorCode.unknown_topic_or_partition, -1)
        ]


async def describe_topic(c: RawClient, name: str, synonyms: bool = True) -> Any:
    resp = await c.request(
        dc.DescribeConfigsRequest(
            resources=(
                dc.DescribeConfigsResource(
                    resource_type=2, resource_name=name, configuration_keys=None
                ),
            ),
            include_synonyms=synonyms,
            include_documentation=False,
        )
    )
    return resp.results[0]


async def test_describe_configs_illegal_topic_name() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        bad = await describe_topic(c, "bad name!")
        assert bad.error_code == ErrorCode.invalid_topic_exception
        missing = await describe_topic(c, "missing")
        assert missing.error_code == ErrorCode.unknown_topic_or_partition


async def test_describe_configs_static_broker_config_source() -> None:
    async with running_broker(**{"log.retention.ms": "1234"}) as (_, port), connect(port) as c:
        assert await create(c, "st") == ErrorCode.none
        result = await describe_topic(c, "st")
        entries = {e.name: e for e in result.configs}
        retention = entries["retention.ms"]
        assert (retention.value, retention.config_source) == ("1234", STATIC_BROKER_CONFIG)
        assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
            ("log.retention.ms", "1234", STATIC_BROKER_CONFIG),
            ("log.retention.hours", "168", DEFAULT_CONFIG),  # Kafka's alternate and its default
        ]
        segment = entries["segment.bytes"]
        assert segment.config_source == DEFAULT_CONFIG
        assert [(s.name, s.source) for s in segment.synonyms] == [
            ("log.segment.bytes", DEFAULT_CONFIG)
        ]
