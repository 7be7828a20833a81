"""``storage.append_lock.FastLock``: a free lock is taken without a scheduler pass, a held one
is waited for in FIFO order, and a release hands it to the first waiter, not to a newcomer."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.lowlevel
import trio.testing

from storage.api import LogConfig
from storage.append_lock import FastLock
from storage.backends import open_store
from tests.storage.test_transactions import batch, open_partition, put


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
        # released: the lock belongs to "a" now (not yet running), so a newcomer queues
        assert lock.locked()
        nursery.start_soon(take, "c")
    assert order == ["a", "b", "c"]


async def test_a_waiter_cancelled_in_the_queue_leaves_it() -> None:
    lock = FastLock()
    order: list[str] = []

    async def take(name: str) -> None:
        async with lock:
            order.append(name)

    async with trio.open_nursery() as nursery, lock:
        nursery.start_soon(take, "a")
        await trio.testing.wait_all_tasks_blocked()
        gone = trio.CancelScope()

        async def cancelled_waiter() -> None:
            with gone:
                await take("never")

        nursery.start_soon(cancelled_waiter)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(take, "b")
        await trio.testing.wait_all_tasks_blocked()
        gone.cancel()
        await trio.testing.wait_all_tasks_blocked()
    assert order == ["a", "b"] and not lock.locked()


async def test_taking_and_releasing_are_protected_from_keyboard_interrupt() -> None:
    """As trio.Lock's acquire and release: a control-C never lands between the lock taken and
    the body's cleanup armed, nor inside the release. The body itself is not protected."""
    seen: list[tuple[str, bool]] = []

    class Probe:  # stands in for the waiters, to look from inside take and release
        async def park(self) -> None:  # a held lock handed over at once
            seen.append(("take", trio.lowlevel.currently_ki_protected()))

        def __bool__(self) -> bool:  # release asks whether anyone waits
            seen.append(("release", trio.lowlevel.currently_ki_protected()))
            return False

    lock = FastLock()
    lock._lot = Probe()  # type: ignore[assignment]
    lock._held = True
    async with lock:
        seen.append(("body", trio.lowlevel.currently_ki_protected()))
    assert seen == [("take", True), ("body", False), ("release", True)]
    assert not lock.locked()


async def test_the_two_halves_queue_with_async_with_in_one_fifo() -> None:
    """``take``/``wait``/``release`` (``Partition.append``'s form) and ``async with`` share the
    lock and its queue."""
    lock = FastLock()
    order: list[str] = []

    async def halves(name: str) -> None:
        if not lock.take():
            await lock.wait()
        try:
            order.append(name)
            await trio.lowlevel.checkpoint()
        finally:
            lock.release()

    async def with_block(name: str) -> None:
        async with lock:
            order.append(name)
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        async with lock:
            nursery.start_soon(halves, "a")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(with_block, "b")
            await trio.testing.wait_all_tasks_blocked()
        assert lock.locked()  # handed to "a"
        nursery.start_soon(halves, "c")
    assert order == ["a", "b", "c"] and not lock.locked()


def test_the_two_halves_are_protected_from_keyboard_interrupt() -> None:
    """trio marks a protected function's code object (``enable_ki_protection``); the map is
    private, but there is no other way to look inside ``take``, which calls nothing."""
    from trio._core._ki import _CODE_KI_PROTECTION_STATUS_WMAP as protected

    for fn in (FastLock.take, FastLock.wait, FastLock.release):
        assert protected[fn.__code__] is True, fn


async def test_a_cancelled_task_does_not_take_a_free_lock() -> None:
    """As ``trio.Lock.acquire``: cancellation is checked before the lock is taken, so the body
    (an append) never starts in a task that is already cancelled."""
    lock = FastLock()
    entered = False
    with trio.CancelScope() as scope:
        scope.cancel()
        async with lock:
            entered = True
    assert scope.cancelled_caught and not entered and not lock.locked()


async def test_a_cancelled_produce_writes_nothing_a_retry_would_duplicate(tmp_path: Path) -> None:
    """A handler cancelled before its append (shutdown's grace ran out, its listener removed)
    must not write the batch: with ``flush.messages=1`` the body's first checkpoint is the fsync
    wait, after the write and before the producer state and high watermark move, so a batch
    written there is unknown to the sequence check and the producer's retry is appended again."""
    async with open_store(f"file://{tmp_path / 'data'}") as store:
        p = await open_partition(store, LogConfig(flush_messages=1))
        data = batch(pid=7, seq=0)
        with trio.CancelScope() as scope:
            scope.cancel()
            await put(p, data)
        assert scope.cancelled_caught
        assert p.log.log_end_offset == 0  # nothing written
        assert await put(p, data) == 0  # the retry is the first copy
        assert p.log.log_end_offset == p.high_watermark == 1


async def test_an_append_cancelled_in_its_roll_snapshot_still_completes(tmp_path: Path) -> None:
    """An append that rolls the log snapshots the producer state after the write; a
    cancellation arriving in that snapshot's write must not end the append before the producer
    state and high watermark take the batch (the producer's retry would be appended again)."""
    async with open_store(f"file://{tmp_path / 'data'}") as store:
        p = await open_partition(store, LogConfig(segment_bytes=200))
        await put(p, batch(pid=7, seq=0, n=10))
        data = batch(pid=7, seq=10, n=10)  # does not fit: the log rolls
        assert len(data) <= 200 < 2 * len(data)
        write = p.log.write_producer_snapshot

        async def cancelled_meanwhile(offset: int, snapshot: bytes) -> None:
            scope.cancel()
            await trio.lowlevel.checkpoint()
            await write(offset, snapshot)

        p.log.write_producer_snapshot = cancelled_meanwhile  # type: ignore[method-assign]
        with trio.CancelScope() as scope:
            await put(p, data)
        p.log.write_producer_snapshot = write  # type: ignore[method-assign]
        assert p.log.active_segment_base == 10
        assert p.log.log_end_offset == p.high_watermark == 20
        assert await put(p, data) == 10  # the retry is answered as the duplicate it is
        assert p.log.log_end_offset == 20
