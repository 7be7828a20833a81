"""File backend only: reopening, crash recovery, index files, segment rolls, I/O errors."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from storage.api import LogConfig, StorageError, TopicMeta, TopicPartition
from storage.backends import open_store
from storage.segment import scan
from storage.segment import segment as segment_module
from storage.segment.datadir import DataDirError
from storage.segment.files import FileHandle
from storage.segment.log import FileLog
from storage.segment.store import CLEAN_MARKER, FileStore
from tests.storage.conftest import TP0, Clock, append, make_batch, new_log

SMALL = LogConfig(segment_bytes=1_000, index_interval_bytes=100)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "data"


@asynccontextmanager
async def opened(root: Path, clock: Clock | None = None) -> AsyncIterator[FileStore]:
    async with open_store(f"file://{root}", clock=clock) as store:
        assert isinstance(store, FileStore)
        yield store


async def open_log(store: FileStore, config: LogConfig = SMALL) -> FileLog:
    log = await new_log(store, config)
    assert isinstance(log, FileLog)
    return log


def logs_in(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


async def fill(log: FileLog, n: int, **kw: int) -> list[bytes]:
    return [await append(log, 1 + i % 4, value_size=40 + 7 * (i % 5), **kw) for i in range(n)]


# -- reopening ---------------------------------------------------------------------------


async def test_clean_reopen_keeps_everything(root: Path) -> None:
    meta = TopicMeta("t", uuid.uuid4(), 3, {"retention.ms": "5"})
    async with opened(root) as store:
        await store.create_topic(meta)
        log = await open_log(store)
        batches = await fill(log, 30)
        await log.delete_before(1)
        state = (log.log_start_offset, log.log_end_offset, log.size_bytes)
        ts = await log.max_timestamp()
    assert (root / CLEAN_MARKER).exists()
    async with opened(root) as store:
        assert not (root / CLEAN_MARKER).exists()
        assert store.clean_at_open
        assert store.topics() == [meta]
        log = await open_log(store)
        assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == state
        assert await log.max_timestamp() == ts
        assert await log.read(1, 1 << 20) == b"".join(batches[1:])
        more = await append(log)
        assert await log.read(log.log_end_offset - 1, 100) == more


async def test_kill_style_reopen_keeps_what_was_written(root: Path) -> None:
    async with opened(root) as store:
        log = await open_log(store)
        batches = await fill(log, 25)
        store.abandon()
    assert not (root / CLEAN_MARKER).exists()
    async with opened(root) as store:
        assert not store.clean_at_open
        log = await open_log(store)
        assert await log.read(0, 1 << 20) == b"".join(batches)
        await append(log)


async def test_active_segment_has_no_index_files_while_open(root: Path) -> None:
    async with opened(root) as store:
        log = await open_log(store)
        await fill(log, 40)
        segs = logs_in(root / "t-0")
        assert len(segs) > 2
        await log.settle()
        for seg in segs[:-1]:
            assert seg.with_suffix(".index").exists() and seg.with_suffix(".timeindex").exists()
        assert not segs[-1].with_suffix(".index").exists()
    assert segs[-1].with_suffix(".index").exists()


async def test_segments_roll_by_size(root: Path) -> None:
    async with opened(root) as store:
        log = await open_log(store)
        await fill(log, 40)
        big = await append(log, 2, value_size=3_000)  # bigger than a segment: its own one
        sizes = [p.stat().st_size for p in logs_in(root / "t-0")]
        assert all(size <= SMALL.segment_bytes for size in sizes[:-1])
        assert sizes[-1] == len(big)
        assert sum(sizes) == log.size_bytes
        names = [int(p.stem) for p in logs_in(root / "t-0")]
        assert names == [s.base for s in log.segments]
        assert names[-1] == log.log_end_offset - 2


async def test_segments_roll_by_age_across_a_restart(root: Path) -> None:
    """The segment's age counts from its first batch's timestamp, before and after a restart;
    without timestamps, from when the segment was created or opened (Kafka's "created")."""
    clock = Clock()
    async with opened(root, clock) as store:
        log = await open_log(store, LogConfig(segment_ms=60_000))
        await append(log, timestamp=1_000)
    async with opened(root, clock) as store:
        log = await open_log(store, LogConfig(segment_ms=60_000))
        await append(log, timestamp=61_000)
        assert len(log.segments) == 1
        await append(log, timestamp=61_001)
        assert [s.base for s in log.segments] == [0, 2]
        await append(log, timestamp=-1)  # the first batch of segment 2 has a timestamp
        clock.now += 10**9
        await append(log, timestamp=-1)
        assert len(log.segments) == 2
    async with opened(root, clock) as store:
        log = await open_log(store, LogConfig(segment_ms=60_000))
        await append(log, timestamp=2**40)
        assert len(log.segments) == 3  # record time: 2**40 - 61_001 is far past segment.ms


async def test_a_segment_without_timestamps_ages_from_its_opening(root: Path) -> None:
    clock = Clock()
    async with opened(root, clock) as store:
        await append(await open_log(store, LogConfig(segment_ms=60_000)), timestamp=-1)
    clock.now += 10**9
    async with opened(root, clock) as store:
        log = await open_log(store, LogConfig(segment_ms=60_000))
        await append(log, timestamp=-1)
        assert len(log.segments) == 1
        clock.now += 60_001
        await append(log, timestamp=-1)
        assert len(log.segments) == 2


async def test_time_index_full_check_counts_time_entries(root: Path) -> None:
    """Issue 23.13: each index is full by its own entry count (Kafka's AbstractIndex.isFull).
    segment.index.bytes=24 holds 3 offset entries and 2 time entries; with constant timestamps
    the time index keeps 1 entry, so the offset index decides: the roll comes at its 4th."""
    cfg = LogConfig(segment_index_bytes=24, index_interval_bytes=0)
    async with opened(root) as store:
        log = await open_log(store, cfg)
        for _ in range(6):
            await append(log, timestamp=1_000, max_timestamp=1_000)
        assert [s.base for s in log.segments] == [0, 4]
        assert len(log.segments[0].times()) == 1


@pytest.mark.parametrize("cached", [True, False], ids=["page-cache", "disk"])
async def test_reads_across_many_segments(
    root: Path, cached: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not cached:  # old segments then go through a worker thread
        monkeypatch.setattr(scan, "resident", lambda fd, pos, end: False)
    async with opened(root) as store:
        log = await open_log(store)
        batches = await fill(log, 200)
        assert len(log.segments) > 20
        starts = [0]
        for k in range(len(batches)):
            starts.append(starts[-1] + 1 + k % 4)
        for k in (0, 1, 50, 97, 150, 199):  # old and newest segments
            for offset in range(starts[k], starts[k + 1]):
                assert await log.read(offset, 1 << 20) == b"".join(batches[k:])
                budget = sum(map(len, batches[k : k + 7])) + 5
                assert await log.read(offset, budget) == b"".join(batches[k : k + 7])
        for target, base in {0: 0, 1_000: 0, 1_002: 3, 1_003: 6}.items():
            hit = await log.find_timestamp(target)  # batches of 1-4 records from ts 1000
            assert hit is not None and hit.batch_base_offset == base


# -- crash recovery ----------------------------------------------------------------------


async def crash_after(root: Path, n: int, config: LogConfig = SMALL) -> list[bytes]:
    async with opened(root) as store:
        log = await open_log(store, config)
        batches = await fill(log, n)
        store.abandon()
    return batches


def damage_tail(root: Path, how: str, batch: bytes) -> None:
    last = logs_in(root / "t-0")[-1]
    with last.open("r+b") as f:
        if how == "garbage":
            f.seek(0, os.SEEK_END)
            f.write(os.urandom(300))
        elif how == "half-batch":
            f.seek(0, os.SEEK_END)
            f.write(batch[: len(batch) // 2])
        elif how == "flipped-crc":  # flip a byte inside the last batch's records
            f.seek(-5, os.SEEK_END)
            byte = f.read(1)
            f.seek(-5, os.SEEK_END)
            f.write(bytes([byte[0] ^ 0xFF]))
        elif how == "zeros":
            f.seek(0, os.SEEK_END)
            f.write(bytes(4096))


@pytest.mark.parametrize("how", ["garbage", "half-batch", "flipped-crc", "zeros"])
async def test_torn_tail_is_truncated_at_the_last_good_batch(root: Path, how: str) -> None:
    batches = await crash_after(root, 30)
    good = batches[:-1] if how == "flipped-crc" else batches
    leo = sum(1 + i % 4 for i in range(len(good)))
    damage_tail(root, how, make_batch(leo, 3))
    async with opened(root) as store:
        log = await open_log(store)
        assert log.log_end_offset == leo
        assert await log.read(0, 1 << 20) == b"".join(good)
        assert sum(p.stat().st_size for p in logs_in(root / "t-0")) == log.size_bytes
        nxt = await append(log, 2)
        assert await log.read(leo, 100) == nxt


async def test_corruption_inside_the_active_segment_truncates_from_there(root: Path) -> None:
    cfg = LogConfig(index_interval_bytes=100)
    batches = await crash_after(root, 10, cfg)
    seg = logs_in(root / "t-0")[0]
    data = bytearray(seg.read_bytes())
    pos = sum(map(len, batches[:4]))
    data[pos + 70] ^= 0x01  # inside batch 4's records
    seg.write_bytes(bytes(data))
    async with opened(root) as store:
        log = await open_log(store, cfg)
        assert await log.read(0, 1 << 20) == b"".join(batches[:4])
        assert log.log_end_offset == sum(1 + i % 4 for i in range(4))


async def test_batches_must_continue_the_offsets(root: Path) -> None:
    batches = await crash_after(root, 5, LogConfig())
    seg = logs_in(root / "t-0")[0]
    with seg.open("ab") as f:
        f.write(make_batch(500, 1))  # valid CRC, wrong offset
    async with opened(root) as store:
        log = await open_log(store, LogConfig())
        assert await log.read(0, 1 << 20) == b"".join(batches)


async def test_a_bad_sealed_segment_drops_the_segments_after_it(root: Path) -> None:
    async with opened(root) as store:
        log = await open_log(store)
        batches = await fill(log, 60)
    segs = logs_in(root / "t-0")
    victim = segs[3]
    victim.with_suffix(".index").unlink()  # forces validation
    with victim.open("r+b") as f:
        f.seek(-3, os.SEEK_END)
        f.write(b"\xff\xff\xff")  # the segment's last batch is now corrupt
    async with opened(root) as store:
        log = await open_log(store)
        assert logs_in(root / "t-0") == segs[:4]
        kept = await log.read(0, 1 << 20)
        k = next(k for k in range(len(batches)) if b"".join(batches[:k]) == kept)
        assert int(segs[3].stem) < log.log_end_offset == sum(1 + i % 4 for i in range(k))
        assert len(kept) < sum(map(len, batches))
        await append(log)


async def test_lost_tail_behind_the_log_start_offset_restarts_there(root: Path) -> None:
    async with opened(root) as store:
        log = await open_log(store, LogConfig())
        await fill(log, 10)
        await log.delete_before(log.log_end_offset)
        leo = log.log_end_offset
        store.abandon()
    logs_in(root / "t-0")[0].write_bytes(b"")  # as if the data never reached the disk
    async with opened(root) as store:
        log = await open_log(store, LogConfig())
        assert (log.log_start_offset, log.log_end_offset) == (leo, leo)
        await append(log)
        assert [int(p.stem) for p in logs_in(root / "t-0")] == [leo]


# -- index files -------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["missing", "cut", "garbage", "stale", "time-missing"])
async def test_bad_index_files_are_rebuilt(root: Path, damage: str) -> None:
    async with opened(root) as store:
        log = await open_log(store)
        batches = await fill(log, 80)
    before = {p.name: p.read_bytes() for p in (root / "t-0").glob("*index")}
    segs = logs_in(root / "t-0")
    index, timeindex = segs[2].with_suffix(".index"), segs[2].with_suffix(".timeindex")
    if damage == "missing":
        index.unlink()
    elif damage == "cut":
        index.write_bytes(index.read_bytes()[:-3])
    elif damage == "garbage":
        index.write_bytes(os.urandom(len(index.read_bytes())))
    elif damage == "stale":
        index.write_bytes(segs[5].with_suffix(".index").read_bytes())
    else:
        timeindex.unlink()
    async with opened(root) as store:
        log = await open_log(store)
        assert await log.read(0, 1 << 20) == b"".join(batches)
        for offset in range(0, log.log_end_offset, 7):
            data = await log.read(offset, 1)
            assert data in batches
    after = {p.name: p.read_bytes() for p in (root / "t-0").glob("*index")}
    assert after == before


# -- I/O errors --------------------------------------------------------------------------


async def test_a_failed_write_is_undone(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with opened(root) as store:
        log = await open_log(store, LogConfig())
        first = await append(log)
        real = os.pwrite

        def half_then_enospc(fd: int, data: bytes, pos: int) -> int:
            if len(data) > 40:
                return real(fd, memoryview(data)[:40], pos)
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(segment_module.os, "pwrite", half_then_enospc)
        with pytest.raises(StorageError):
            await append(log, 3)
        monkeypatch.undo()
        assert (log.log_end_offset, log.size_bytes) == (1, len(first))
        assert logs_in(root / "t-0")[0].stat().st_size == len(first)
        second = await append(log, 3)
        assert await log.read(0, 1 << 20) == first + second


async def test_a_roll_that_cannot_create_its_file_changes_nothing(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with opened(root) as store:
        log = await open_log(store, LogConfig(segment_bytes=300))
        first = await append(log, value_size=200)

        def emfile(*args: object, **kw: object) -> int:
            raise OSError(errno.EMFILE, "Too many open files")

        monkeypatch.setattr(segment_module.os, "open", emfile)
        with pytest.raises(StorageError):
            await append(log, value_size=200)
        monkeypatch.undo()
        assert (log.log_end_offset, len(log.segments)) == (1, 1)
        second = await append(log, value_size=200)
        assert len(log.segments) == 2
        assert await log.read(0, 1 << 20) == first + second


def test_a_file_handle_closes_after_its_last_user() -> None:
    r, w = os.pipe()
    os.close(w)
    handle = FileHandle(r)
    fd = handle.acquire()
    handle.close()
    os.fstat(fd)  # still open: a thread may be using it
    with pytest.raises(StorageError):
        handle.acquire()
    handle.release()
    with pytest.raises(OSError):
        os.fstat(fd)


async def test_a_failed_fsync_takes_the_log_offline(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with opened(root) as store:
        log = await open_log(store, LogConfig(flush_messages=1))
        await append(log)

        def eio(fd: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(os, "fsync", eio)
        monkeypatch.setattr(os, "fdatasync", eio)
        with pytest.raises(StorageError):
            await append(log)
        monkeypatch.undo()
        assert log.log_end_offset == 1  # the unacknowledged append is not counted
        with pytest.raises(StorageError):
            await append(log)
        with pytest.raises(StorageError):
            await log.read(0, 100)
    assert not (root / CLEAN_MARKER).exists()  # next open recovers


async def test_group_commit_shares_fsyncs(root: Path) -> None:
    n = 20
    async with opened(root) as store:
        await store.create_topic(TopicMeta("t", uuid.uuid4(), n))
        cfg = LogConfig(flush_messages=1)
        logs = [await store.open_partition(TopicPartition("t", p), cfg) for p in range(n)]
        runs = store.group_commit.runs

        async def produce(log: object) -> None:
            for _ in range(5):
                assert isinstance(log, FileLog)
                await append(log)
                assert log.durable_offset >= log.log_end_offset

        async with trio.open_nursery() as nursery:
            for log in logs:
                nursery.start_soon(produce, log)
        assert store.group_commit.runs - runs < n * 5 / 4


# -- topics on disk ----------------------------------------------------------------------


async def test_topic_metadata_files(root: Path) -> None:
    meta = TopicMeta("t", uuid.uuid4(), 2, {"cleanup.policy": "delete"})
    async with opened(root) as store:
        await store.create_topic(meta)
        await store.open_partition(TP0, LogConfig())
    saved = json.loads((root / "__kafkad_topics" / "t.json").read_text())
    assert saved["topic_id"] == str(meta.topic_id) and saved["partitions"] == 2
    assert (root / "t-0" / "partition.metadata").read_text().startswith("version: 0\n")


async def test_a_delete_interrupted_after_its_commit_point_finishes_at_open(root: Path) -> None:
    async with opened(root) as store:
        log = await open_log(store)
        await fill(log, 5)
        topic_id = store.topics()[0].topic_id
        store.abandon()
    topics = root / "__kafkad_topics"
    (topics / "t.json").rename(topics / "t.deleting")  # the crash came right after this
    (root / f"{topic_id.hex}-1.deleted").mkdir()  # and another partition was renamed already
    (root / "meta.properties").write_text("cluster.id=x\n")
    async with opened(root) as store:
        assert store.topics() == []
        assert sorted(os.listdir(root)) == [
            ".lock",
            "__kafkad_meta",
            "__kafkad_topics",
            "kafkad.properties",
            "meta.properties",
        ]
        assert list(topics.iterdir()) == []
        log = await open_log(store)
        assert log.log_end_offset == 0


async def test_an_older_kafkads_interrupted_delete_is_finished_when_its_dir_is_adopted(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafkad before the marker deleted the topic's JSON, then renamed its partition
    directories: a crash in between left them behind, and it removed them at its next open."""
    async with opened(root) as store:
        t = await open_log(store)
        await fill(t, 5)
        gone_id = uuid.uuid4()
        await store.create_topic(TopicMeta("gone", gone_id, 3))
        for p in range(3):
            await store.open_partition(TopicPartition("gone", p), LogConfig())
        store.abandon()
    (root / "kafkad.properties").unlink()  # a directory written before the marker existed
    (root / "__kafkad_topics" / "gone.json").unlink()  # the old delete's commit point
    (root / "gone-1").rename(root / f"{gone_id.hex}-1.deleted")  # and one rename, then a crash
    async with opened(root) as store:
        assert [m.name for m in store.topics()] == ["t"]
        assert (await open_log(store)).log_end_offset == 11  # fill(log, 5) writes 11 records
    assert not [n for n in os.listdir(root) if n.startswith("gone-") or ".deleted" in n]
    assert "interrupted deletion of topic gone" in caplog.text
    # Once the directory is kafkad's (marked), such a directory is a stranger again: refused.
    (root / "gone-0").mkdir()
    (root / "gone-0" / "partition.metadata").write_bytes(
        (root / "t-0" / "partition.metadata").read_bytes()
    )
    with pytest.raises(DataDirError, match="gone-0/"):
        async with opened(root):
            pass
    assert (root / "gone-0" / "partition.metadata").exists()


async def test_a_partition_directory_cut_before_its_metadata_goes_with_its_topic(
    root: Path,
) -> None:
    # A crash between mkdir and writing partition.metadata leaves an empty directory; deleting
    # the topic must take it too, or the next open would refuse it as a stranger.
    async with opened(root) as store:
        await store.create_topic(TopicMeta("t", uuid.uuid4(), 3))
        await store.open_partition(TopicPartition("t", 0), LogConfig())
        store.abandon()
    (root / "t-1").mkdir()
    (root / "t-2").mkdir()
    (root / "t-2" / "partition.metadata.tmp").write_bytes(b"version: 0\n")
    async with opened(root) as store:
        await store.delete_topic("t")
    async with opened(root) as store:
        assert store.topics() == []
    assert not [n for n in os.listdir(root) if n.startswith("t-")]


async def test_entries_kafkad_did_not_create_stop_the_open_and_stay(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with opened(root) as store:
        log = await open_log(store)
        await fill(log, 5)
    (root / "orphan-0").mkdir()
    (root / "orphan-0" / "partition.metadata").write_text("version: 0\n")
    (root / "t-7").mkdir()  # t has one partition
    (root / "junk-0.deleted").mkdir()
    (root / "notes.txt").write_text("mine")
    with pytest.raises(DataDirError) as err:
        async with opened(root):
            pass
    message = str(err.value)
    assert "\n" not in message and "orphan-0/" in message and "t-7/" in message
    assert (root / "orphan-0" / "partition.metadata").exists() and (root / "t-7").is_dir()
    (root / "orphan-0" / "partition.metadata").unlink()
    (root / "orphan-0").rmdir()
    (root / "t-7").rmdir()
    async with opened(root) as store:  # the lock was released by the failed open
        assert (await open_log(store)).log_end_offset == 11  # fill(log, 5) writes 11 records
    assert "leaving alone what kafkad did not create: junk-0.deleted/, notes.txt" in caplog.text
    assert (root / "junk-0.deleted").is_dir() and (root / "notes.txt").read_text() == "mine"


async def test_a_partition_directory_of_another_topic_id_is_refused_not_wiped(
    root: Path,
) -> None:
    async with opened(root) as store:
        log = await open_log(store)
        await fill(log, 5)
    other = TopicMeta("x", uuid.uuid4(), 1)
    async with opened(root) as store:
        await store.create_topic(other)
        await store.open_partition(TopicPartition("x", 0), LogConfig())
    metadata = (root / "x-0" / "partition.metadata").read_bytes()
    (root / "t-0" / "partition.metadata").write_bytes(metadata)  # t-0 now looks like x's
    async with opened(root) as store:
        with pytest.raises(DataDirError, match="names another topic id"):
            await open_log(store)
    assert logs_in(root / "t-0")


async def test_foreign_files_in_a_partition_directory_are_left_alone(root: Path) -> None:
    async with opened(root) as store:
        log = await open_log(store)
        await fill(log, 5)
        store.abandon()
    part = root / "t-0"
    for name in ("leader-epoch-checkpoint", "00000000000000000000.txnindex", "x.tmp", "y.deleted"):
        (part / name).write_text("keep")
    (part / "00000000000000000099.index").write_text("")  # ours: an index without its log
    (part / "partition.metadata.tmp").write_text("")  # ours: an interrupted write
    async with opened(root) as store:
        assert (await open_log(store)).log_end_offset == 11  # fill(log, 5) writes 11 records
    left = {p.name for p in part.iterdir()}
    assert {
        "leader-epoch-checkpoint",
        "00000000000000000000.txnindex",
        "x.tmp",
        "y.deleted",
    } <= left
    assert not {"00000000000000000099.index", "partition.metadata.tmp"} & left


async def test_a_topic_file_of_a_newer_format_is_refused(root: Path) -> None:
    async with opened(root) as store:
        await open_log(store)
    path = root / "__kafkad_topics" / "t.json"
    saved = json.loads(path.read_text())
    path.write_text(json.dumps({**saved, "version": 1}))
    with pytest.raises(DataDirError, match=r"t\.json has format version 1"):
        async with opened(root):
            pass
    path.write_text("{not json")
    with pytest.raises(DataDirError, match=r"corrupt topic metadata file .*t\.json"):
        async with opened(root):
            pass


async def test_a_second_open_of_the_same_directory_is_refused(root: Path) -> None:
    async with opened(root):
        with pytest.raises(DataDirError, match=f"data dir {root} is locked by pid {os.getpid()}"):
            async with opened(root):
                pass
    async with opened(root):
        pass


async def test_a_kafkad_directory_from_before_the_marker_is_adopted(root: Path) -> None:
    async with opened(root) as store:
        log = await open_log(store)
        await fill(log, 5)
    (root / "kafkad.properties").unlink()  # as written by kafkad before the marker existed
    (root / ".lock").unlink()
    async with opened(root) as store:
        assert (await open_log(store)).log_end_offset == 11  # fill(log, 5) writes 11 records
    assert "format.version=1" in (root / "kafkad.properties").read_text()


async def test_a_newer_data_format_is_refused(root: Path) -> None:
    async with opened(root):
        pass
    (root / "kafkad.properties").write_text("format.version=2\n")
    with pytest.raises(DataDirError, match="kafkad data format 2; this kafkad reads format 1"):
        async with opened(root):
            pass


# -- a real kill -9 ----------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]
CHILD = """
import sys, uuid, trio
from storage.api import LogConfig, TopicMeta, TopicPartition
from storage.backends import open_store
from tests.storage.conftest import make_batch

async def main(root, durable):
    async with open_store(root) as store:
        await store.create_topic(TopicMeta("t", uuid.uuid4(), 1))
        cfg = LogConfig(segment_bytes=4096, index_interval_bytes=512, flush_messages=durable)
        log = await store.open_partition(TopicPartition("t", 0), cfg)
        while True:
            base = log.log_end_offset
            batch = make_batch(base, 2, value_size=100, fill=base % 251)
            await log.append(base, base + 1, 1001, batch)
            print(base + 2, flush=True)  # acknowledged up to here

trio.run(main, sys.argv[1], 1 if sys.argv[2] == "durable" else 2**63 - 1)
"""


@pytest.mark.parametrize("mode", ["page-cache", "durable"])
async def test_acknowledged_appends_survive_kill_9(root: Path, mode: str) -> None:
    cmd = [sys.executable, "-c", CHILD, str(root), mode]
    proc = await trio.lowlevel.open_process(cmd, stdout=subprocess.PIPE, cwd=REPO)
    assert proc.stdout is not None
    acked, buf = 0, b""
    with trio.fail_after(60):
        while acked < 300:
            chunk = await proc.stdout.receive_some()
            assert chunk, "the writer died"
            buf += chunk
            *lines, buf = buf.split(b"\n")
            if lines:
                acked = int(lines[-1])
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    await proc.stdout.aclose()
    async with opened(root) as store:
        assert not store.clean_at_open
        log = await open_log(store, LogConfig(segment_bytes=4096, index_interval_bytes=512))
        assert log.log_end_offset >= acked
        expected = b"".join(
            make_batch(base, 2, value_size=100, fill=base % 251)
            for base in range(0, log.log_end_offset, 2)
        )
        assert await log.read(0, 1 << 30) == expected


async def test_reading_a_segment_that_retention_deletes_while_it_seals(root: Path) -> None:
    """The cleaner's ``read_segment`` of a just-rolled segment waits for its seal; if retention
    (or DeleteRecords) deletes the segment meanwhile, the read says it is gone (ValueError: the
    pass stops quietly), never "segment file is closed" (StorageError: logged as a failed
    pass). Which of the two waiters trio resumes first is random, so the race runs a few times.
    """
    async with opened(root) as store:
        log = await open_log(store, LogConfig(segment_bytes=200, file_delete_delay_ms=0))
        outcomes: set[str] = set()
        for _ in range(12):
            while len(log.segments) < 2:
                await append(log)
            base, next_base = log.segments[-2].base, log.segments[-1].base

            async def read(base: int) -> None:
                try:
                    await log.read_segment(base)
                    outcomes.add("read")
                except ValueError:
                    outcomes.add("gone")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(read, base)
                nursery.start_soon(log.delete_before, next_base)
            await append(log)  # the active segment fills and rolls again
        assert outcomes  # (a StorageError from the read fails the test through the nursery)
