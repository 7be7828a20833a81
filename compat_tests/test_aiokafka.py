"""aiokafka (pinned in pyproject) against the broker. Each test runs its own asyncio loop
(pytest runs async tests under trio here)."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from compat_tests._support import BASE_TS, Rec, sample_records, topic_name

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


async def create_topic(bootstrap: str, partitions: int = 1, check_response: bool = False) -> str:
    """Create via the admin API; the response itself is only checked when asked, so a bad
    CreateTopics answer fails the admin test and not every test using a topic."""
    name = topic_name("aio")
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        resp = await admin.create_topics([NewTopic(name, partitions, 1)])
        if check_response:  # CreateTopics v0-v3: (name, error_code[, error_message])
            assert [tuple(t[:2]) for t in resp.topic_errors] == [(name, 0)]
        (described,) = await admin.describe_topics([name])
        assert (described["error_code"], len(described["partitions"])) == (0, partitions)
    finally:
        await admin.close()
    return name


async def produce(bootstrap: str, topic: str, recs: list[Rec], partition=0, **config):
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **config)
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic,
                key=r.key,
                value=r.value,
                headers=list(r.headers),
                partition=partition,
                timestamp_ms=r.timestamp,
            )
            for r in recs
        ]
        return list(await asyncio.wait_for(asyncio.gather(*futures), 15))
    finally:
        await producer.stop()


async def consume(bootstrap: str, start: dict[TopicPartition, int], count: int):
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, fetch_max_wait_ms=100
    )
    await consumer.start()
    try:
        consumer.assign(list(start))
        for tp, offset in start.items():
            consumer.seek(tp, offset)
        out = []
        deadline = time.monotonic() + 15
        while len(out) < count and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                out.extend(batch)
        assert len(out) >= count, f"got {len(out)} of {count} records: {out}"
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        await consumer.stop()


def assert_records(got, want: list[Rec], partition: int, first_offset: int) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert (g.partition, g.offset) == (partition, first_offset + i)
        assert (g.key, g.value) == (w.key, w.value), i
        assert [(k, bytes(v)) for k, v in g.headers] == list(w.headers), i
        assert (g.timestamp, g.timestamp_type) == (w.timestamp, 0), i  # 0: CreateTime


def test_create_topics_answer(bootstrap: str) -> None:
    async def main() -> None:
        name = await create_topic(bootstrap, partitions=2, check_response=True)
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            resp = await admin.create_topics([NewTopic(name, 1, 1)])
            errors = [tuple(t[:2]) for t in resp.topic_errors]
            assert errors == [(name, TopicAlreadyExistsError.errno)]
        finally:
            await admin.close()

    asyncio.run(main())


def test_metadata(bootstrap: str) -> None:
    async def main() -> None:
        name = await create_topic(bootstrap, partitions=3)
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            assert name in await admin.list_topics()
            (described,) = await admin.describe_topics([name])
            assert (described["topic"], described["error_code"]) == (name, 0)
            assert sorted(p["partition"] for p in described["partitions"]) == [0, 1, 2]
            cluster = await admin.describe_cluster()
            host, port = bootstrap.rsplit(":", 1)
            assert [(b["host"], b["port"]) for b in cluster["brokers"]] == [(host, int(port))]
        finally:
            await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            assert await producer.partitions_for(name) == {0, 1, 2}
        finally:
            await producer.stop()

    asyncio.run(main())


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c or "none")
def test_roundtrip_every_field(bootstrap: str, codec) -> None:
    async def main() -> None:
        topic = await create_topic(bootstrap)
        recs = sample_records(f"aio-{codec}")
        metas = await produce(bootstrap, topic, recs, compression_type=codec, linger_ms=50)
        assert [(m.partition, m.offset) for m in metas] == [(0, i) for i in range(len(recs))]
        # CreateTime: the broker answers log_append_time -1. (aiokafka 0.14 then gives every
        # record of a batch the first record's timestamp, so only the first is compared.)
        assert metas[0].timestamp == recs[0].timestamp
        got = await consume(bootstrap, {TopicPartition(topic, 0): 0}, len(recs))
        assert_records(got, recs, 0, 0)

    asyncio.run(main())


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(bootstrap: str, acks) -> None:
    async def main() -> None:
        topic = await create_topic(bootstrap)
        recs = sample_records(f"aio-acks-{acks}") * 3
        metas = await produce(bootstrap, topic, recs, acks=acks)
        if acks != 0:  # acks=0 gets no offsets back; the records must still all land, in order
            assert [m.offset for m in metas] == list(range(len(recs)))
        got = await consume(bootstrap, {TopicPartition(topic, 0): 0}, len(recs))
        assert_records(got, recs, 0, 0)

    asyncio.run(main())


def test_seek_offsets_and_timestamps(bootstrap: str) -> None:
    async def main() -> None:
        topic = await create_topic(bootstrap)
        recs = sample_records("aio-seek")
        await produce(bootstrap, topic, recs[:3], linger_ms=50)  # two batches
        await produce(bootstrap, topic, recs[3:], linger_ms=50)
        tp = TopicPartition(topic, 0)
        assert_records(await consume(bootstrap, {tp: 4}, 2), recs[4:], 0, 4)
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
        await consumer.start()
        try:
            assert await consumer.beginning_offsets([tp]) == {tp: 0}
            assert await consumer.end_offsets([tp]) == {tp: len(recs)}
            found = await consumer.offsets_for_times({tp: BASE_TS + 2500})
            assert (found[tp].offset, found[tp].timestamp) == (3, BASE_TS + 3000)
            exact = await consumer.offsets_for_times({tp: BASE_TS + 1000})
            assert (exact[tp].offset, exact[tp].timestamp) == (1, BASE_TS + 1000)
            assert await consumer.offsets_for_times({tp: BASE_TS + 10**6}) == {tp: None}
        finally:
            await consumer.stop()

    asyncio.run(main())


def test_keyed_records_stay_on_their_partition(bootstrap: str) -> None:
    async def main() -> None:
        topic = await create_topic(bootstrap, partitions=3)
        recs = [Rec(f"key-{i % 7}".encode(), f"v{i}".encode(), (), BASE_TS + i) for i in range(40)]
        metas = await produce(bootstrap, topic, recs, partition=None, acks="all")
        by_key: dict[bytes | None, int] = {}
        for r, m in zip(recs, metas, strict=True):
            assert by_key.setdefault(r.key, m.partition) == m.partition
        assert len(set(by_key.values())) > 1, "the client's hash spread 7 keys over 1 partition"
        start = {TopicPartition(topic, p): 0 for p in range(3)}
        got = await consume(bootstrap, start, len(recs))
        stored = {(g.partition, g.offset): g.value for g in got}
        want = {(m.partition, m.offset): r.value for r, m in zip(recs, metas, strict=True)}
        assert stored == want

    asyncio.run(main())
