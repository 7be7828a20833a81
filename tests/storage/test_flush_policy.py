"""``flush.messages`` / ``flush.ms`` (issue 23.12): what they say, counted at the disk seam; and
``file.delete.delay.ms`` (issue 23.13): when retention's files really go.

Appends go through the file backend's ``osio`` seam (``FaultyDisk`` with no faults set only
counts calls): the group commit syncs with ``fdatasync``, sealing a rolled segment and closing
use ``fsync``, so ``fdatasync`` counts the flushes these settings cause. Segments are large
here, so nothing rolls."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.lowlevel
import trio.testing

from storage.api import LogConfig, TopicMeta, TopicPartition
from storage.backends import open_store
from storage.partition import Partition
from storage.segment import osio
from tests.storage.conftest import append
from tests.storage.faulty import faulty_disk
from tests.storage.test_file_backend import open_log, opened
from tests.storage.test_transactions import batch, open_partition, put


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "data"


async def until(done: Callable[[], bool], what: str) -> None:
    """Wait (real time, bounded) until ``done()``: fsyncs and unlinks run in worker threads,
    which a mock clock does not see."""
    deadline = time.monotonic() + 30
    while not done():
        assert time.monotonic() < deadline, what
        await trio.lowlevel.checkpoint()


async def test_flush_messages_fsyncs_once_that_many_offsets_are_unflushed(root: Path) -> None:
    with faulty_disk() as disk:
        async with opened(root) as store:
            log = await open_log(store, LogConfig(flush_messages=3))

            async def appended(count: int = 1) -> int:
                await append(log, count)  # returns once acknowledged
                return disk.calls["fdatasync"]

            assert [await appended() for _ in range(7)] == [0, 0, 1, 1, 1, 2, 2]
            assert log.durable_offset == 6
            assert await appended(5) == 3  # 6 unflushed: one fsync before the ack
            assert log.durable_offset == log.log_end_offset == 12


async def test_flush_messages_default_never_fsyncs_an_append(root: Path) -> None:
    with faulty_disk() as disk:
        async with opened(root) as store:
            log = await open_log(store, LogConfig())
            for _ in range(50):
                await append(log, 100)
            assert disk.calls["fdatasync"] == 0


async def test_flush_ms_fsyncs_that_long_after_the_last_flush(
    root: Path, mock_clock: trio.testing.MockClock
) -> None:
    with faulty_disk() as disk:
        async with opened(root) as store:
            log = await open_log(store, LogConfig(flush_ms=1_000))

            async def syncs_after(seconds: float, *, flush: bool) -> int:
                mock_clock.jump(seconds)
                if flush:
                    await until(lambda: log.durable_offset == log.log_end_offset, "no flush")
                else:
                    await trio.testing.wait_all_tasks_blocked()
                return disk.calls["fdatasync"]

            await append(log)
            assert disk.calls["fdatasync"] == 0  # not before the ack: a background flush
            assert await syncs_after(0.999, flush=False) == 0
            assert await syncs_after(0.002, flush=True) == 1
            await append(log)  # due flush.ms after the last flush
            assert await syncs_after(0.9, flush=False) == 1
            assert await syncs_after(0.2, flush=True) == 2
            assert await syncs_after(60, flush=False) == 2  # nothing unflushed: no more


# -- file.delete.delay.ms (issue 23.13) ------------------------------------------------------


def names(directory: Path) -> list[str]:
    """The segment files and renamed ones (``.log.deleted``; their index files go alike)."""
    return sorted(p.name for p in directory.iterdir() if p.name.endswith((".log", ".log.deleted")))


def deleted_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".deleted"))


async def test_deleted_segments_go_file_delete_delay_ms_later(
    root: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Kafka's asynchronous delete: retention renames the segment files to *.deleted at once
    and unlinks them file.delete.delay.ms later."""
    cfg = LogConfig(segment_bytes=200, retention_bytes=0, file_delete_delay_ms=60_000)
    async with opened(root) as store:
        log = await open_log(store, cfg)
        for _ in range(3):
            await append(log, 1, value_size=120)  # one segment each
        await log.settle()
        assert await log.apply_retention(0) == 3
        directory = root / "t-0"
        assert names(directory) == [
            "00000000000000000000.log.deleted",
            "00000000000000000001.log.deleted",
            "00000000000000000002.log.deleted",
            "00000000000000000003.log",
        ]
        mock_clock.jump(59.999)
        await trio.testing.wait_all_tasks_blocked()
        assert len(names(directory)) == 4
        mock_clock.jump(0.002)
        await until(lambda: not deleted_files(directory), "not deleted")
        assert names(directory) == ["00000000000000000003.log"]


async def test_closing_the_log_deletes_what_is_pending(root: Path) -> None:
    cfg = LogConfig(segment_bytes=200, retention_bytes=0, file_delete_delay_ms=3_600_000)
    async with opened(root) as store:
        log = await open_log(store, cfg)
        await append(log, 1, value_size=120)
        await append(log, 1, value_size=120)
        assert await log.apply_retention(0) == 2
    assert names(root / "t-0") == ["00000000000000000002.log"]


async def test_no_delay_deletes_at_once(root: Path) -> None:
    cfg = LogConfig(segment_bytes=200, retention_bytes=0, file_delete_delay_ms=0)
    async with opened(root) as store:
        log = await open_log(store, cfg)
        await append(log, 1, value_size=120)
        assert await log.apply_retention(0) == 1
        assert names(root / "t-0") == ["00000000000000000001.log"]


class _HeldSync(osio.Ops):
    """``fdatasync`` waits, in its worker thread, until the test lets it go."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def fdatasync(self, fd: int) -> None:
        self.entered.set()
        assert self.release.wait(30), "fdatasync never released"
        super().fdatasync(fd)


async def test_flush_messages_1_hides_an_append_until_its_fsync(root: Path) -> None:
    """Kafka's single-replica high watermark moves after ``appendAsLeader`` returned, and with
    ``flush.messages=1`` that is after the fsync: a consumer never reads (and never commits an
    offset past) data that a power loss could still take back. So with an fsync under way the
    high watermark, the LSO and a Fetch still stop before the batch."""
    held = _HeldSync()
    old = osio.install(held)
    try:
        async with open_store(f"file://{root}") as store:
            p = await open_partition(store, LogConfig(flush_messages=1))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(put, p, batch())
                try:
                    await until(held.entered.is_set, "no fsync")
                    assert p.log.log_end_offset == 1  # written to the page cache...
                    assert (p.high_watermark, p.last_stable_offset) == (0, 0)  # ...not visible
                finally:
                    held.release.set()
            assert (p.high_watermark, p.last_stable_offset) == (1, 1)
    finally:
        osio.install(old)


class _HeldFsync(osio.Ops):
    """``fsync`` of a segment's ``.log`` (sealing a rolled segment) waits in its worker thread
    until released; other fsyncs (snapshots, index files) go through."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def fsync(self, fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".log"):
            self.entered.set()
            assert self.release.wait(30), "fsync never released"
        super().fsync(fd)


async def test_appends_go_on_while_retention_waits_for_a_seal(root: Path) -> None:
    """Retention that takes the active segment rolls it and waits for the old segment's seal
    (its fsync, held here) before deleting it; producers must not wait with it (Kafka's roll
    flushes asynchronously). The append lands in the new segment, which retention leaves
    alone."""
    held = _HeldFsync()
    async with open_store(f"file://{root}") as store:
        p = await open_partition(store, LogConfig(retention_bytes=0))
        await put(p, batch())
        old = osio.install(held)
        try:
            async with trio.open_nursery() as nursery:
                deleted: list[int] = []

                async def retention() -> None:
                    deleted.append(await p.apply_retention(0))

                nursery.start_soon(retention)
                try:
                    await until(held.entered.is_set, "no seal")
                    with trio.fail_after(10):
                        assert await put(p, batch()) == 1
                finally:
                    held.release.set()
        finally:
            osio.install(old)
        assert deleted == [1]
        assert (p.log_start_offset, p.high_watermark) == (1, 2)


async def test_an_append_cancelled_in_its_fsync_wait_still_completes(root: Path) -> None:
    """With ``flush.messages=1`` an append waits for its fsync after the write, here for the
    group commit another partition's append started: a cancellation arriving then (shutdown's
    grace ran out, the connection's listener removed) must not leave the batch in the log but
    not in the producer state (the producer's retry would be appended again), below a high
    watermark that does not move for it."""
    held = _HeldSync()
    old = osio.install(held)
    try:
        async with open_store(f"file://{root}") as store:
            await store.create_topic(TopicMeta("t", uuid.uuid4(), 2))
            cfg = LogConfig(flush_messages=1)
            a, b = [
                Partition(tp, uuid.uuid4(), await store.open_partition(tp, cfg), cfg)
                for tp in (TopicPartition("t", 0), TopicPartition("t", 1))
            ]
            data = batch(pid=7, seq=0)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(put, a, batch())  # runs the fsync, held
                await until(held.entered.is_set, "no fsync")
                with trio.CancelScope() as scope:
                    nursery.start_soon(put, b, data)  # written, then waits for the next run
                    await trio.testing.wait_all_tasks_blocked()
                    assert b.log.log_end_offset == 1
                    nursery.cancel_scope.cancel()
                    held.release.set()
            assert not scope.cancelled_caught
            assert b.log.log_end_offset == b.high_watermark == 1
            assert await put(b, data) == 0  # the retry is answered as the duplicate it is
            assert b.log.log_end_offset == 1
    finally:
        held.release.set()
        osio.install(old)
