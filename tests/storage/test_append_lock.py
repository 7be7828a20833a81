"""``storage.append_lock.FastLock``: a free lock is taken without a scheduler pass, a held one
is waited for in FIFO order, and a release hands it to the first waiter, not to a newcomer."""

from __future__ import annotations

import pytest
import trio
import trio.lowlevel
import trio.testing

from storage.append_lock import FastLock


async def test_a_free_lock_is_taken_without_yielding() -> None:
    lock = FastLock()
    ran: list[str] = []

    async def other() -> None:
        ran.append("other")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        async with lock:  # no checkpoint: `other` has not run yet
            assert lock.locked() and ran == []
        assert not lock.locked()


async def test_waiters_get_the_lock_in_order_and_a_newcomer_queues_behind_them() -> None:
    lock = FastLock()
    order: list[str] = []

    async def take(name: str) -> None:
        async with lock:
            order.append(name)
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        async with lock:
            nursery.start_soon(take, "a")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(take, "b")
            await trio.testing.wait_all_tasks_blocked()
        # released: the lock belongs to "a" now, so a newcomer cannot take it at once
        with pytest.raises(trio.WouldBlock):
            lock._lock.acquire_nowait()
        nursery.start_soon(take, "c")
    assert order == ["a", "b", "c"]


async def test_a_task_cannot_take_its_own_lock_twice() -> None:
    lock = FastLock()
    async with lock:
        with pytest.raises(RuntimeError):
            async with lock:
                pass
