"""DeleteRecords (key 21) over the wire, every version: the low watermark, -1 as the high
watermark, Kafka's per-partition errors, what Fetch and ListOffsets see at once, read_committed
across a start inside an open transaction, the error reply, and the start after a restart."""

from __future__ import annotations

import errno
import importlib
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode

from proxy.registry import advertised, entry
from storage.api import CONSUMER_OFFSETS, TopicPartition
from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_broker_requests import create
from tests.proxy.test_transactions import (
    MS,
    P1,
    TS,
    delivered,
    fetch,
    install,
    list_offset,
    marker,
    plain,
    produce,
    tbatch,
)
from tests.storage.faulty import faulty_disk
from wire.records import Record, build_batch

E = ErrorCode
EARLIEST, LATEST = -2, -1
VERSIONS = (0, 1, 2)


def request(version: int, *asks: tuple[str, int, int]) -> Any:
    """A DeleteRecords request of ``version`` for (topic, partition, offset) triples."""
    m = importlib.import_module(f"kio.schema.delete_records.v{version}.request")
    topics: dict[str, list[Any]] = {}
    for topic, partition, offset in asks:
        topics.setdefault(topic, []).append(
            m.DeleteRecordsPartition(partition_index=partition, offset=offset)
        )
    return m.DeleteRecordsRequest(
        topics=tuple(
            m.DeleteRecordsTopic(name=name, partitions=tuple(parts))
            for name, parts in topics.items()
        ),
        timeout=1000 * MS,
    )


async def delete(
    c: RawClient, *asks: tuple[str, int, int], version: int = 2
) -> dict[tuple[str, int], tuple[int, ErrorCode]]:
    """(topic, partition) -> (low watermark, error code), each partition answered once."""
    resp = await c.request(request(version, *asks))
    out: dict[tuple[str, int], tuple[int, ErrorCode]] = {}
    for t in resp.topics:
        for p in t.partitions:
            assert (t.name, p.partition_index) not in out
            out[(t.name, p.partition_index)] = (p.low_watermark, p.error_code)
    return out


def test_advertised_versions() -> None:
    assert advertised()[21] == (0, 2)  # Kafka 4.x: DeleteRecords v0-2 (KIP-896 kept them)


@pytest.mark.parametrize("version", VERSIONS)
async def test_moves_the_start_and_answers_the_low_watermark(version: int) -> None:
    with trio.fail_after(10):
        async with running_broker() as (_, port), connect(port) as c:
            assert await create(c, "t", 2) == E.none
            for _ in range(5):
                assert (await produce(c, "t", plain(), txn=None)).error_code is E.none
            got = await delete(c, ("t", 0, 3), ("t", 1, 0), version=version)
            assert got == {("t", 0): (3, E.none), ("t", 1): (0, E.none)}
            assert await list_offset(c, "t", EARLIEST, False) == (3, -1)
            assert (await fetch(c, "t", 2, False)).error_code is E.offset_out_of_range
            part = await fetch(c, "t", 3, False)
            assert part.error_code is E.none and part.log_start_offset == 3
            assert [o for o in delivered(part) if o >= 3] == [3, 4]
            # -1: the high watermark; below the start: the start, unchanged
            assert await delete(c, ("t", 0, -1), version=version) == {("t", 0): (5, E.none)}
            assert await delete(c, ("t", 0, 4), version=version) == {("t", 0): (5, E.none)}
            assert await list_offset(c, "t", EARLIEST, False) == (5, -1)
            assert await list_offset(c, "t", LATEST, False) == (5, -1)
            assert (await produce(c, "t", plain(), txn=None)).base_offset == 5


async def test_per_partition_errors() -> None:
    with trio.fail_after(10):
        async with running_broker() as (server, port), connect(port) as c:
            assert server.broker is not None
            assert await create(c, "t") == E.none
            assert await create(c, "c", cleanup_policy="compact") == E.none
            assert await create(c, "cd", cleanup_policy="compact,delete") == E.none
            assert await create(c, "none", cleanup_policy="") == E.none  # Kafka 4.2: valid
            for topic in ("t", "c", "cd", "none"):
                for _ in range(3):
                    keyed = build_batch([Record(0, 0, b"k", b"v")], base_timestamp=TS)
                    assert (await produce(c, topic, keyed, txn=None)).error_code is E.none
            got = await delete(
                c,
                ("t", 0, 4),  # past the high watermark (3)
                ("t", 1, 0),  # no such partition
                ("nope", 0, 0),
                ("c", 0, 1),  # compact only
                ("cd", 0, 1),  # compact,delete: allowed
                ("none", 0, 2),  # empty: allowed (Partition.deleteRecordsOnLeader refuses
                # only !delete && compact)
            )
            assert got == {
                ("t", 0): (-1, E.offset_out_of_range),
                ("t", 1): (-1, E.unknown_topic_or_partition),
                ("nope", 0): (-1, E.unknown_topic_or_partition),
                ("c", 0): (-1, E.policy_violation),
                ("cd", 0): (1, E.none),
                ("none", 0): (2, E.none),
            }
            assert await delete(c, ("t", 0, -2)) == {("t", 0): (-1, E.offset_out_of_range)}
            assert await list_offset(c, "t", EARLIEST, False) == (0, -1)
            # an internal topic: unknown until it exists, then INVALID_TOPIC_EXCEPTION
            assert await delete(c, (CONSUMER_OFFSETS, 0, 0)) == {
                (CONSUMER_OFFSETS, 0): (-1, E.unknown_topic_or_partition)
            }
            await server.broker.topics.create_internal(CONSUMER_OFFSETS)
            assert await delete(c, (CONSUMER_OFFSETS, 0, 0)) == {
                (CONSUMER_OFFSETS, 0): (-1, E.invalid_topic_exception)
            }


async def test_a_partition_named_twice_is_answered_once_with_the_last_offset() -> None:
    with trio.fail_after(10):
        async with running_broker() as (_, port), connect(port) as c:
            assert await create(c, "t") == E.none
            for _ in range(4):
                await produce(c, "t", plain(), txn=None)
            assert await delete(c, ("t", 0, 1), ("t", 0, 3)) == {("t", 0): (3, E.none)}


async def test_read_committed_with_the_start_inside_an_open_transaction() -> None:
    """The transaction stays open and holds the LSO at the new start (Kafka clamps the first
    unstable offset to the log start); after the abort, read_committed drops its batches."""
    with trio.fail_after(10):
        async with running_broker() as (server, port), connect(port) as c:
            broker = server.broker
            assert broker is not None and await create(c, "t") == E.none
            v = install(broker)
            v.add(P1, 0, TopicPartition("t", 0))
            await produce(c, "t", plain(), txn=None)  # 0
            assert (await produce(c, "t", tbatch(P1, 0))).base_offset == 1
            await produce(c, "t", plain(), txn=None)  # 2
            await produce(c, "t", plain(), txn=None)  # 3
            assert (await produce(c, "t", tbatch(P1, 1))).base_offset == 4
            assert await delete(c, ("t", 0, 2)) == {("t", 0): (2, E.none)}
            assert await list_offset(c, "t", LATEST, True) == (2, -1)  # the LSO
            assert delivered(await fetch(c, "t", 2, True)) == []
            assert [o for o in delivered(await fetch(c, "t", 2, False)) if o >= 2] == [2, 3, 4]
            await marker(broker, "t", P1, commit=False)  # 5
            part = await fetch(c, "t", 2, True)
            assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(P1, 1)]
            assert [o for o in delivered(part) if o >= 2] == [2, 3]


@pytest.mark.parametrize("version", VERSIONS)
def test_error_reply_echoes_every_partition(version: int) -> None:
    req = request(version, ("a", 0, 1), ("a", 2, 1), ("b", 1, -1))
    h = entry(21)
    reply = h.error_reply(h.read(req), E.unknown_server_error)
    resp = h.write(reply, req, version)
    assert int(resp.__version__) == version
    got = [
        (t.name, p.partition_index, p.low_watermark, p.error_code)
        for t in resp.topics
        for p in t.partitions
    ]
    assert got == [
        ("a", 0, -1, E.unknown_server_error),
        ("a", 2, -1, E.unknown_server_error),
        ("b", 1, -1, E.unknown_server_error),
    ]


async def test_the_start_survives_a_restart(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    with trio.fail_after(20):
        async with running_broker(data) as (_, port), connect(port) as c:
            assert await create(c, "t") == E.none
            for _ in range(4):
                await produce(c, "t", plain(), txn=None)
            assert await delete(c, ("t", 0, 3)) == {("t", 0): (3, E.none)}
        async with running_broker(data) as (_, port), connect(port) as c:
            assert await list_offset(c, "t", EARLIEST, False) == (3, -1)
            assert (await fetch(c, "t", 0, False)).error_code is E.offset_out_of_range


async def test_a_long_poll_below_the_new_start_is_answered_at_once() -> None:
    """A read_committed fetch waits at the LSO (an open transaction at 1); when the start
    moves past its offset it gets OFFSET_OUT_OF_RANGE at once, not after ``max_wait``."""
    with trio.fail_after(20):
        async with running_broker() as (server, port), connect(port) as c, connect(port) as c2:
            broker = server.broker
            assert broker is not None and await create(c, "t") == E.none
            install(broker).add(P1, 0, TopicPartition("t", 0))
            await produce(c, "t", plain(), txn=None)  # 0
            assert (await produce(c, "t", tbatch(P1, 0))).base_offset == 1
            await produce(c, "t", plain(), txn=None)  # 2
            got: list[Any] = []

            async def poll() -> None:
                got.append(await fetch(c2, "t", 1, True, wait_ms=60_000))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(poll)
                await trio.testing.wait_all_tasks_blocked()
                assert await delete(c, ("t", 0, 3)) == {("t", 0): (3, E.none)}
            assert got[0].error_code is E.offset_out_of_range


async def test_a_checkpoint_that_cannot_be_written_is_a_storage_error(tmp_path: Path) -> None:
    """The start moves only once its checkpoint is on disk: a full disk answers
    KAFKA_STORAGE_ERROR (low watermark -1) and leaves the start, and the broker serving."""
    with trio.fail_after(20), faulty_disk() as disk:
        async with running_broker(f"file://{tmp_path}") as (_, port), connect(port) as c:
            assert await create(c, "t") == E.none
            for _ in range(3):
                await produce(c, "t", plain(), txn=None)
            disk.fail("write", err=errno.ENOSPC, persistent=True)
            assert await delete(c, ("t", 0, 2)) == {("t", 0): (-1, E.kafka_storage_error)}
            disk.clear()
            assert await list_offset(c, "t", EARLIEST, False) == (0, -1)
            assert await delete(c, ("t", 0, 2)) == {("t", 0): (2, E.none)}
            assert await list_offset(c, "t", EARLIEST, False) == (2, -1)
