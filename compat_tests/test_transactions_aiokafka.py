"""Transactions end to end with aiokafka, which speaks v0 of every transaction API: the eight
scenarios of issue 5 (commit across topics and partitions; an abort hidden from read_committed
but returned to read_uncommitted; an open transaction holding back later records at the LSO; two
interleaved transactions on one partition; consume-transform-produce with
send_offsets_to_transaction (aiokafka sends the group id only); zombie fencing; a vanished
producer's transaction aborted by its timeout; 200 back-to-back transactions). Transactions run
in ``async with producer.transaction()``; an abort is an exception leaving that block.

Reads go through confluent-kafka (`read_all`, in a worker thread so the loop keeps running) and
through aiokafka's own read_committed consumer. Every expectation is Kafka's own: run against
Apache Kafka with KAFKAD_BOOTSTRAP (the vanished-producer test, which needs a broker setting, is
skipped then). Each test runs its own asyncio loop (pytest runs async tests under trio here).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError, ProducerFenced

from compat_tests._support import EXTERNAL, topic_name
from compat_tests.txn_support import (
    by_partition,
    check_vanished_transaction_is_aborted,
    committed_values,
    create,
    produce_plain,
    read_all,
    settles,
    uncommitted_values,
)

pytestmark = pytest.mark.timeout(60)
T = TypeVar("T")
Make = Callable[..., Awaitable[AIOKafkaProducer]]


class Abort(Exception):
    """Raised inside ``producer.transaction()`` to abort it."""


async def settled(read: Callable[[], T], want: T) -> None:
    await asyncio.to_thread(settles, read, want)


@asynccontextmanager
async def producers(bs: str) -> AsyncIterator[Make]:
    """A factory of started transactional producers, all stopped at the end."""
    live: list[AIOKafkaProducer] = []

    async def make(tid: str | None = None) -> AIOKafkaProducer:
        tid = tid or topic_name("tid")
        p = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=tid, linger_ms=5)
        live.append(p)
        await p.start()
        return p

    try:
        yield make
    finally:
        for p in live:
            with suppress(KafkaError):  # a fenced producer may say so again
                await asyncio.wait_for(p.stop(), 10)


async def own_read(bs: str, tps: list[tuple[str, int]]) -> list[ConsumerRecord[Any, Any]]:
    """aiokafka's read_committed consumer, from the start up to its end offsets (the LSO),
    in the order it hands the records out."""
    c = AIOKafkaConsumer(
        bootstrap_servers=bs,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
        fetch_max_wait_ms=100,
    )
    await c.start()
    try:
        parts = [TopicPartition(t, p) for t, p in tps]
        c.assign(parts)
        await c.seek_to_beginning()
        ends = await c.end_offsets(parts)
        out: list[ConsumerRecord[Any, Any]] = []
        deadline = time.monotonic() + 15
        while [tp for tp in parts if await c.position(tp) < ends[tp]]:
            assert time.monotonic() < deadline, f"stuck before {ends}: {out}"
            for recs in (await c.getmany(timeout_ms=100)).values():
                out += recs
        return out
    finally:
        await c.stop()


async def own_values(bs: str, topic: str) -> list[bytes]:
    return [r.value for r in await own_read(bs, [(topic, 0)])]


def test_commit_across_partitions_and_abort_hidden(bootstrap: str) -> None:
    a, b = create(bootstrap, topic_name("txa"), 3), create(bootstrap, topic_name("txb"), 1)
    tps = [(a, 0), (a, 1), (a, 2), (b, 0)]

    def val(n: int, t: str, part: int, i: int) -> bytes:
        return f"txn{n}-{t[:3]}-{part}-{i}".encode()

    async def main() -> None:
        async with producers(bootstrap) as make:
            p = await make()
            for n, commit in ((1, True), (2, False), (3, True)):
                with suppress(Abort):
                    async with p.transaction():
                        for t, part in tps:
                            for i in (0, 1):
                                await p.send_and_wait(t, val(n, t, part, i), partition=part)
                        if not commit:
                            raise Abort  # written, then aborted
        want = {tp: [val(n, *tp, i) for n in (1, 3) for i in (0, 1)] for tp in tps}
        await settled(lambda: by_partition(read_all(bootstrap, tps, "read_committed")), want)
        mine = await own_read(bootstrap, tps)
        assert by_partition([(r.topic, r.partition, r.value) for r in mine]) == want
        everything = {tp: [val(n, *tp, i) for n in (1, 2, 3) for i in (0, 1)] for tp in tps}
        assert by_partition(read_all(bootstrap, tps, "read_uncommitted")) == everything

    asyncio.run(main())


def test_open_transaction_holds_back_later_records(bootstrap: str) -> None:
    t = create(bootstrap, topic_name("lso"), 1)
    produce_plain(bootstrap, t, [b"before"])

    async def main() -> None:
        async with producers(bootstrap) as make:
            p = await make()
            async with p.transaction():
                await p.send_and_wait(t, b"in-txn", partition=0)
                produce_plain(bootstrap, t, [b"after"])
                assert committed_values(bootstrap, t) == [b"before"]
                assert await own_values(bootstrap, t) == [b"before"]
                assert uncommitted_values(bootstrap, t) == [b"before", b"in-txn", b"after"]
        await settled(lambda: committed_values(bootstrap, t), [b"before", b"in-txn", b"after"])
        assert await own_values(bootstrap, t) == [b"before", b"in-txn", b"after"]

    asyncio.run(main())


def test_interleaved_transactions_on_one_partition(bootstrap: str) -> None:
    t = create(bootstrap, topic_name("interleave"), 1)

    async def main() -> None:
        async with producers(bootstrap) as make:
            first, second = await make(), await make()
            with suppress(Abort):
                async with second.transaction():
                    async with first.transaction():
                        await first.send_and_wait(t, b"a1", partition=0)
                        await second.send_and_wait(t, b"b1", partition=0)
                        await first.send_and_wait(t, b"a2", partition=0)
                    # The second transaction starts at offset 1: only what lies below shows.
                    await settled(lambda: committed_values(bootstrap, t), [b"a1"])
                    assert await own_values(bootstrap, t) == [b"a1"]
                    await second.send_and_wait(t, b"b2", partition=0)
                    raise Abort
        await settled(lambda: committed_values(bootstrap, t), [b"a1", b"a2"])
        assert await own_values(bootstrap, t) == [b"a1", b"a2"]
        assert uncommitted_values(bootstrap, t) == [b"a1", b"b1", b"a2", b"b2"]

    asyncio.run(main())


def test_consume_transform_produce_with_offsets_in_the_transaction(bootstrap: str) -> None:
    src, dst = create(bootstrap, topic_name("src"), 1), create(bootstrap, topic_name("dst"), 1)
    produce_plain(bootstrap, src, [b"in-%d" % i for i in range(10)])
    group = topic_name("ctp")
    tp = TopicPartition(src, 0)

    async def main() -> None:
        consumer = AIOKafkaConsumer(
            src,
            bootstrap_servers=bootstrap,
            group_id=group,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=100,
        )
        await consumer.start()
        try:
            async with producers(bootstrap) as make:
                p = await make()
                taken: list[bytes] = []
                deadline = time.monotonic() + 20
                while len(taken) < 10:
                    assert time.monotonic() < deadline, f"consumed only {taken}"
                    for recs in (await consumer.getmany(timeout_ms=200)).values():
                        taken += [r.value for r in recs]
                # Commit the first half, abort the second, then redo it: the abort changes
                # nothing.
                for lo, hi, commit, offset_after in ((0, 5, 1, 5), (5, 10, 0, 5), (5, 10, 1, 10)):
                    with suppress(Abort):
                        async with p.transaction():
                            for v in taken[lo:hi]:
                                await p.send(dst, v.upper(), partition=0)
                            await p.send_offsets_to_transaction({tp: hi}, group)
                            if not commit:
                                raise Abort
                    # No stable-offset read in OffsetFetch v0-v3: wait out pending offsets.
                    deadline = time.monotonic() + 10
                    while (got := await consumer.committed(tp)) != offset_after:
                        assert time.monotonic() < deadline, (got, offset_after)
                        await asyncio.sleep(0.05)
                    want = [v.upper() for v in taken[:offset_after]]
                    await settled(lambda: committed_values(bootstrap, dst), want)
            assert await own_values(bootstrap, dst) == [b"IN-%d" % i for i in range(10)]
        finally:
            await consumer.stop()

    asyncio.run(main())


def test_a_new_instance_fences_the_zombie(bootstrap: str) -> None:
    """Each time a new instance with the same transactional.id has fenced the one before, the
    fenced one tries one thing: produce, commit offsets, or commit. Each must fail."""
    t, src = create(bootstrap, topic_name("zombie"), 2), create(bootstrap, topic_name("zsrc"), 1)
    tid, group = topic_name("tid"), topic_name("zgroup")

    async def main() -> None:
        async with producers(bootstrap) as make:
            current = await make(tid)
            for action in ("produce", "send_offsets", "commit"):
                zombie = current
                await zombie.begin_transaction()
                await zombie.send_and_wait(t, f"zombie-{action}".encode(), partition=0)
                current = await make(tid)  # fences it and aborts its transaction
                with pytest.raises(KafkaError) as info:
                    if action == "produce":
                        await zombie.send_and_wait(t, b"zombie-late", partition=0)
                    elif action == "send_offsets":
                        await zombie.send_offsets_to_transaction({TopicPartition(src, 0): 1}, group)
                    else:
                        await zombie.commit_transaction()
                assert isinstance(info.value, ProducerFenced), repr(info.value)
            async with current.transaction():
                await current.send(t, b"fresh", partition=1)
        tps = [(t, 0), (t, 1)]
        await settled(lambda: read_all(bootstrap, tps, "read_committed"), [(t, 1, b"fresh")])
        zombies = [b"zombie-produce", b"zombie-send_offsets", b"zombie-commit"]
        assert uncommitted_values(bootstrap, t) == zombies  # aborted, nothing written later
        probe = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
        await probe.start()
        try:
            assert await probe.committed(TopicPartition(src, 0)) is None
        finally:
            await probe.stop()

    asyncio.run(main())


def test_vanished_producer_is_aborted_by_its_timeout(tmp_path: Path) -> None:
    if EXTERNAL:
        pytest.skip("needs a short transaction.abort.timed.out.transaction.cleanup.interval.ms")

    def own(bs: str, topic: str) -> list[bytes]:
        return asyncio.run(own_values(bs, topic))

    check_vanished_transaction_is_aborted(tmp_path, "aiokafka", own)


def test_200_back_to_back_transactions(bootstrap: str) -> None:
    t = create(bootstrap, topic_name("many"), 1)
    want = [b"%03d" % i for i in range(200)]

    async def main() -> None:
        async with producers(bootstrap) as make:
            p = await make()
            for v in want:
                async with p.transaction():
                    await p.send(t, v, partition=0)
        await settled(lambda: committed_values(bootstrap, t), want)
        mine = await own_read(bootstrap, [(t, 0)])
        # One record and one commit marker per transaction.
        assert [(r.offset, r.value) for r in mine] == [(2 * i, v) for i, v in enumerate(want)]

    asyncio.run(main())
