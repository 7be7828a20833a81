"""``IdleReaper`` (proxy/connection.py): connections.max.idle.ms for every connection of a
run from one task. A connection's scope is cancelled exactly at its ``idle_at``, however
often that moved on since the task last woke, and an ``idle_at`` earlier than the task's
wake-up brings the wake-up forward."""

from __future__ import annotations

import trio
import trio.testing

from proxy.connection import Connection, idle_reaper


def _conn(name: str) -> Connection:
    a, _b = trio.testing.memory_stream_pair()
    return Connection(a, name)


async def _closed_at(conn: Connection) -> float:
    with conn.scope:
        await trio.sleep_forever()
    return trio.current_time()


async def test_each_connection_closes_at_its_own_idle_at(
    autojump_clock: trio.testing.MockClock,
) -> None:
    reaper = idle_reaper()
    late, early, moved, busy = (_conn(n) for n in ("late", "early", "moved", "busy"))
    reaper.connections.update((late, early, moved, busy))
    start = trio.current_time()
    closed: dict[str, float] = {}

    async def watch(conn: Connection) -> None:
        closed[conn.peer] = await _closed_at(conn) - start

    def wait(conn: Connection, seconds: float) -> None:
        at = conn.idle_at = trio.current_time() + seconds
        reaper.waiting(at)

    async with trio.open_nursery() as nursery:
        for conn in (late, early, moved, busy):
            nursery.start_soon(watch, conn)
        wait(late, 10)
        wait(moved, 8)
        await trio.sleep(1)  # the reaper sleeps until 8 now
        wait(early, 2)  # due at 3: before the reaper's wake-up
        await trio.sleep(6)
        wait(moved, 8)  # a read at 7 moves it to 15
        await trio.sleep(20)  # ("busy" never waited: serving a request, never closed for it)
        nursery.cancel_scope.cancel()
    assert closed == {"early": 3.0, "late": 10.0, "moved": 15.0}
