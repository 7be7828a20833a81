"""The log cleaner on the file backend: cleaned segments survive clean and unclean restarts,
a crash at every step of the swap leaves either the old or the new segments (never a mix),
and a disk error before the commit point leaves the log usable and unchanged."""

from __future__ import annotations

import errno
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.lowlevel

from storage.api import LogConfig
from storage.backends import open_store
from storage.cleaner.policy import plan
from storage.cleaner.runner import PassResult, Throttle, clean_partition
from storage.partition import Partition
from storage.segment import osio, swap
from storage.segment.store import FileStore
from tests.storage.faulty import FaultyDisk
from tests.storage.test_transactions import NOW, open_partition, put
from wire.records import Record, build_batch

CFG = LogConfig(
    segment_bytes=400,
    compact=True,
    delete=False,
    delete_retention_ms=1000,
    min_cleanable_dirty_ratio=0.0,
)


class SimulatedCrash(Exception):
    pass


async def fill(p: Partition) -> None:
    """Keyed writes (5 keys overwritten many times, a tombstone), a committed and an aborted
    transaction, then an open one: enough for several segments."""
    seq = 0
    for i in range(40):
        value = None if i == 33 else b"v%d" % i
        await put(p, build_batch([Record(0, 0, b"k%d" % (i % 5), value)], base_timestamp=NOW))
        if i in (10, 20):
            pid = 100 + i
            await put(
                p,
                build_batch(
                    [Record(0, 0, b"t%d" % i, b"x")],
                    base_timestamp=NOW,
                    producer_id=pid,
                    producer_epoch=0,
                    base_sequence=0,
                    transactional=True,
                ),
            )
            await p.write_marker(pid, 0, i == 10, 0, NOW)
    await put(
        p,
        build_batch(
            [Record(0, 0, b"open", b"x")],
            base_timestamp=NOW,
            producer_id=7,
            producer_epoch=0,
            base_sequence=seq,
            transactional=True,
        ),
    )
    await put(p, build_batch([Record(0, 0, b"k0", b"after")], base_timestamp=NOW))


async def clean(p: Partition, now: int = NOW + 1) -> PassResult:
    pl = plan(
        p.log.segment_infos(),
        CFG,
        checkpoint=None,
        log_start=p.log_start_offset,
        log_end=p.high_watermark,
        last_stable=p.last_stable_offset,
        now_ms=now,
    )
    return await clean_partition(p, pl, now, max_map_entries=1000, throttle=Throttle(float("inf")))


async def whole(p: Partition) -> bytes:
    return await p.read(p.log_start_offset, 1 << 30)


async def build(root: Path) -> None:
    async with open_store(f"file://{root}") as store:
        await fill(await open_partition(store, CFG))


@pytest.fixture
def no_hook() -> Iterator[None]:
    yield
    swap.hook = None


async def test_cleaned_segments_survive_restarts(tmp_path: Path) -> None:
    root = tmp_path / "d"
    await build(root)
    async with open_store(f"file://{root}") as store:
        p = await open_partition(store, CFG)
        before = await whole(p)
        r = await clean(p)
        assert r.complete and r.bytes_written < r.bytes_read / 4
        after = await whole(p)
        assert len(after) < len(before)
        hw, lso = p.high_watermark, p.last_stable_offset
    async with open_store(f"file://{root}") as store:  # clean restart
        p = await open_partition(store, CFG)
        assert await whole(p) == after
        assert (p.high_watermark, p.last_stable_offset) == (hw, lso)
        assert isinstance(store, FileStore)
        store.abandon()
    async with open_store(f"file://{root}") as store:  # kill -9 restart
        p = await open_partition(store, CFG)
        assert await whole(p) == after
        assert (p.high_watermark, p.last_stable_offset) == (hw, lso)
        r = await clean(p, NOW + 5000)  # a second pass: the horizons have passed
        assert r.complete and r.segments_after < r.segments_before  # small ones are merged
        assert len(await whole(p)) < len(after)
        assert not list((root / "t-0").glob("*.cleaned")) + list((root / "t-0").glob("*.swap"))


@pytest.mark.parametrize("step", swap.STEPS)
async def test_crash_at_each_step_of_the_swap(tmp_path: Path, step: str, no_hook: None) -> None:
    root, twin = tmp_path / "d", tmp_path / "twin"
    await build(root)
    shutil.copytree(root, twin)
    async with open_store(f"file://{twin}") as store:  # the same clean, uninterrupted
        p = await open_partition(store, CFG)
        before = await whole(p)
        await clean(p)
        after = await whole(p)
    assert after != before

    def crash(at: str) -> None:
        if at == step:
            raise SimulatedCrash(at)

    async with open_store(f"file://{root}") as store:
        p = await open_partition(store, CFG)
        swap.hook = crash
        with pytest.raises(SimulatedCrash):
            await clean(p)
        swap.hook = None
        assert isinstance(store, FileStore)
        store.abandon()
    async with open_store(f"file://{root}") as store:
        p = await open_partition(store, CFG)
        got = await whole(p)
        committed = swap.STEPS.index(step) > swap.STEPS.index("write-manifest")
        # the first group was swapped (or not) as a whole; later groups were never started
        if committed:
            assert got != before
            r = await clean(p)  # finishing the pass gives the uninterrupted result
            assert r.complete
            assert await whole(p) == after
        else:
            assert got == before
        names = [f.name for f in (root / "t-0").iterdir()]
        assert not [n for n in names if n.endswith((".cleaned", ".swap"))]


async def test_a_disk_error_before_the_commit_leaves_the_log_usable(tmp_path: Path) -> None:
    root = tmp_path / "d"
    await build(root)
    disk = FaultyDisk()
    async with open_store(f"file://{root}") as store:
        p = await open_partition(store, CFG)
        before = await whole(p)
        old = osio.install(disk)
        try:
            disk.fail("fsync", err=errno.EIO)  # the first .cleaned file's fsync
            with pytest.raises(Exception, match="cleaned segment"):
                await clean(p)
        finally:
            osio.install(old)
        assert await whole(p) == before
        assert not list((root / "t-0").glob("*.cleaned"))
        await put(p, build_batch([Record(0, 0, b"k1", b"more")], base_timestamp=NOW))
        r = await clean(p)
        assert r.complete


async def test_reads_in_flight_during_a_swap_see_whole_batches(tmp_path: Path) -> None:
    root = tmp_path / "d"
    await build(root)
    async with open_store(f"file://{root}") as store:
        p = await open_partition(store, CFG)
        before = await whole(p)
        results: list[bytes] = []

        async def reader() -> None:
            for _ in range(20):
                results.append(await whole(p))
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as n:
            n.start_soon(reader)
            await clean(p)
        after = await whole(p)
        assert all(r in (before, after) for r in results)
