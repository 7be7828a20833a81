"""A partition's lock, taken without a trip through trio's scheduler when nobody holds it.

``trio.Lock.acquire`` always ends in a scheduling checkpoint, even when the lock is free: the
task is rescheduled and the run loop makes a pass (an ``epoll_wait`` included) before the
append goes on, ~5 µs of broker CPU per append or marker. ``FastLock`` takes a free lock at once
(``acquire_nowait``) and waits as ``trio.Lock`` does otherwise. The lock is the same
``trio.Lock``: FIFO, and a release hands it straight to the first waiter, so a newcomer never
overtakes a waiting task. Cancellation is checked first, as ``trio.Lock.acquire`` does
(``checkpoint_if_cancelled``, no yield unless cancelled): a task cancelled before it came here
must not start the body, whose first checkpoint may come after the write (an append's fsync
wait with ``flush.messages=1``, before the producer state and high watermark move). What is
given up is the yield alone: appends to free partitions run back to back without letting other
tasks in (a Produce to many partitions yields at its end, not between partitions). Taking and
releasing are protected from KeyboardInterrupt, as trio.Lock's are (trio marks the code object:
no cost per call).
"""

from __future__ import annotations

from types import TracebackType

import trio
import trio.lowlevel


class FastLock:
    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = trio.Lock()

    @trio.lowlevel.enable_ki_protection  # as trio.Lock's: a KeyboardInterrupt never lands
    async def __aenter__(self) -> None:  # between taking the lock and the body's cleanup
        await trio.lowlevel.checkpoint_if_cancelled()  # as trio.Lock: no yield unless cancelled
        try:
            self._lock.acquire_nowait()
        except trio.WouldBlock:
            await self._lock.acquire()

    @trio.lowlevel.enable_ki_protection
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()
