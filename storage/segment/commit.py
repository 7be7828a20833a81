"""Group commit: appends that must be durable share fsync runs (perf-notes rule 5).

Theory of operation
-------------------
With ``flush_every_append`` an append writes to the page cache like any other, then waits
until an fsync that *started after its write* has completed. The store runs one fsync run at a
time: a run takes every log that has a waiter, snapshots each (its unsynced segment fds, whether
its directory gained a segment file, its log end offset at that moment), syncs them, one worker
thread per log so the filesystem can merge their journal commits, marks each log durable up to
its snapshot, and wakes all waiters. An append that
arrives while a run is in flight waits for that run, then starts (or joins) the next one, so
under load one run covers every append of the previous run's duration: N concurrent appenders
cost about two fsync latencies, not N of them.

If an fsync fails, the logs it covered are failed (as Kafka takes a log directory offline): the
data may or may not be on disk and Linux may already have dropped the dirty pages ("fsyncgate"),
so a retry proves nothing. Every waiter of a failed log gets StorageError.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import trio

from storage.segment import osio
from storage.segment.files import FileHandle, fsync_dir


@dataclass(frozen=True, slots=True)
class SyncSnapshot:
    handles: Sequence[FileHandle]  # acquired by sync_begin, released by sync_end
    fds: Sequence[int]  # their fds
    directory: Path | None  # fsync the directory too (a segment file was created)
    offset: int  # durable up to here once the run succeeds
    generation: int  # the log's roll count at the snapshot


class SyncTarget(Protocol):
    @property
    def durable_offset(self) -> int: ...

    def check_usable(self) -> None:
        """Raise StorageError if the log failed or closed."""

    def sync_begin(self) -> SyncSnapshot: ...

    def sync_end(self, snap: SyncSnapshot, synced: bool, error: OSError | None) -> None:
        """Release the snapshot's handles; durable up to ``snap.offset`` if ``synced``; failed
        if ``error``; neither if the run never started (cancelled)."""


def _sync_job(job: SyncSnapshot) -> None:
    for fd in job.fds:
        osio.ops.fdatasync(fd)  # appended data and the new file size; mtime need not be durable
    if job.directory is not None:
        fsync_dir(job.directory)


class GroupCommit:
    def __init__(self) -> None:
        self._waiting: dict[SyncTarget, None] = {}  # insertion-ordered set
        self._run: trio.Event | None = None
        self.runs = 0  # fsync runs so far (tests and benchmarks look at it)

    async def wait_durable(self, log: SyncTarget, offset: int) -> None:
        """Return once an fsync covering ``offset`` completed; StorageError if the log fails."""
        while log.durable_offset < offset:
            log.check_usable()
            self._waiting[log] = None
            if self._run is None:
                await self._sync_run()
            else:
                await self._run.wait()
        log.check_usable()

    async def _sync_run(self) -> None:
        done = self._run = trio.Event()
        jobs: list[tuple[SyncTarget, SyncSnapshot]] = []
        outcome: dict[int, OSError | None] = {}  # job index -> error; absent: never ran

        async def run_job(i: int, snap: SyncSnapshot) -> None:
            try:
                await trio.to_thread.run_sync(_sync_job, snap)
            except OSError as exc:
                outcome[i] = exc
            else:
                outcome[i] = None

        try:
            # let every task that is ready to run append first: the appenders woken by the
            # previous run then share this one instead of starting another right after it
            await trio.lowlevel.checkpoint()
            logs, self._waiting = list(self._waiting), {}
            for log in logs:
                try:
                    log.check_usable()
                except Exception:
                    continue
                jobs.append((log, log.sync_begin()))
            self.runs += 1
            # one thread per log: concurrent fsyncs share the filesystem's journal commits
            # (16 files: ~2 ms in parallel, ~5 ms one after the other)
            async with trio.open_nursery() as nursery:
                for i, (_, snap) in enumerate(jobs):
                    nursery.start_soon(run_job, i, snap)
        finally:
            for i, (log, snap) in enumerate(jobs):
                ran = i in outcome
                error = outcome.get(i)
                log.sync_end(snap, ran and error is None, error)
            self._run = None
            done.set()
