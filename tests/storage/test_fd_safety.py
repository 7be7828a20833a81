"""Raw fds of the file backend: closed on every failure path, never used after their close.

A leaked fd per failed open runs the broker out of fds (the store retries the open at the next
request); an fd closed under a worker thread lets the thread's fsync or read land on whatever
file got the number next. Each test counts the fds open on the files themselves
(``/proc/self/fd``), or sets a recycled-fd trap.
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest
import trio

from storage.api import LogConfig
from storage.segment import load as load_module
from storage.segment import osio, scan
from storage.segment.datadir import LOCK_FILE, DataDirError, DataDirLock
from storage.segment.load import load_partition
from storage.segment.log import FileLog
from storage.segment.segment import Segment
from tests.storage.conftest import append, new_log
from tests.storage.test_file_backend import SMALL, fill, opened


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "data"


def fds_on(directory: Path) -> list[int]:
    """This process's fds open on a file in ``directory``."""
    out = []
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # the fd listing the directory itself, gone by now
            continue
        if target.startswith(f"{directory}/"):
            out.append(int(name))
    return out


async def written_partition(root: Path, *, clean: bool) -> Path:
    """A partition of several segments, left as a clean shutdown or a kill -9 leaves it."""
    async with opened(root) as store:
        log = await new_log(store, SMALL)
        assert isinstance(log, FileLog)
        await fill(log, 30)
        await log.settle()
        assert len(log.segments) > 2
        if not clean:
            store.abandon()
    return root / "t-0"


def eio(*args: object, **kw: object) -> object:
    raise OSError(errno.EIO, "Input/output error")


async def test_an_active_segment_that_fails_to_open_keeps_no_fd(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = await written_partition(root, clean=True)
    last = sorted(directory.glob("*.log"))[-1]
    base = int(last.name.removesuffix(".log"))
    monkeypatch.setattr(scan, "iter_headers", eio)
    with pytest.raises(OSError):
        Segment.open_active(directory, base, last.stat().st_size, 100)
    assert fds_on(directory) == []


@pytest.mark.parametrize("clean", [True, False])
async def test_a_partition_that_fails_to_load_keeps_no_fd(
    root: Path, monkeypatch: pytest.MonkeyPatch, clean: bool
) -> None:
    directory = await written_partition(root, clean=clean)
    monkeypatch.setattr(load_module, "fsync_dir", eio)  # after every segment is open
    for _ in range(3):  # the store tries again at each request
        with pytest.raises(OSError):
            load_partition(directory, 100, clean)
    assert fds_on(directory) == []
    monkeypatch.undo()
    loaded = load_partition(directory, 100, clean)
    assert fds_on(directory) != []
    for seg in loaded.segments:
        seg.close()
    assert fds_on(directory) == []


class _OsBut:
    """The os module with some calls replaced."""

    def __init__(self, **calls: object) -> None:
        self.__dict__.update(calls)

    def __getattr__(self, name: str) -> object:
        return getattr(os, name)


@pytest.mark.parametrize("call", ["ftruncate", "pwrite"])
def test_a_data_dir_lock_that_fails_keeps_no_fd_and_no_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    from storage.segment import datadir

    # datadir's own view of os, not os itself: other threads of this process go on using it
    monkeypatch.setattr(datadir, "os", _OsBut(**{call: eio}))
    with pytest.raises(DataDirError, match="cannot write"):
        DataDirLock(tmp_path)
    monkeypatch.undo()
    assert fds_on(tmp_path) == []
    lock = DataDirLock(tmp_path)  # not held by a leaked fd
    assert fds_on(tmp_path) != []
    lock.release()
    lock.release()  # a second release closes nothing (the number may be someone else's)
    assert fds_on(tmp_path) == []
    assert (tmp_path / LOCK_FILE).exists()


class _HeldFsync(osio.Ops):
    """Holds the first fsync in its worker thread until ``go``; records what the fd was then."""

    def __init__(self, token: trio.lowlevel.TrioToken, started: trio.Event) -> None:
        self.token, self.started = token, started
        self.go = threading.Event()
        self.seen: list[int] = []

    def fsync(self, fd: int) -> None:
        if not self.seen:
            trio.from_thread.run_sync(self.started.set, trio_token=self.token)
            assert self.go.wait(30)
            self.seen.append(os.fstat(fd).st_ino)
        super().fsync(fd)


async def test_a_discard_during_close_does_not_close_the_fd_under_its_fsync(root: Path) -> None:
    """The recycled-fd trap: the log's close fsyncs the active segment in a worker thread; a
    discard closes the log's segments meanwhile and a new file is opened. The fsync must still
    be on the segment's file, not on the new file that may have taken its number."""
    async with opened(root) as store:
        log = await new_log(store, LogConfig(segment_bytes=1 << 20))
        assert isinstance(log, FileLog)
        await append(log)
        active = log.segments[-1].path()
        started = trio.Event()
        held = _HeldFsync(trio.lowlevel.current_trio_token(), started)
        old = osio.install(held)
        trap = -1
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(log.close)
                await started.wait()
                await log.discard()
                trap = os.open(root / "trap", os.O_RDWR | os.O_CREAT, 0o644)
                held.go.set()
        finally:
            osio.install(old)
            held.go.set()
            if trap >= 0:
                os.close(trap)
        assert held.seen == [active.stat().st_ino]
        assert (root / "trap").stat().st_size == 0
        assert fds_on(active.parent) == []
