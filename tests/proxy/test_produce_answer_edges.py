"""Edges of the produce handler's own answer (``ProduceAnswer``, wire/produce_response.py) that
kio's classes could not carry: a retained batch's timestamp outside a ``datetime``'s range, and
the acks=0 close of a request naming the empty topic."""

from __future__ import annotations

import datetime
import struct

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9 import request as pr

from proxy.dispatch import Dispatcher
from proxy.outcomes import CloseConnection
from tests.proxy.harness import connect, encode_request, running_broker
from tests.proxy.test_broker_requests import create
from wire.records import Record, build_batch

YEAR_10000 = 253_402_300_800_000  # the first millisecond a datetime cannot hold
LONG_MAX = str(2**63 - 1)


def _request(topic: str, data: bytes, acks: int = -1) -> pr.ProduceRequest:
    return pr.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=1),
        topic_data=(
            pr.TopicProduceData(
                name=topic, partition_data=(pr.PartitionProduceData(index=0, records=data),)
            ),
        ),
    )


def _one_partition(frame: bytes, topic: str) -> tuple[int, int, int]:
    """(error code, base offset, log append time) of a v9 answer of one topic, one partition
    (read by hand: kio's reader cannot hold a timestamp past year 9999)."""
    pos = 4 + 4 + 1 + 1  # size, correlation id, header tags, one topic
    assert frame[pos] == len(topic) + 1
    pos += 1 + len(topic) + 1 + 4  # the name, one partition, its index
    code, base, append_time = struct.unpack_from(">hqq", frame, pos)
    return code, base, append_time


@pytest.mark.parametrize("ts", [YEAR_10000, 2**62])
async def test_a_retried_batch_is_answered_with_its_retained_timestamp_whatever_it_is(
    ts: int,
) -> None:
    # Kafka's UnifiedLog answers a duplicate with the retained batch's timestamp
    # (LogAppendInfo.setLogAppendTime(duplicate.timestamp)), written as the long it is.
    async with running_broker() as (server, port):
        assert server.broker is not None
        async with connect(port) as c:
            assert await create(c, "t", message_timestamp_after_max_ms=LONG_MAX) == ErrorCode.none
        d = Dispatcher(server.broker)
        data = build_batch(
            [Record(0, 0, b"k", b"v")],
            base_timestamp=ts,
            producer_id=7,
            producer_epoch=0,
            base_sequence=0,
        )
        frame = encode_request(_request("t", data), 1)[4:]
        first = await d.handle(frame)
        assert first is not None
        assert _one_partition(first, "t") == (0, 0, -1)
        again = await d.handle(frame)
        assert again is not None
        assert _one_partition(again, "t") == (0, 0, ts)


async def test_an_acks0_failure_on_the_empty_topic_name_says_so() -> None:
    async with running_broker() as (server, _):
        assert server.broker is not None
        d = Dispatcher(server.broker)
        frame = encode_request(_request("", b"", acks=0), 1)[4:]
        with pytest.raises(CloseConnection) as caught:
            await d.handle(frame)
        assert "[('', 0, 'unknown_topic_or_partition')]" in str(caught.value)
