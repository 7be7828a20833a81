"""Disk faults seen from a client: Produce answers KAFKA_STORAGE_ERROR (never an ack), an
offline partition answers KAFKA_STORAGE_ERROR to Fetch too, and after a restart a fetch shows
exactly the acknowledged records."""

from __future__ import annotations

import errno
from pathlib import Path

import trio
from kio.schema.errors import ErrorCode

from tests.proxy.harness import connect, running_broker
from tests.proxy.test_broker_requests import batch, create, fetch_request, produce
from tests.storage.faulty import faulty_disk
from wire.records import decode_batch_records, iter_batches


def values(records: bytes | None) -> list[bytes | None]:
    data = records or b""
    return [
        r.value
        for pos, h in iter_batches(data)
        for r in decode_batch_records(data[pos : pos + h.total_size])
    ]


async def fetch_values(port: int, topic: str) -> list[bytes | None]:
    async with connect(port) as c:
        part = (await c.request(fetch_request(topic, 0))).responses[0].partitions[0]
        assert part.error_code == ErrorCode.none
        return values(part.records)


async def test_full_disk_then_restart(tmp_path: Path) -> None:
    data = f"file://{tmp_path}"
    acked: list[bytes | None] = []
    with trio.fail_after(30), faulty_disk() as disk:
        async with running_broker(data) as (_, port), connect(port) as c:
            assert await create(c, "full") == ErrorCode.none
            for i in range(6):
                if i == 2:
                    disk.fail("pwrite", err=errno.ENOSPC, persistent=True, partial=20)
                if i == 4:
                    disk.clear()
                value = b"r%d" % i
                part = await produce(c, "full", batch([value]))
                if part.error_code == ErrorCode.none:
                    acked.append(value)
                else:
                    assert part.error_code == ErrorCode.kafka_storage_error
                    assert part.base_offset == -1
            assert acked == [b"r0", b"r1", b"r4", b"r5"]
        async with running_broker(data) as (_, port):
            assert await fetch_values(port, "full") == acked


async def test_failed_fsync_takes_the_partition_offline_until_restart(tmp_path: Path) -> None:
    data = f"file://{tmp_path}"
    durable = {"log.flush.interval.messages": "1"}
    with trio.fail_after(30), faulty_disk() as disk:
        async with running_broker(data, **durable) as (_, port), connect(port) as c:
            assert await create(c, "sick") == ErrorCode.none
            assert await create(c, "well") == ErrorCode.none
            for v in (b"a", b"b"):
                assert (await produce(c, "sick", batch([v]))).error_code == ErrorCode.none
            disk.fail("fdatasync", err=errno.EIO)
            refused = await produce(c, "sick", batch([b"c"]))
            assert refused.error_code == ErrorCode.kafka_storage_error
            disk.clear()
            again = await produce(c, "sick", batch([b"d"]))
            assert again.error_code == ErrorCode.kafka_storage_error  # offline
            resp = await c.request(fetch_request("sick", 0))
            assert resp.responses[0].partitions[0].error_code == ErrorCode.kafka_storage_error
            ok = await produce(c, "well", batch([b"w"]))  # other partitions carry on
            assert ok.error_code == ErrorCode.none
        async with running_broker(data, **durable) as (_, port), connect(port) as c:
            got = await fetch_values(port, "sick")
            assert got in ([b"a", b"b"], [b"a", b"b", b"c"])  # c was refused, maybe written
            assert (await produce(c, "sick", batch([b"e"]))).error_code == ErrorCode.none
            assert (await fetch_values(port, "sick"))[-1] == b"e"
            assert await fetch_values(port, "well") == [b"w"]
