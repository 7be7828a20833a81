"""The topic config compression.type (Kafka's values): the broker stores batches in the
topic's codec, recompressing those of another one (Kafka's LogValidator); producer keeps each
batch's own."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode

from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_broker_requests import MS, batch, create, fetch_request, produce
from wire.records import decode_batch_records, iter_batches

CODEC = {"producer": None, "uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.mark.parametrize("setting", list(CODEC))
async def test_batches_are_stored_in_the_topic_s_codec(setting: str) -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "z", 1, **{"compression.type": setting}) == ErrorCode.none
        sent = batch([b"one", b"two" * 50, b"three"])
        part = await produce(c, "z", sent)
        assert (part.error_code, part.base_offset) == (ErrorCode.none, 0)
        data = (await c.request(fetch_request("z", 0))).responses[0].partitions[0].records
        [(pos, header)] = list(iter_batches(data))
        want = CODEC[setting]
        assert header.compression == (0 if want is None else want)
        values = [r.value for r in decode_batch_records(data[pos : pos + header.total_size])]
        assert values == [b"one", b"two" * 50, b"three"]
        if want in (None, 0):  # stored as sent, but for the leader epoch the broker sets
            assert bytes(data)[16:] == sent[16:] and bytes(data)[:12] == sent[:12]


async def test_an_unknown_codec_is_an_invalid_config() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        code = await create(c, "bad", 1, **{"compression.type": "brotli"})
        assert code == ErrorCode.invalid_config


async def test_the_broker_s_compression_type_is_the_topics_default() -> None:
    async with running_broker(**{"compression.type": "gzip"}) as (_, port), connect(port) as c:
        assert await create(c, "g") == ErrorCode.none
        await produce(c, "g", batch([b"a"]))
        data = (await c.request(fetch_request("g", 0))).responses[0].partitions[0].records
        [(_, header)] = list(iter_batches(data))
        assert header.compression == 1


async def _stored_size(c: RawClient, name: str, configs: dict[str, str]) -> int:
    assert await create(c, name, 1, **configs) == ErrorCode.none
    values = [(b"compressible %d " % i) * 40 for i in range(50)]
    assert (await produce(c, name, batch(values))).error_code == ErrorCode.none
    data = (await c.request(fetch_request(name, 0))).responses[0].partitions[0].records
    [(pos, header)] = list(iter_batches(data))
    assert [r.value for r in decode_batch_records(data[pos : pos + header.total_size])] == values
    return int(header.total_size)


@pytest.mark.parametrize(("codec", "fast", "small"), [("gzip", "1", "9"), ("zstd", "1", "19")])
async def test_the_topic_s_compression_level_is_used(codec: str, fast: str, small: str) -> None:
    """KIP-390: compression.<codec>.level is the level the broker recompresses with."""
    async with running_broker() as (_, port), connect(port) as c:
        level = f"compression.{codec}.level"
        quick = await _stored_size(c, "quick", {"compression.type": codec, level: fast})
        tight = await _stored_size(c, "tight", {"compression.type": codec, level: small})
        assert tight < quick


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("compression.gzip.level", "0", "Value must be between 1 and 9 or equal to -1"),
        ("compression.lz4.level", "18", "Value must be no more than 17"),
        ("compression.zstd.level", "-131073", "Value must be at least -131072"),
    ],
)
async def test_levels_out_of_range_are_invalid_configs(name: str, value: str, message: str) -> None:
    from tests.proxy.test_broker_requests import ct

    async with running_broker() as (_, port), connect(port) as c:
        resp = await c.request(
            ct.CreateTopicsRequest(
                topics=(
                    ct.CreatableTopic(
                        name="lvl",
                        num_partitions=1,
                        replication_factor=1,
                        assignments=(),
                        configs=(ct.CreatableTopicConfig(name=name, value=value),),
                    ),
                ),
                timeout=MS * 1000,
                validate_only=False,
            )
        )
        [topic] = resp.topics
        assert topic.error_code == ErrorCode.invalid_config
        assert topic.error_message == f"Invalid value {value} for configuration {name}: {message}"


def _fetch_v9(wait_ms: int, *parts: tuple[str, int]) -> Any:
    from kio.schema.fetch.v9 import request as f9

    return f9.FetchRequest(
        replica_id=-1,
        max_wait=wait_ms * MS,
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=tuple(
            f9.FetchTopic(
                topic=name,
                partitions=(
                    f9.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            )
            for name, offset in parts
        ),
        forgotten_topics_data=(),
    )


async def test_an_old_fetch_of_a_zstd_topic_is_served_as_any_other() -> None:
    """Kafka 4.0 dropped the refusal of Fetch below v10 on a compression.type=zstd topic
    (KAFKA-18269, KIP-724/896: no down-conversion, no UNSUPPORTED_COMPRESSION_TYPE on the fetch
    path): the partition is read, long-polled and erred as any other."""
    async with running_broker() as (_, port), connect(port) as reader, connect(port) as writer:
        assert await create(writer, "zs", 1, **{"compression.type": "zstd"}) == ErrorCode.none
        assert await create(writer, "plain") == ErrorCode.none
        got = []

        async def poll() -> None:
            got.append(await reader.request(_fetch_v9(30_000, ("zs", 0), ("plain", 0))))

        with trio.fail_after(20):
            async with trio.open_nursery() as n:
                n.start_soon(poll)
                await trio.testing.wait_all_tasks_blocked()
                assert got == []  # still waiting: nothing to read anywhere
                await produce(writer, "zs", batch([b"wake"]))
        by_name = {t.topic: t.partitions[0] for t in got[0].responses}
        zs = by_name["zs"]
        assert (zs.error_code, zs.high_watermark) == (ErrorCode.none, 1)
        [(_, header)] = list(iter_batches(zs.records))
        assert header.compression == CODEC["zstd"]
        assert [r.value for r in decode_batch_records(zs.records)] == [b"wake"]
        # a read error is that error
        resp = await reader.request(_fetch_v9(0, ("zs", 5)))
        part = resp.responses[0].partitions[0]
        assert part.error_code == ErrorCode.offset_out_of_range


async def test_an_old_fetch_of_a_zstd_topic_refused_authorization_says_so() -> None:
    from tests.proxy.acl.harness import secured

    async with secured() as (c, grants, _):
        assert await create(c, "zs", 1, **{"compression.type": "zstd"}) == ErrorCode.none
        grants.open = False
        resp = await c.request(_fetch_v9(0, ("zs", 0), ("missing", 0)))
        got = {t.topic: t.partitions[0].error_code for t in resp.responses}
        assert got == {
            "zs": ErrorCode.topic_authorization_failed,
            "missing": ErrorCode.topic_authorization_failed,
        }
