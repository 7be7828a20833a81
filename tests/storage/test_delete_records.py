"""DeleteRecords on the partition (``Partition.delete_records``, issue 15.2): Kafka's refusals,
-1 as the high watermark, the low watermark returned, segments wholly below the new start
deleted, and producer state, the LSO and the aborted index as a read_committed reader needs
them, before and after a ``kill -9`` (the file backend) or a reopen (memory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.api import LogConfig
from storage.backends import open_store
from storage.partition import Partition
from storage.segment.load import write_checkpoint
from storage.segment.store import FileStore
from tests.storage.test_transactions import (
    NOW,
    E,
    batch,
    open_partition,
    put,
    read_committed,
)
from wire.records import read_batch_header

ONE_BATCH_SEGMENTS = LogConfig(segment_bytes=100)  # every batch rolls a new segment


async def delivered(p: Partition, offset: int) -> tuple[list[int], list[tuple[int, int]]]:
    """A read_committed consumer fetching from ``offset``: the offsets it surfaces (it skips
    the records of the first batch below ``offset``) and the aborted list it was given."""
    got, aborted = await read_committed(p, offset)
    return [o for o in got if o >= offset], aborted


async def test_refusals_and_the_low_watermark(url: str) -> None:
    async with open_store(url) as store:
        p = await open_partition(store)
        for _ in range(4):
            await put(p, batch())
        assert await p.delete_records(5) is E.offset_out_of_range  # past the HW (4)
        assert await p.delete_records(-2) is E.offset_out_of_range  # only -1 is special
        assert p.log_start_offset == 0
        assert await p.delete_records(2) == 2
        assert await p.delete_records(1) == 2  # behind the start: the start is answered
        assert await p.delete_records(-1) == 4  # the high watermark
        assert await read_committed(p, 4) == ([], [])
        compact_only = LogConfig(compact=True, delete=False)
        p.update_config(compact_only, False)
        assert await p.delete_records(4) is E.policy_violation  # even a no-op is refused
        p.update_config(LogConfig(compact=True, delete=True), False)
        assert await p.delete_records(4) == 4


async def test_whole_segments_below_the_start_go(url: str) -> None:
    async with open_store(url) as store:
        p = await open_partition(store, ONE_BATCH_SEGMENTS)
        for _ in range(5):
            await put(p, batch(n=2))  # segments at 0, 2, 4, 6, 8
        assert [s.base_offset for s in p.log.segment_infos()] == [0, 2, 4, 6, 8]
        assert await p.delete_records(5) == 5  # 5 is inside the segment at 4: it stays
        assert [s.base_offset for s in p.log.segment_infos()] == [4, 6, 8]
        with pytest.raises(ValueError):
            await p.read(4, 1 << 20)  # below the start: the fetch answers OFFSET_OUT_OF_RANGE
        assert await delivered(p, 5) == ([5, 6, 7, 8, 9], [])


@pytest.mark.parametrize("restart", [False, True], ids=["live", "kill9"])
async def test_start_inside_an_open_transaction(url: str, restart: bool) -> None:
    """P5's transaction began at 1; the new start (3) falls inside it. As in Kafka the
    transaction stays open and the LSO is clamped to the start, so read_committed readers see
    nothing past it until the marker; then the abort is indexed from its original first offset
    and P5's batches after the start are dropped. A kill -9 in between changes none of this
    (the snapshot ``delete_records`` takes at the high watermark): without it the replay from
    the start would find P5's transaction beginning at 4, and the LSO would move from 3 to 4."""
    if restart and url.startswith("memory"):
        pytest.skip("nothing of a memory store survives its process")
    async with open_store(url) as store:
        p = await open_partition(store)  # one segment: no roll snapshots to fall back on
        await put(p, batch())  # 0
        assert await put(p, batch(5, 0, 0, txn=True)) == 1
        await put(p, batch(n=2))  # 2-3
        assert await put(p, batch(5, 0, 1, txn=True)) == 4
        await put(p, batch())  # 5
        assert (p.last_stable_offset, p.high_watermark) == (1, 6)
        assert await p.delete_records(3) == 3
        assert (p.log_start_offset, p.last_stable_offset, p.producers.ongoing) == (3, 3, {5: 1})
        assert await delivered(p, 3) == ([], [])
        if not restart:
            await abort_and_read(p)
            return
        assert isinstance(store, FileStore)
        store.abandon()
    async with open_store(url) as store:
        await abort_and_read(await open_partition(store))


async def abort_and_read(p: Partition) -> None:
    assert (p.log_start_offset, p.last_stable_offset, p.high_watermark) == (3, 3, 6)
    assert p.producers.ongoing == {5: 1}
    assert await p.write_marker(5, 0, False, 0, NOW) == 6
    assert p.last_stable_offset == 7
    assert await delivered(p, 3) == ([3, 5], [(5, 1)])


async def test_start_before_an_open_transaction_leaves_the_lso(url: str) -> None:
    async with open_store(url) as store:
        p = await open_partition(store)
        await put(p, batch(n=3))  # 0-2
        assert await put(p, batch(6, 0, 0, txn=True)) == 3
        await put(p, batch())
        assert await p.delete_records(2) == 2
        assert (p.last_stable_offset, p.producers.ongoing) == (3, {6: 3})
        assert await p.delete_records(-1) == 5  # the HW: now past the transaction's start
        assert p.last_stable_offset == 5
        assert await p.write_marker(6, 0, True, 0, NOW) == 5
        assert p.last_stable_offset == 6
        assert await p.delete_records(-1) == 6
        assert p.producers.ongoing == {}


async def test_aborted_entries_ending_below_the_start_go(url: str) -> None:
    async with open_store(url) as store:
        p = await open_partition(store)
        await put(p, batch(1, 0, 0, txn=True))  # 0
        await put(p, batch(2, 0, 0, txn=True))  # 1
        assert await p.write_marker(1, 0, False, 0, NOW) == 2
        assert await p.write_marker(2, 0, False, 0, NOW) == 3
        await put(p, batch())  # 4
        assert [a.producer_id for a in p.producers.aborted] == [1, 2]
        assert await p.delete_records(3) == 3  # 1's abort ended at 2, 2's at 3 (kept)
        assert [a.producer_id for a in p.producers.aborted] == [2]
        assert await delivered(p, 3) == ([4], [(2, 1)])
        assert await p.delete_records(4) == 4
        assert p.producers.aborted == []


@pytest.mark.parametrize("restart", ["clean", "kill9"])
async def test_an_idempotent_producer_whose_batches_all_went_survives(
    tmp_path: Path, restart: str
) -> None:
    """Kafka forgets such a producer after an unclean restart (``truncateAndReload`` replays
    from the new start), so a retry of its last batch would be appended a second time;
    kafkad's snapshot at the high watermark keeps it, and the retry is a duplicate."""
    url = f"file://{tmp_path / 'data'}"
    async with open_store(url) as store:
        p = await open_partition(store)
        for seq in range(3):
            assert await put(p, batch(7, 0, seq)) == seq
        assert await p.delete_records(-1) == 3
        if restart == "clean":
            await p.take_snapshot()
        else:
            assert isinstance(store, FileStore)
            store.abandon()
    async with open_store(url) as store:
        p = await open_partition(store)
        assert (p.log_start_offset, p.high_watermark) == (3, 3)
        retry = batch(7, 0, 2)  # the ack of seq 2 was lost: the producer sends it again
        assert await p.append(retry, read_batch_header(retry), NOW) == (2, NOW)
        assert p.high_watermark == 3  # answered with its original offset, not appended
        assert await put(p, batch(7, 0, 3)) == 3


async def test_the_start_survives_kill9(file_url: str) -> None:
    """The ``log-start-offset`` checkpoint is written (fsynced) before the start moves: a start
    inside a segment comes back after a kill -9, and the segments below it stay gone."""
    async with open_store(file_url) as store:
        p = await open_partition(store, ONE_BATCH_SEGMENTS)
        for _ in range(5):
            await put(p, batch(n=2))
        assert await p.delete_records(5) == 5
        assert isinstance(store, FileStore)
        store.abandon()
    async with open_store(file_url) as store:
        p = await open_partition(store, ONE_BATCH_SEGMENTS)
        assert (p.log_start_offset, p.high_watermark) == (5, 10)
        assert [s.base_offset for s in p.log.segment_infos()] == [4, 6, 8]
        assert await delivered(p, 5) == ([5, 6, 7, 8, 9], [])


async def test_a_crash_between_checkpoint_and_deletion_finishes_the_deletion(
    tmp_path: Path,
) -> None:
    """The checkpoint is written first; if the process dies before the segments below it are
    deleted, the next open deletes them (else they would stay until time retention)."""
    url = f"file://{tmp_path / 'data'}"
    async with open_store(url) as store:
        p = await open_partition(store, ONE_BATCH_SEGMENTS)
        for _ in range(5):
            await put(p, batch(n=2))
        assert isinstance(store, FileStore)
        store.abandon()
    directory = tmp_path / "data" / "t-0"
    write_checkpoint(directory, 5)  # delete_before(5)'s first step, and then the kill
    async with open_store(url) as store:
        p = await open_partition(store, ONE_BATCH_SEGMENTS)
        assert (p.log_start_offset, p.high_watermark) == (5, 10)
        assert [s.base_offset for s in p.log.segment_infos()] == [4, 6, 8]
        assert sorted(int(f.stem) for f in directory.glob("*.log")) == [4, 6, 8]
        assert await delivered(p, 5) == ([5, 6, 7, 8, 9], [])
