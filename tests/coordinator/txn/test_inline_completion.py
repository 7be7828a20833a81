"""A completion run by the request that made its Prepare durable (``TxnCoordinator
.write_may_wait`` says no write may wait) while it yields mid-markers: a contended partition
lock or a roll's snapshot write lets other tasks in. Whatever runs meanwhile for the same
transactional id waits for it as for a completion task (Kafka answers CONCURRENT_TRANSACTIONS
instead; kafkad settles first), and cancelling the request cannot stop it halfway."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.lowlevel
from kio.schema.errors import ErrorCode

from coordinator.txn.runtime import MARKERS_PER_YIELD, TxnCoordinator
from coordinator.txn.state import TxnState
from storage.api import Store, TopicPartition
from storage.memory import MemoryStore
from tests.coordinator.txn.test_runtime import T0, T1, FakeMarkers, coordinator, init, now_ms

E = ErrorCode
S = TxnState


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore(now_ms)


class GatedMarkers(FakeMarkers):
    """Writes that never 'may wait' (so the request completes inline), each first waiting for
    ``gate``: the inline pass yields there."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = trio.Event()
        self.entered = trio.Event()

    def may_wait(self, topic: str) -> bool:
        return False

    async def __call__(self, tp: TopicPartition, *args: Any, **kwargs: Any) -> ErrorCode:
        self.entered.set()
        await self.gate.wait()
        return await super().__call__(tp, *args, **kwargs)


async def _while_committing(coord: TxnCoordinator, markers: GatedMarkers, racer: Any) -> Any:
    """Commit (pid 0, epoch 0) over T0 and T1, run ``racer(end_scope)`` once the first marker
    is under way, then let the markers through; (EndTxn's answer, the racer's)."""
    out: dict[str, Any] = {}
    scope = trio.CancelScope()

    async def end() -> None:
        with scope:
            out["end"] = await coord.end_txn("tx", 0, 0, True)

    async def race() -> None:
        out["racer"] = await racer(scope)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(end)
        await markers.entered.wait()
        assert coord.cache["tx"].state is S.PREPARE_COMMIT  # inline, in the EndTxn request
        nursery.start_soon(race)
        await trio.sleep(1)
        markers.gate.set()
    return out.get("end"), out["racer"]


async def _ongoing(coord: TxnCoordinator, markers: GatedMarkers) -> None:
    coord.write_may_wait = markers.may_wait
    assert await init(coord) == (0, 0)
    assert await coord.add_partitions("tx", 0, 0, [T0, T1]) is E.none


@pytest.mark.parametrize(
    ("request_", "answer"),
    [
        (lambda c: c.end_txn("tx", 0, 0, True), E.none),  # a retry: the commit is done
        (lambda c: c.end_txn("tx", 0, 0, False), E.invalid_txn_state),
        (lambda c: c.add_partitions("tx", 0, 0, [T0]), E.none),  # the next transaction
    ],
)
async def test_requests_for_the_id_wait_for_an_inline_completion(
    store: Store, autojump_clock: Any, request_: Any, answer: ErrorCode
) -> None:
    markers = GatedMarkers()
    async with coordinator(store, markers) as coord:
        await _ongoing(coord, markers)
        end, got = await _while_committing(coord, markers, lambda scope: request_(coord))
        assert (end, got) == (E.none, answer)
        assert sorted(c[0] for c in markers.calls) == [T0, T1]


async def test_a_fencing_init_producer_id_waits_for_an_inline_commit(
    store: Store, autojump_clock: Any
) -> None:
    markers = GatedMarkers()
    async with coordinator(store, markers) as coord:
        await _ongoing(coord, markers)
        end, got = await _while_committing(
            coord, markers, lambda scope: coord.init_producer_id("tx", 60_000, 0, 0)
        )
        assert end is E.none and (got.error, got.producer_epoch) == (E.none, 1)
        assert [c[3] for c in markers.calls] == [True, True]  # committed, not aborted
        assert coord.cache["tx"].state is S.EMPTY


async def test_cancelling_the_request_does_not_stop_an_inline_completion(
    store: Store, autojump_clock: Any
) -> None:
    markers = GatedMarkers()
    async with coordinator(store, markers) as coord:
        await _ongoing(coord, markers)

        async def cancel(scope: trio.CancelScope) -> None:
            scope.cancel()  # the client went away mid-markers

        await _while_committing(coord, markers, cancel)
        meta = coord.cache["tx"]
        assert meta.state is S.COMPLETE_COMMIT and not meta.pending
        assert sorted(c[0] for c in markers.calls) == [T0, T1] and not coord._completions


@pytest.mark.parametrize("inline", [True, False])
async def test_a_completion_over_many_partitions_lets_other_tasks_run(
    store: Store, inline: bool
) -> None:
    """Markers to free partitions never yield; the pass yields every MARKERS_PER_YIELD of them,
    so a transaction over hundreds of partitions does not hold the event loop throughout."""
    markers = FakeMarkers()
    seen: list[str] = []

    async def write(tp: TopicPartition, *args: Any, **kwargs: Any) -> ErrorCode:
        seen.append("marker")
        return await FakeMarkers.__call__(markers, tp, *args, **kwargs)

    async with coordinator(store, write) as coord:
        coord.write_may_wait = (lambda topic: False) if inline else None
        await coord.topics.create("many", 200, {})
        assert await init(coord) == (0, 0)
        many = [("many", p) for p in range(200)]
        assert await coord.add_partitions("tx", 0, 0, many) is E.none
        stop = trio.Event()

        async def ticks() -> None:
            while not stop.is_set():
                seen.append("tick")
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ticks)
            await trio.lowlevel.checkpoint()
            assert await coord.end_txn("tx", 0, 0, True) is E.none
            stop.set()
        first = seen.index("marker")
        last = len(seen) - 1 - seen[::-1].index("marker")
        assert seen[first:last].count("tick") >= 200 // MARKERS_PER_YIELD - 1
        assert coord.cache["tx"].state is S.COMPLETE_COMMIT and len(markers.calls) == 200
