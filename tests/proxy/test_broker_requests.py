"""Requests against an in-process broker over a real loopback socket, checked field by field."""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

import pytest
import trio
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
from kio.schema.create_partitions.v3 import request as cp
from kio.schema.create_topics.v5 import request as ct
from kio.schema.delete_topics.v5.request import DeleteTopicsRequest
from kio.schema.describe_configs.v4 import request as dc
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fr
from kio.schema.list_offsets.v7 import request as lo
from kio.schema.metadata.v12 import request as md
from kio.schema.produce.v9 import request as pr

from proxy.registry import advertised
from tests.proxy.harness import RawClient, connect, running_broker
from wire.records import Record, build_batch

MS = datetime.timedelta(milliseconds=1)


def batch(values: list[bytes], ts: int = 1_700_000_000_000) -> bytes:
    records = [
        Record(offset_delta=i, timestamp_delta=i, key=b"k%d" % i, value=v, headers=[])
        for i, v in enumerate(values)
    ]
    return build_batch(records, base_timestamp=ts)


async def create(client: RawClient, name: str, partitions: int = 1, **configs: str) -> ErrorCode:
    resp = await client.request(
        ct.CreateTopicsRequest(
            topics=(
                ct.CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=-1,
                    assignments=(),
                    configs=tuple(
                        ct.CreatableTopicConfig(name=k.replace("_", "."), value=v)
                        for k, v in configs.items()
                    ),
                ),
            ),
            timeout=1000 * MS,
            validate_only=False,
        )
    )
    return ErrorCode(resp.topics[0].error_code)


async def produce(
    client: RawClient, topic: str, data: bytes, partition: int = 0, txn_id: str | None = None
) -> Any:
    resp = await client.request(
        pr.ProduceRequest(
            transactional_id=txn_id,
            acks=-1,
            timeout=1000 * MS,
            topic_data=(
                pr.TopicProduceData(
                    name=topic,
                    partition_data=(pr.PartitionProduceData(index=partition, records=data),),
                ),
            ),
        )
    )
    return resp.responses[0].partition_responses[0]


def fetch_request(topic: str, offset: int, *, wait_ms: int = 0, min_bytes: int = 1):
    return fr.FetchRequest(
        max_wait=wait_ms * MS,
        min_bytes=min_bytes,
        max_bytes=50 * 1024 * 1024,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            fr.FetchTopic(
                topic=topic,
                partitions=(
                    fr.FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=1024 * 1024
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


async def test_api_versions_come_from_the_registry() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        resp = await c.request(ApiVersionsV0())
        assert resp.error_code == ErrorCode.none
        got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert got == advertised()
        assert got[0] == (0, 13) and got[1] == (4, 18) and got[18] == (0, 4)
        v3 = await c.request(
            ApiVersionsV3(client_software_name="kafkad-tests", client_software_version="1.0")
        )
        assert v3.error_code == ErrorCode.none
        # transaction.version 2 (Kafka 4's default); group.version 1: KIP-848 is on
        assert [
            (f.name, f.min_version_level, f.max_version_level) for f in v3.finalized_features
        ] == [("transaction.version", 2, 2), ("group.version", 1, 1)]
        # below v4 the supported features with a minimum of 0 are left out (KAFKA-17492)
        assert v3.supported_features == ()


@pytest.mark.parametrize(
    ("name", "version"),
    [("-kafkad", "1.0"), ("kafkad", "1.0."), ("kafkad\n", "1.0"), ("kafkad", "1.0\n"), ("", "1")],
)
async def test_api_versions_with_a_bad_software_name_is_an_invalid_request(
    name: str, version: str
) -> None:
    # Kafka's ApiVersionsRequest.isValid (Pattern.matches: the whole string, no trailing
    # newline) and getErrorResponse: INVALID_REQUEST with no api keys at all
    async with running_broker() as (_, port), connect(port) as c:
        resp = await c.request(
            ApiVersionsV3(client_software_name=name, client_software_version=version)
        )
        assert (resp.error_code, resp.api_keys) == (ErrorCode.invalid_request, ())


async def test_metadata_auto_creates_and_refuses_bad_names() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        resp = await c.request(
            md.MetadataRequest(
                topics=(
                    md.MetadataRequestTopic(topic_id=None, name="auto-made"),
                    md.MetadataRequestTopic(topic_id=None, name="bad name!"),
                ),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            )
        )
        made, bad = resp.topics
        assert made.error_code == ErrorCode.none and len(made.partitions) == 1
        assert made.partitions[0].leader_id == resp.brokers[0].node_id
        assert bad.error_code == ErrorCode.invalid_topic_exception
        again = await c.request(
            md.MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        assert [t.topic_id for t in again.topics if t.name == "auto-made"] == [made.topic_id]


async def test_metadata_without_auto_create() -> None:
    overrides = {"auto.create.topics.enable": "false"}
    async with running_broker(**overrides) as (_, port), connect(port) as c:
        resp = await c.request(
            md.MetadataRequest(
                topics=(md.MetadataRequestTopic(topic_id=None, name="nope"),),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            )
        )
        assert resp.topics[0].error_code == ErrorCode.unknown_topic_or_partition


async def test_create_topics_errors() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t1", 3) == ErrorCode.none
        assert await create(c, "t1", 3) == ErrorCode.topic_already_exists
        assert await create(c, "t.2", 0) == ErrorCode.invalid_partitions
        assert await create(c, "bad/name") == ErrorCode.invalid_topic_exception
        assert await create(c, "t3", 1, no_such_config="1") == ErrorCode.invalid_config
        assert await create(c, "t4", 1, retention_ms="abc") == ErrorCode.invalid_config
        assert await create(c, "t5", 1, retention_ms="1000") == ErrorCode.none
        resp = await c.request(
            ct.CreateTopicsRequest(
                topics=(
                    ct.CreatableTopic(
                        name="rf3",
                        num_partitions=1,
                        replication_factor=3,
                        assignments=(),
                        configs=(),
                    ),
                ),
                timeout=1000 * MS,
                validate_only=False,
            )
        )
        assert resp.topics[0].error_code == ErrorCode.invalid_replication_factor
        only = await c.request(
            ct.CreateTopicsRequest(
                topics=(
                    ct.CreatableTopic(
                        name="dry",
                        num_partitions=2,
                        replication_factor=1,
                        assignments=(),
                        configs=(),
                    ),
                ),
                timeout=1000 * MS,
                validate_only=True,
            )
        )
        assert only.topics[0].error_code == ErrorCode.none
        assert only.topics[0].num_partitions == 2
        assert await create(c, "dry", 1) == ErrorCode.none  # validate_only made nothing


async def test_produce_then_fetch_returns_the_same_bytes_with_offsets() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "pf") == ErrorCode.none
        first = await produce(c, "pf", batch([b"a", b"b", b"c"]))
        second = await produce(c, "pf", batch([b"d"]))
        assert (first.error_code, first.base_offset) == (ErrorCode.none, 0)
        assert (second.error_code, second.base_offset) == (ErrorCode.none, 3)
        resp = await c.request(fetch_request("pf", 0))
        part = resp.responses[0].partitions[0]
        assert part.error_code == ErrorCode.none
        assert part.high_watermark == 4 and part.last_stable_offset == 4
        assert part.aborted_transactions is None  # read_uncommitted
        from wire.records import decode_batch_records, iter_batches

        batches = list(iter_batches(part.records))
        assert [h.base_offset for _, h in batches] == [0, 3]
        values = [
            r.value
            for pos, h in batches
            for r in decode_batch_records(part.records[pos : pos + h.total_size])
        ]
        assert values == [b"a", b"b", b"c", b"d"]
        middle = await c.request(fetch_request("pf", 1))
        assert next(iter_batches(middle.responses[0].partitions[0].records))[1].base_offset == 0
        past = await c.request(fetch_request("pf", 5))
        assert past.responses[0].partitions[0].error_code == ErrorCode.offset_out_of_range


async def test_produce_errors() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "pe") == ErrorCode.none
        good = batch([b"x"])
        corrupt = bytearray(good)
        corrupt[-1] ^= 0xFF
        assert (await produce(c, "pe", bytes(corrupt))).error_code == ErrorCode.corrupt_message
        assert (
            await produce(c, "missing", good)
        ).error_code == ErrorCode.unknown_topic_or_partition
        assert (await produce(c, "pe", good, partition=7)).error_code == (
            ErrorCode.unknown_topic_or_partition
        )
        assert await create(c, "small", 1, max_message_bytes="100") == ErrorCode.none
        big = batch([b"y" * 500])
        assert (await produce(c, "small", big)).error_code == ErrorCode.message_too_large
        after = await produce(c, "pe", good)
        assert (after.error_code, after.base_offset) == (ErrorCode.none, 0)  # nothing written
        # issue 23.11: larger than segment.bytes (but not max.message.bytes): Kafka's code
        configs = {"segment_bytes": "1048576", "max_message_bytes": "4000000"}
        assert await create(c, "seg", 1, **configs) == ErrorCode.none
        huge = batch([bytes(range(256)) * 4500])  # incompressible enough: ~1.1 MiB
        assert (await produce(c, "seg", huge)).error_code == ErrorCode.record_list_too_large
        assert (await produce(c, "seg", good)).base_offset == 0


@pytest.mark.parametrize("version", [4, 5, 6])
async def test_fetch_before_v7_is_answered_and_the_broker_lives_on(version: int) -> None:
    """Fetch v4-6 have no top-level error_code: the per-API error counter read it and the
    AttributeError took the whole broker down (not only the connection)."""
    import importlib

    fetch = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    with trio.fail_after(10):
        async with running_broker() as (_, port), connect(port) as c:
            assert await create(c, "old-fetch") == ErrorCode.none
            await produce(c, "old-fetch", batch([b"a"]))
            partition = fetch.FetchPartition(
                partition=0, fetch_offset=0, partition_max_bytes=1 << 20
            )
            resp = await c.request(
                fetch.FetchRequest(
                    replica_id=-1,
                    max_wait=0 * MS,
                    min_bytes=1,
                    max_bytes=1 << 20,
                    isolation_level=0,
                    topics=(fetch.FetchTopic(topic="old-fetch", partitions=(partition,)),),
                )
            )
            (topic,) = resp.responses
            assert [p.error_code for p in topic.partitions] == [ErrorCode.none]
            assert topic.partitions[0].high_watermark == 1
            async with connect(port) as again:
                assert await create(again, "still-alive") == ErrorCode.none


async def test_fetch_long_poll_wakes_on_append() -> None:
    async with running_broker() as (_, port), connect(port) as reader, connect(port) as writer:
        assert await create(writer, "lp") == ErrorCode.none
        got = []

        async def poll() -> None:
            got.append(await reader.request(fetch_request("lp", 0, wait_ms=30_000)))

        async with trio.open_nursery() as n:
            n.start_soon(poll)
            await trio.testing.wait_all_tasks_blocked()
            await produce(writer, "lp", batch([b"wake"]))
        part = got[0].responses[0].partitions[0]
        assert part.high_watermark == 1 and len(part.records) > 0


async def test_an_unknown_partition_does_not_end_a_long_poll() -> None:
    """Kafka's handleFetchRequest answers a partition its metadata lacks at once, among the
    erroneous ones, and long-polls the others: UNKNOWN_TOPIC_OR_PARTITION is not a read error
    (ReplicaManager.fetchMessages' errorReadingData) that would end the wait."""
    async with running_broker() as (_, port), connect(port) as reader, connect(port) as writer:
        assert await create(writer, "lpu") == ErrorCode.none
        req = fetch_request("lpu", 0, wait_ms=30_000)
        [topic] = req.topics
        unknown = replace(topic.partitions[0], partition=7)
        req = replace(req, topics=(replace(topic, partitions=(*topic.partitions, unknown)),))
        got = []

        async def poll() -> None:
            got.append(await reader.request(req))

        with trio.fail_after(20):
            async with trio.open_nursery() as n:
                n.start_soon(poll)
                await trio.testing.wait_all_tasks_blocked()
                assert got == []  # still waiting
                await produce(writer, "lpu", batch([b"wake"]))
        parts = {p.partition_index: p for p in got[0].responses[0].partitions}
        assert parts[7].error_code == ErrorCode.unknown_topic_or_partition
        assert parts[0].error_code == ErrorCode.none and len(parts[0].records) > 0


async def test_deleting_a_topic_ends_its_long_polls_at_once() -> None:
    """Issue 23.14: Kafka completes the delayed fetches of partitions that stop; a long poll on
    a deleted topic is answered UNKNOWN_TOPIC_OR_PARTITION at once, not NONE at max_wait."""
    async with running_broker() as (_, port), connect(port) as reader, connect(port) as admin:
        assert await create(admin, "lpd") == ErrorCode.none
        got = []

        async def poll() -> None:
            got.append(await reader.request(fetch_request("lpd", 0, wait_ms=600_000)))

        with trio.fail_after(60):  # far below max_wait
            async with trio.open_nursery() as n:
                n.start_soon(poll)
                await trio.testing.wait_all_tasks_blocked()
                deleted = await admin.request(
                    DeleteTopicsRequest(topic_names=("lpd",), timeout=1000 * MS)
                )
                assert deleted.responses[0].error_code == ErrorCode.none
        part = got[0].responses[0].partitions[0]
        assert part.error_code == ErrorCode.unknown_topic_or_partition
        assert (part.high_watermark, part.last_stable_offset, part.log_start_offset) == (-1, -1, -1)
        assert part.records == b"" or part.records is None


async def test_list_offsets_earliest_latest_and_by_time() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "lo") == ErrorCode.none
        await produce(c, "lo", batch([b"a", b"b"], ts=1000))  # timestamps 1000, 1001
        await produce(c, "lo", batch([b"c"], ts=5000))

        async def at(ts: int) -> tuple[int, int]:
            resp = await c.request(
                lo.ListOffsetsRequest(
                    replica_id=-1,
                    isolation_level=0,
                    topics=(
                        lo.ListOffsetsTopic(
                            name="lo",
                            partitions=(
                                lo.ListOffsetsPartition(
                                    partition_index=0, current_leader_epoch=-1, timestamp=ts
                                ),
                            ),
                        ),
                    ),
                )
            )
            p = resp.topics[0].partitions[0]
            assert p.error_code == ErrorCode.none
            return p.offset, p.timestamp

        assert (await at(-2))[0] == 0
        assert (await at(-1))[0] == 3
        assert await at(1001) == (1, 1001)
        assert await at(1002) == (2, 5000)
        assert await at(9999) == (-1, -1)
        assert await at(-3) == (2, 5000)


async def test_describe_configs_delete_and_grow() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "cfg", 1, retention_ms="12345") == ErrorCode.none
        resp = await c.request(
            dc.DescribeConfigsRequest(
                resources=(
                    dc.DescribeConfigsResource(
                        resource_type=2, resource_name="cfg", configuration_keys=None
                    ),
                    dc.DescribeConfigsResource(
                        resource_type=4, resource_name="1", configuration_keys=("num.partitions",)
                    ),
                    dc.DescribeConfigsResource(
                        resource_type=2, resource_name="nope", configuration_keys=None
                    ),
                ),
                include_synonyms=False,
                include_documentation=False,
            )
        )
        topic, brk, missing = resp.results
        configs = {e.name: (e.value, e.config_source) for e in topic.configs}
        assert configs["retention.ms"] == ("12345", 1)
        assert configs["cleanup.policy"] == ("delete", 5)
        assert [(e.name, e.value) for e in brk.configs] == [("num.partitions", "1")]
        assert missing.error_code == ErrorCode.unknown_topic_or_partition

        grow = await c.request(
            cp.CreatePartitionsRequest(
                topics=(cp.CreatePartitionsTopic(name="cfg", count=3, assignments=None),),
                timeout=1000 * MS,
                validate_only=False,
            )
        )
        assert grow.results[0].error_code == ErrorCode.none
        shrink = await c.request(
            cp.CreatePartitionsRequest(
                topics=(cp.CreatePartitionsTopic(name="cfg", count=2, assignments=None),),
                timeout=1000 * MS,
                validate_only=False,
            )
        )
        assert shrink.results[0].error_code == ErrorCode.invalid_partitions
        assert (await produce(c, "cfg", batch([b"p2"]), partition=2)).error_code == ErrorCode.none

        deleted = await c.request(
            DeleteTopicsRequest(topic_names=("cfg", "nope"), timeout=1000 * MS)
        )
        assert [r.error_code for r in deleted.responses] == [
            ErrorCode.none,
            ErrorCode.unknown_topic_or_partition,
        ]
        assert (await produce(c, "cfg", batch([b"gone"]))).error_code == (
            ErrorCode.unknown_topic_or_partition
        )


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x00\x00\x05hello",  # too short for a header
        b"\xff\xff\xff\xff",  # negative size
        b"\x7f\xff\xff\xff",  # larger than socket.request.max.bytes
        b"\x00\x00\x00\x0a\x03\xe7\x00\x00\x00\x00\x00\x01\x00\x00",  # api key 999
        b"\x00\x00\x00\x0a\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00",  # Produce v2
    ],
)
async def test_bad_frames_close_only_their_connection(garbage: bytes) -> None:
    async with running_broker() as (_, port), connect(port) as good:
        assert await create(good, "safe") == ErrorCode.none
        assert (await produce(good, "safe", batch([b"kept"]))).error_code == ErrorCode.none
        async with connect(port) as bad:
            await bad.send_raw(garbage)
            assert await bad.read_frame() is None  # closed by the broker
        resp = await good.request(fetch_request("safe", 0))
        assert resp.responses[0].partitions[0].high_watermark == 1


async def test_unknown_api_versions_version_gets_kip511_answer() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        # ApiVersions v99: header v1 layout, empty body.
        await c.send_raw(b"\x00\x00\x00\x0a\x00\x12\x00\x63\x00\x00\x00\x07\xff\xff")
        frame = await c.read_frame()
        assert frame is not None
        from tests.proxy.harness import decode_response

        cid, resp = decode_response(18, 0, frame)
        assert cid == 7
        assert resp.error_code == ErrorCode.unsupported_version
        assert {k.api_key: k.max_version for k in resp.api_keys}[18] == 4


async def test_shutdown_answers_pending_long_polls() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        assert await create(c, "sd") == ErrorCode.none
        got = []

        async def poll() -> None:
            got.append(await c.request(fetch_request("sd", 0, wait_ms=60_000)))

        async with trio.open_nursery() as n:
            n.start_soon(poll)
            await trio.testing.wait_all_tasks_blocked()
            server.stop()
        assert got[0].responses[0].partitions[0].records == b""
