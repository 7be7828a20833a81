"""A Produce to many partitions lets other tasks run between partitions (every
``produce.YIELD_BYTES`` of batches): a partition's free lock is taken without a scheduler pass
(``storage.append_lock.FastLock``), so without these yields a large multi-partition request
held the run loop for its whole length (other connections' requests, heartbeats among them,
waited for it)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.lowlevel
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9 import request as pr

from proxy.handlers import produce as produce_handler
from storage.partition import Partition
from tests.proxy.harness import connect, running_broker
from tests.proxy.test_broker_requests import create
from tests.proxy.test_produce_records import MS, NOW
from wire.records import Record, build_batch


async def test_a_produce_to_many_partitions_yields_between_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ticks = 0
    seen: list[int] = []  # the ticker's count at each append
    append = Partition.append

    async def spy(self: Partition, *args: Any, **kw: Any) -> Any:
        seen.append(ticks)
        return await append(self, *args, **kw)

    monkeypatch.setattr(Partition, "append", spy)

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.lowlevel.checkpoint()

    # 11 yields: the ticker misses one with odds 1/4 (trio may run it just before the handler
    # in one pass and just after it in the next)
    partitions, size = 24, produce_handler.YIELD_BYTES // 2
    data = build_batch([Record(0, 0, None, b"x" * size)], base_timestamp=NOW)
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t", partitions) is ErrorCode.none
        request = pr.ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout=1000 * MS,
            topic_data=(
                pr.TopicProduceData(
                    name="t",
                    partition_data=tuple(
                        pr.PartitionProduceData(index=i, records=data) for i in range(partitions)
                    ),
                ),
            ),
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ticker)
            resp = await c.request(request)
            nursery.cancel_scope.cancel()
    codes = [p.error_code for p in resp.responses[0].partition_responses]
    assert codes == [ErrorCode.none] * partitions
    assert len(seen) == partitions
    assert seen[-1] > seen[0]  # the ticker ran while the request was being handled
