"""A partition's lock, taken without a trip through trio's scheduler when nobody holds it.

``trio.Lock.acquire`` always ends in a scheduling checkpoint, even when the lock is free: the
task is rescheduled and the run loop makes a pass (an ``epoll_wait`` included) before the
append goes on, ~5 µs of broker CPU per append or marker. ``FastLock`` takes a free lock at once
and waits as ``trio.Lock`` does otherwise: FIFO, and a release hands the lock straight to the
first waiter (it stays held), so a newcomer never overtakes a waiting task. Cancellation is
checked first, as ``trio.Lock.acquire`` does (``checkpoint_if_cancelled``, no yield unless
cancelled): a task cancelled before it came here must not start the body, whose first
checkpoint may come after the write (an append's fsync wait with ``flush.messages=1``, before
the producer state and high watermark move). What is given up is the yield alone: appends to
free partitions run back to back without letting other tasks in (a Produce to many partitions
yields at its end, not between partitions). Taking and releasing are protected from
KeyboardInterrupt, as trio.Lock's are (trio marks the code object: no cost per call).

It is a flag and a ``ParkingLot``, not a ``trio.Lock``: trio.Lock's owner bookkeeping (the
current task looked up at each take and release, a parking-lot "breaker" registered for it)
cost ~0.9 µs of the ~1.4 µs an uncontended ``async with`` took. Given up with it: taking the
lock twice in one task deadlocks instead of raising RuntimeError, a task that ended while
holding it is not detected, and a task that does not hold it could release it (every holder
releases in ``__aexit__`` or a ``finally``, and nothing else calls ``release``).
"""

from __future__ import annotations

from types import TracebackType

import trio
import trio.lowlevel


class FastLock:
    __slots__ = ("_held", "_lot")

    def __init__(self) -> None:
        self._held = False
        self._lot = trio.lowlevel.ParkingLot()  # the waiters, FIFO

    @trio.lowlevel.enable_ki_protection  # as trio.Lock's: a KeyboardInterrupt never lands
    async def __aenter__(self) -> None:  # between taking the lock and the body's cleanup
        await trio.lowlevel.checkpoint_if_cancelled()  # as trio.Lock: no yield unless cancelled
        if self._held:
            await self._lot.park()  # woken by release, which handed the lock over
        else:
            self._held = True

    @trio.lowlevel.enable_ki_protection
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    # ``async with``'s two halves for the one hot caller (``Partition.append``: ~0.3 µs less
    # than the two coroutines of __aenter__/__aexit__), which must do exactly this::
    #
    #     await trio.lowlevel.checkpoint_if_cancelled()
    #     if not lock.take():
    #         await lock.wait()
    #     try:
    #         ...
    #     finally:
    #         lock.release()
    #
    # (``take`` returns into ``try`` with no call or backward jump in between: CPython checks
    # for a signal at neither, so a KeyboardInterrupt cannot land between them either.)

    @trio.lowlevel.enable_ki_protection
    def take(self) -> bool:
        """Take the lock if it is free (True); False if the caller must ``wait`` for it."""
        if self._held:
            return False
        self._held = True
        return True

    @trio.lowlevel.enable_ki_protection
    async def wait(self) -> None:
        """Wait until a release hands the lock to this task (FIFO)."""
        await self._lot.park()

    @trio.lowlevel.enable_ki_protection
    def release(self) -> None:
        if self._lot:
            self._lot.unpark()  # the first waiter holds it now: _held stays True
        else:
            self._held = False

    def locked(self) -> bool:
        return self._held
