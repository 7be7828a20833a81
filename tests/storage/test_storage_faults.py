"""Disk faults on the append path (``FaultyDisk`` through the ``osio`` seam): a failed write or
fsync, or a full disk, is never acknowledged; after a restart every acknowledged batch is
there, no half batch is visible, and appends work again once the fault is gone."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from storage.api import LogConfig, StorageError
from storage.segment.log import FileLog
from storage.segment.store import CLEAN_MARKER
from tests.storage.conftest import append
from tests.storage.faulty import faulty_disk
from tests.storage.test_file_backend import SMALL, open_log, opened

DURABLE = LogConfig(flush_messages=1)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "data"


async def acked_after_restart(root: Path, config: LogConfig = SMALL) -> bytes:
    async with opened(root) as store:
        log = await open_log(store, config)
        return await log.read(log.log_start_offset, 1 << 24) if log.log_end_offset else b""


async def try_append(log: FileLog, acked: list[bytes], **kw: int) -> bool:
    """Append; on success the batch counts as acknowledged."""
    try:
        acked.append(await append(log, 2, **kw))
    except StorageError:
        return False
    return True


@pytest.mark.parametrize("err", [errno.EIO, errno.ENOSPC])
async def test_a_failed_write_is_refused_and_the_log_goes_on(root: Path, err: int) -> None:
    acked: list[bytes] = []
    with faulty_disk() as disk:
        async with opened(root) as store:
            log = await open_log(store)
            assert await try_append(log, acked)
            disk.fail("pwrite", err=err, partial=30)  # 30 bytes reach the file, then the error
            assert not await try_append(log, acked)
            assert disk.failures["pwrite"] == 1 and not log.failed
            assert log.log_end_offset == 2
            assert await try_append(log, acked)  # the fault was transient
            assert await log.read(0, 1 << 20) == b"".join(acked)
    assert await acked_after_restart(root) == b"".join(acked)


async def test_a_full_disk_refuses_every_append_until_space_returns(root: Path) -> None:
    acked: list[bytes] = []
    with faulty_disk() as disk:
        async with opened(root) as store:
            log = await open_log(store)
            assert await try_append(log, acked)
            disk.fail("pwrite", err=errno.ENOSPC, persistent=True, partial=10)
            assert [await try_append(log, acked) for _ in range(5)] == [False] * 5
            assert log.log_end_offset == 2 and not log.failed
            disk.clear()
            assert await try_append(log, acked)
    assert await acked_after_restart(root) == b"".join(acked)


async def test_a_write_that_cannot_be_undone_takes_the_log_offline(root: Path) -> None:
    """Half a batch is on disk and the truncate fails too: the log refuses everything until
    it is reopened, and recovery then drops the half batch."""
    acked: list[bytes] = []
    with faulty_disk() as disk:
        async with opened(root) as store:
            log = await open_log(store)
            assert await try_append(log, acked)
            disk.fail("pwrite", err=errno.EIO, partial=40)
            disk.fail("ftruncate", err=errno.EIO)
            assert not await try_append(log, acked)
            disk.clear()
            assert log.failed
            assert not await try_append(log, acked)
            with pytest.raises(StorageError):
                await log.read(0, 100)
    assert not (root / CLEAN_MARKER).exists()
    assert await acked_after_restart(root) == b"".join(acked)
    async with opened(root) as store:  # reopened: appends work again
        log = await open_log(store)
        assert await try_append(log, acked)
    assert await acked_after_restart(root) == b"".join(acked)


@pytest.mark.parametrize("err", [errno.EIO, errno.ENOSPC])
async def test_a_failed_fsync_is_never_acknowledged(root: Path, err: int) -> None:
    """flush_every_append: the append whose fsync failed gets StorageError, the log goes
    offline; after a restart the acknowledged batches are all there. The refused batch may be
    there too (its write reached the page cache), whole, as in Kafka: the client was told
    KAFKA_STORAGE_ERROR, not that it was lost."""
    acked: list[bytes] = []
    with faulty_disk() as disk:
        async with opened(root) as store:
            log = await open_log(store, DURABLE)
            for _ in range(3):
                assert await try_append(log, acked)
            disk.fail("fdatasync", err=err)
            assert not await try_append(log, acked)
            disk.clear()
            assert log.failed and log.log_end_offset == 6
            assert not await try_append(log, acked)
    after = await acked_after_restart(root, DURABLE)
    assert after.startswith(b"".join(acked))
    async with opened(root) as store:
        log = await open_log(store, DURABLE)
        whole = log.log_end_offset in (6, 8)
        assert whole and await try_append(log, acked)


async def test_a_failed_fsync_of_a_rolled_segment_takes_the_log_offline(root: Path) -> None:
    acked: list[bytes] = []
    config = LogConfig(segment_bytes=400)
    with faulty_disk() as disk:
        async with opened(root) as store:
            log = await open_log(store, config)
            disk.fail("fsync", err=errno.EIO)
            while len(log.segments) < 2:
                assert await try_append(log, acked, value_size=60)
            await log.settle()
            assert log.failed and disk.failures["fsync"] == 1
            assert not await try_append(log, acked)
            disk.clear()
    assert await acked_after_restart(root, config) == b"".join(acked)
