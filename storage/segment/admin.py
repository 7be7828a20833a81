"""``FileLog``'s maintenance half (``storage/segment/log.py``): what runs under the log's admin
lock, one at a time, and only ever removes or replaces whole segments that are not the active
one (split from log.py, whose theory of operation covers both halves).

* Retention (``apply_retention``) and DeleteRecords (``delete_before``) remove segments from the
  front; when retention takes the active segment too, the log rolls first, so there is always
  an (empty) active segment at the log end offset. The files are renamed to ``*.deleted`` at
  once and unlinked ``file.delete.delay.ms`` later (Kafka's asynchronous delete).
* The log cleaner reads rolled segments (``segment_infos``, ``read_segment``) and swaps a run of
  them for one cleaned segment (``replace_segments``; the protocol is ``swap.py``).

``LogAdmin`` is a base class of ``FileLog``: it declares the state it shares with it.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import trio

from storage.api import LogConfig, SegmentInfo, StorageError, TopicPartition
from storage.log_policy import retention_deletable, segment_expired
from storage.log_positions import LogPositions
from storage.segment import scan
from storage.segment.files import unlink_quietly
from storage.segment.load import write_checkpoint
from storage.segment.segment import Segment
from storage.segment.swap import SwapFailed, swap_in

log = logging.getLogger("kafkad.storage")


class LogAdmin(LogPositions):
    """Retention, DeleteRecords and the cleaner's swaps over ``FileLog``'s segment list."""

    tp: TopicPartition
    directory: Path
    config: LogConfig
    _segments: list[Segment]
    _bases: list[int]
    _admin: trio.Lock
    _sealing: dict[Segment, trio.Event]
    _sealing_allowed: bool
    _closing: trio.Event
    _spawn: Callable[..., None]

    def check_usable(self) -> None:
        raise NotImplementedError

    def _fail(self, reason: str) -> None:
        raise NotImplementedError

    def _roll(self) -> Segment:
        raise NotImplementedError

    # -- deleting --------------------------------------------------------------------------

    async def delete_before(self, offset: int) -> None:
        self.check_usable()
        if offset > self._leo:
            raise ValueError(f"delete_before({offset}) is past the log end offset {self._leo}")
        async with self._admin:
            if offset <= self._lso:
                return
            try:
                await trio.to_thread.run_sync(write_checkpoint, self.directory, offset)
            except OSError as exc:
                raise StorageError(f"cannot persist log start offset {offset}: {exc}") from exc
            self._lso = max(self._lso, offset)
            n = 0
            while n + 1 < len(self._bases) and self._bases[n + 1] <= offset:
                n += 1
            await self._delete_oldest(n)

    async def apply_retention(
        self, now_ms: int, after_roll: Callable[[], Awaitable[None]] | None = None
    ) -> int:
        self.check_usable()
        async with self._admin:
            active = self._segments[-1]
            if active.size and segment_expired(self.config, active.created_ms, now_ms):
                self._roll()
            aged = [(s.size, _retention_timestamp(s)) for s in self._segments]
            n = retention_deletable(self.config, aged, self._size, now_ms)
            if n == len(self._segments):  # the active segment too: roll, then delete it
                self._roll()
            if after_roll is not None and self._bases[-1] != active.base:
                await after_roll()
            await self._delete_oldest(n)
            return n

    async def _delete_oldest(self, n: int) -> None:
        """Remove the ``n`` oldest segments (never the active one); the caller holds _admin."""
        n = min(n, len(self._segments) - 1)
        if n <= 0:
            return
        for seg in self._segments[:n]:
            if (sealing := self._sealing.get(seg)) is not None:
                await sealing.wait()
        victims = self._segments[:n]
        del self._segments[:n]
        del self._bases[:n]
        self._size -= sum(v.size for v in victims)
        self._lso = max(self._lso, self._bases[0])
        for v in victims:
            v.close()  # the fd stays open while a reader thread holds it
        delay_ms = self.config.file_delete_delay_ms
        try:
            if delay_ms <= 0:
                await trio.to_thread.run_sync(_delete_files, victims)
                return
            renamed = await trio.to_thread.run_sync(_rename_deleted, victims)
        except OSError as exc:
            raise StorageError(f"deleting segments of {self.tp}: {exc}") from exc
        self._spawn(self._delete_later, renamed, trio.current_time() + delay_ms / 1000)

    async def _delete_later(self, paths: list[Path], due: float) -> None:
        """Background task in the store's nursery (must not raise): ``file.delete.delay.ms``
        after retention or DeleteRecords, the ``*.deleted`` files go; at once if the log closes
        first. A log abandoned as by ``kill -9`` leaves them to the next open."""
        with trio.move_on_at(due):
            await self._closing.wait()
        if not self._sealing_allowed:
            return
        try:
            await trio.to_thread.run_sync(_unlink_all, paths)
        except OSError as exc:
            log.warning("%s: deleting %d old segment file(s) failed: %s", self.tp, len(paths), exc)

    # -- the log cleaner --------------------------------------------------------------------

    def segment_infos(self) -> list[SegmentInfo]:
        out = []
        for seg in self._segments:
            first = -1
            if seg.size:
                try:
                    ts = seg.first_max_ts()
                except (OSError, StorageError):
                    ts = None
                first = -1 if ts is None else ts
            out.append(SegmentInfo(seg.base, seg.size, seg.largest_timestamp, first))
        return out

    def _rolled_index(self, base: int) -> int:
        i = bisect_right(self._bases, base) - 1
        if i < 0 or i >= len(self._bases) - 1 or self._bases[i] != base:
            raise ValueError(f"no rolled segment {base} in {self.tp}")
        return i

    async def read_segment(self, base_offset: int) -> bytes:
        self.check_usable()
        seg = self._segments[self._rolled_index(base_offset)]
        if (sealing := self._sealing.get(seg)) is not None:
            await sealing.wait()
            self.check_usable()
            if self._segments[self._rolled_index(base_offset)] is not seg:
                raise ValueError(f"segment {base_offset} of {self.tp} was replaced")
        handle = seg.handle()
        fd, size = handle.acquire(), seg.size
        try:
            return await trio.to_thread.run_sync(scan.read_exact, fd, 0, size)
        except OSError as exc:
            raise StorageError(f"reading segment {base_offset} of {self.tp}: {exc}") from exc
        finally:
            handle.release()

    async def replace_segments(self, bases: Sequence[int], data: bytes) -> bool:
        """The swap protocol is ``swap.py``; here: checks, pinning old files, the switch."""
        self.check_usable()
        async with self._admin:
            try:
                i = self._rolled_index(bases[0])
            except ValueError:
                return False
            n = len(bases)
            if self._bases[i : i + n] != list(bases) or i + n >= len(self._segments):
                return False
            old = self._segments[i : i + n]
            for seg in old:
                if (sealing := self._sealing.get(seg)) is not None:
                    await sealing.wait()
            if self._segments[i : i + n] != old:
                return False
            for seg in old:  # readers keep the old files (fds, index maps) until the switch
                seg.fd()
                seg.offsets()
                seg.times()
            limit = self._bases[i + n]

            def swap() -> Segment:
                swap_in(self.directory, bases, data, self.config.index_interval_bytes)
                return Segment.open_sealed(self.directory, bases[0], len(data), limit)

            try:
                new = await trio.to_thread.run_sync(swap)
            except SwapFailed as exc:
                if exc.committed:
                    self._fail(str(exc))
                raise StorageError(str(exc)) from exc
            except (OSError, ValueError) as exc:
                self._fail(f"opening cleaned segment {bases[0]}: {exc}")
                raise StorageError(str(exc)) from exc
            self._segments[i : i + n] = [new]
            self._bases[i : i + n] = [new.base]
            self._size += new.size - sum(seg.size for seg in old)
            for seg in old:
                seg.close()
            return True


def _retention_timestamp(seg: Segment) -> int:
    ts = seg.largest_timestamp
    if ts >= 0:
        return ts
    return int(seg.path().stat().st_mtime * 1000)  # no timestamps: Kafka uses the mtime too


def _delete_files(segments: list[Segment]) -> None:
    for seg in segments:
        seg.delete_files()


def _rename_deleted(segments: list[Segment]) -> list[Path]:
    return [path for seg in segments for path in seg.rename_deleted()]


def _unlink_all(paths: list[Path]) -> None:
    for path in paths:
        unlink_quietly(path)
