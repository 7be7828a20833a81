"""The topic config compression.type (Kafka's values): the broker stores batches in the
topic's codec, recompressing those of another one (Kafka's LogValidator); producer keeps each
batch's own."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tests.proxy.harness import connect, running_broker
from tests.proxy.test_broker_requests import batch, create, fetch_request, produce
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
