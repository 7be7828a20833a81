"""``IdleReaper`` (proxy/connection.py): connections.max.idle.ms for every connection of a
run from one task. A connection's scope is cancelled exactly at its ``idle_at``, however
often that moved on since the task last woke, and an ``idle_at`` earlier than the task's
wake-up brings the wake-up forward. A wake-up looks at the due connections, not at every one
(Kafka's IdleExpiryManager: an access-ordered map whose oldest entry alone is checked)."""

from __future__ import annotations

import math

import pytest
import trio
import trio.testing
from kio.schema.api_versions.v0.request import ApiVersionsRequest

import proxy.server
from proxy.connection import Connection, idle_reaper
from tests.proxy.harness import RawClient
from tests.proxy.test_server_timeouts import memory_broker


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
    ten, two = reaper.queue(10), reaper.queue(2)
    late, early, moved, busy = (_conn(n) for n in ("late", "early", "moved", "busy"))
    start = trio.current_time()
    closed: dict[str, float] = {}

    async def watch(conn: Connection) -> None:
        closed[conn.peer] = await _closed_at(conn) - start

    def wait(conn: Connection, queue: dict[Connection, float], seconds: float) -> None:
        """What a read does as it starts to wait (serve_connection)."""
        at = conn.idle_at = queue[conn] = trio.current_time() + seconds
        reaper.waiting(at)

    def came(conn: Connection, queue: dict[Connection, float]) -> None:
        """What a read does when its bytes come."""
        conn.idle_at = math.inf
        queue.pop(conn, None)

    async with trio.open_nursery() as nursery:
        for conn in (late, early, moved, busy):
            nursery.start_soon(watch, conn)
        wait(moved, ten, 10)
        await trio.sleep(0.5)
        wait(late, ten, 10)  # due at 10.5
        await trio.sleep(0.5)  # the reaper sleeps until 10 now
        wait(early, two, 2)  # due at 3: before the reaper's wake-up
        await trio.sleep(6)
        came(moved, ten)  # a read at 7 ...
        wait(moved, ten, 10)  # ... moves it to 17
        await trio.sleep(20)  # ("busy" never waited: serving a request, never closed for it)
        nursery.cancel_scope.cancel()
    assert closed == {"early": 3.0, "late": 10.5, "moved": 17.0}
    assert not ten and not two


class _CountingConnection(Connection):
    """A Connection that counts the reads of its ``idle_at``."""

    reads = 0

    @property  # type: ignore[override]
    def idle_at(self) -> float:
        _CountingConnection.reads += 1
        return self._idle_at

    @idle_at.setter
    def idle_at(self, value: float) -> None:
        self._idle_at = value


async def test_a_wake_up_does_not_look_at_every_connection(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clients whose requests come just under connections.max.idle.ms apart, staggered: the
    reaper wakes as often as requests come (each wake-up finds the earliest connection moved
    on), so a walk over every connection per wake-up is one per request."""
    monkeypatch.setattr(proxy.server, "Connection", _CountingConnection)
    clients, rounds = 60, 4
    async with memory_broker(**{"connections.max.idle.ms": "5000"}) as (_, listener):
        streams = [await listener.connect() for _ in range(clients)]

        async def talk(i: int, stream: trio.abc.Stream) -> None:
            client = RawClient(stream)  # type: ignore[arg-type]
            await trio.sleep(i * 4.9 / clients)
            for _ in range(rounds):
                assert (await client.request(ApiVersionsRequest())).error_code == 0
                await trio.sleep(4.9)

        async with trio.open_nursery() as nursery:
            for i, stream in enumerate(streams):
                nursery.start_soon(talk, i, stream)
    # a walk over every connection per wake-up: ~clients * clients * rounds reads
    assert _CountingConnection.reads <= clients * rounds
