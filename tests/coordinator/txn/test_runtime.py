"""The transaction coordinator's runtime under trio's MockClock, on a file store that is
reopened to simulate restarts and kills, with a recording fake marker writer.

Checked: whole commit/abort flows (a marker for every partition, then Complete*), failing
marker writes retried, CONCURRENT_TRANSACTIONS while a completion is stuck, restarts in every
state (replay equals live, Prepare* re-driven), the timeout abort and zombie fencing, id
expiry, failed log appends, and the lazily created ``__transaction_state``.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode

from coordinator.producer_ids import ProducerIdManager
from coordinator.txn.metadata import TP, TxnCache
from coordinator.txn.runtime import COORDINATOR_EPOCH, RETRY_MIN_S, TxnConfig, TxnCoordinator
from coordinator.txn.state import TxnState
from coordinator.txn.txn_log import TXN_TOPIC
from storage.api import LogConfig, StorageError, Store, TopicPartition
from storage.backends import open_store
from storage.memory import MemoryStore
from storage.topics import TopicManager

E = ErrorCode
S = TxnState
BASE_MS = 1_700_000_000_000
VALUES: dict[str, Any] = {
    "num.partitions": 1,
    "default.replication.factor": 1,
    "log.message.timestamp.type": "CreateTime",
}
CONFIG = TxnConfig(num_partitions=3, abort_interval_ms=1_000, expire_interval_ms=10_000)
T0, T1, OFF = ("t", 0), ("t", 1), ("__consumer_offsets", 3)


def now_ms() -> int:
    return BASE_MS + int(trio.current_time() * 1000)


class FakeMarkers:
    """Records every marker; answers scripted codes per partition, then NONE. ``block`` makes
    every call hang (a broker killed while writing markers)."""

    def __init__(self, script: dict[TP, list[ErrorCode]] | None = None, block: bool = False):
        self.calls: list[tuple[TP, int, int, bool, int]] = []
        self.versions: list[int] = []  # the transaction version each marker said
        self.script = script or {}
        self.block = block

    async def __call__(
        self,
        tp: TopicPartition,
        pid: int,
        epoch: int,
        commit: bool,
        coordinator_epoch: int,
        *,
        transaction_version: int = 0,
    ) -> ErrorCode:
        key = (tp.topic, tp.partition)
        self.calls.append((key, pid, epoch, commit, coordinator_epoch))
        self.versions.append(transaction_version)
        if self.block:
            await trio.sleep_forever()
        codes = self.script.get(key)
        return codes.pop(0) if codes else E.none

    def written(self) -> set[tuple[TP, int, int, bool]]:
        return {(tp, pid, epoch, commit) for tp, pid, epoch, commit, _ in self.calls}

    def may_wait(self, topic: str) -> bool:
        """The broker's ``txn_write_may_wait`` for this writer: a blocking one may."""
        return self.block


_INLINE: list[bool] = [False]


@pytest.fixture(autouse=True, params=[False, True], ids=["task", "inline"])
def completion_mode(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test twice: completions in a task as for a writer that may wait, and run by the
    request itself (``TxnCoordinator.write_may_wait``: the fake's ``may_wait``)."""
    _INLINE[0] = request.param
    yield
    _INLINE[0] = False


@pytest.fixture
def store() -> MemoryStore:
    """In memory (no threads, so the mock clock is exact); each ``coordinator`` block over it
    is one broker run, and its logs survive to the next one like files would."""
    return MemoryStore(now_ms)


@asynccontextmanager
async def coordinator(
    store: Store, markers: Any, config: TxnConfig = CONFIG, crash_point: Any = None
) -> AsyncIterator[TxnCoordinator]:
    """A running coordinator over ``store``; leaving the block is a kill (nothing is completed
    beyond what was already appended)."""
    topics = TopicManager(store, LogConfig(), VALUES)
    await topics.load()
    if topics.get("t") is None:
        await topics.create("t", 2, {})
    ids = ProducerIdManager(store)
    await ids.load()
    may_wait = getattr(markers, "may_wait", None) if _INLINE[0] else None
    coord = TxnCoordinator(topics, config, ids, markers, now_ms, crash_point, may_wait)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(coord.run)
        await coord.loaded.wait()
        yield coord
        nursery.cancel_scope.cancel()


async def init(coord: TxnCoordinator, tid: str = "tx", timeout_ms: int = 60_000) -> tuple[int, int]:
    r = await coord.init_producer_id(tid, timeout_ms)
    assert r.error is E.none, r
    return r.producer_id, r.producer_epoch


async def replayed(coord: TxnCoordinator) -> TxnCache:
    cache = TxnCache()
    async for transit in coord.txn_log.replay():
        cache.apply(transit)
    return cache


def durable(cache: Any) -> dict[str, tuple[object, ...]]:
    return {tid: meta.durable_view() for tid, meta in cache.items()}


async def test_commit_writes_every_marker_then_complete(store: Store, autojump_clock) -> None:
    markers = FakeMarkers()
    async with coordinator(store, markers) as coord:
        assert coord.topics.get(TXN_TOPIC) is None  # created lazily, not at startup
        pid, epoch = await init(coord)
        topic = coord.topics.get(TXN_TOPIC)
        assert topic is not None and len(topic.partitions) == 3
        assert topic.meta.configs["cleanup.policy"] == "compact"
        assert await coord.add_partitions("tx", pid, epoch, [T0, T1]) is E.none
        assert await coord.add_offsets("tx", pid, epoch, 3) is E.none
        assert coord.cache["tx"].state is S.ONGOING
        assert await coord.end_txn("tx", pid, epoch, True) is E.none
        # answered after the markers and the Complete record
        assert markers.calls == [
            (tp, pid, epoch, True, COORDINATOR_EPOCH) for tp in sorted([T0, T1, OFF])
        ]
        meta = coord.cache["tx"]
        assert meta.state is S.COMPLETE_COMMIT and not meta.pending and not meta.partitions
        assert durable(await replayed(coord)) == durable(coord.cache)
        # no CONCURRENT_TRANSACTIONS window: the next transaction starts at once
        assert await coord.add_partitions("tx", pid, epoch, [T1]) is E.none
        assert await coord.end_txn("tx", pid, epoch, False) is E.none
        assert markers.calls[-1] == (T1, pid, epoch, False, COORDINATOR_EPOCH)
        assert coord.cache["tx"].state is S.COMPLETE_ABORT
        assert await coord.end_txn("tx", pid, epoch, False) is E.none  # a retried EndTxn
        assert await coord.end_txn("tx", pid, epoch, True) is E.invalid_txn_state
        assert len(markers.calls) == 4


async def test_failing_marker_write_is_retried(store: Store, autojump_clock) -> None:
    markers = FakeMarkers({T0: [E.not_leader_or_follower] * 3, T1: [E.kafka_storage_error]})
    async with coordinator(store, markers) as coord:
        pid, epoch = await init(coord)
        await coord.add_partitions("tx", pid, epoch, [T0, T1])
        assert await coord.end_txn("tx", pid, epoch, True) is E.none
        assert [c[0] for c in markers.calls].count(T0) == 4
        assert [c[0] for c in markers.calls].count(T1) == 2
        assert coord.cache["tx"].state is S.COMPLETE_COMMIT


async def test_inline_completion_needs_no_task_unless_a_write_fails(
    store: Store, autojump_clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With writes that may not wait the EndTxn request completes the transaction itself; a
    marker that fails hands the rest to a task, which retries after the backoff."""
    markers = FakeMarkers({T1: [E.not_leader_or_follower]})
    async with coordinator(store, markers) as coord:
        coord.write_may_wait = markers.may_wait
        started: list[bool] = []
        start = coord._start_completion

        def spy(*args: Any, retry: bool = False) -> None:
            started.append(retry)
            start(*args, retry=retry)

        monkeypatch.setattr(coord, "_start_completion", spy)
        pid, epoch = await init(coord)
        await coord.add_partitions("tx", pid, epoch, [T0])
        assert await coord.end_txn("tx", pid, epoch, True) is E.none
        assert started == [] and coord.cache["tx"].state is S.COMPLETE_COMMIT
        await coord.add_partitions("tx", pid, epoch, [T0, T1])
        before = trio.current_time()
        assert await coord.end_txn("tx", pid, epoch, False) is E.none
        assert started == [True] and coord.cache["tx"].state is S.COMPLETE_ABORT
        assert trio.current_time() - before == pytest.approx(RETRY_MIN_S)
        assert [c[0] for c in markers.calls] == [T0, T0, T1, T1]


async def test_stuck_markers_answer_concurrent_transactions(store: Store, autojump_clock) -> None:
    markers = FakeMarkers({T1: [E.request_timed_out] * 1000})
    async with coordinator(store, markers) as coord:
        pid, epoch = await init(coord)
        await coord.add_partitions("tx", pid, epoch, [T0, T1])
        # the decision is durable: EndTxn answers NONE although a marker keeps failing
        assert await coord.end_txn("tx", pid, epoch, True) is E.none
        meta = coord.cache["tx"]
        assert meta.state is S.PREPARE_COMMIT and meta.pending
        assert meta.partitions == {T1}  # DescribeTransactions: the ones still lacking markers
        assert await coord.add_partitions("tx", pid, epoch, [T0]) is E.concurrent_transactions
        assert await coord.end_txn("tx", pid, epoch, True) is E.concurrent_transactions
        assert (await coord.init_producer_id("tx", 60_000)).error is E.concurrent_transactions
        assert coord.verify_partition("tx", pid, epoch, TopicPartition("t", 1)) is (
            E.concurrent_transactions
        )
        markers.script.clear()  # the partition comes back
        await coord.settle("tx", math.inf)
        assert meta.state is S.COMPLETE_COMMIT and not meta.pending
        assert await coord.add_partitions("tx", pid, epoch, [T0]) is E.none


@pytest.mark.parametrize(
    ("code", "exists"),
    [
        (E.unknown_topic_or_partition, False),  # deleted: dropped
        (E.invalid_producer_epoch, True),  # STOP: a newer epoch owns the partition
        (E.unsupported_for_message_format, True),  # DROP
        (E.unknown_server_error, True),  # BUG (also the refusing stand-in writer)
    ],
)
async def test_markers_that_are_not_retried(
    store: Store, autojump_clock, code: ErrorCode, exists: bool
) -> None:
    gone = ("gone", 0)
    tp = T0 if exists else gone
    markers = FakeMarkers({tp: [code] * 1000})
    async with coordinator(store, markers) as coord:
        pid, epoch = await init(coord)
        await coord.add_partitions("tx", pid, epoch, [tp, T1])
        assert await coord.end_txn("tx", pid, epoch, False) is E.none
        assert coord.cache["tx"].state is S.COMPLETE_ABORT
        assert [c[0] for c in markers.calls].count(tp) == 1


async def test_writer_exception_is_retried(store: Store, autojump_clock) -> None:
    calls = 0

    async def flaky(
        tp: TopicPartition, pid: int, epoch: int, commit: bool, ce: int, **_: int
    ) -> ErrorCode:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("boom")
        if calls == 2:
            raise StorageError("disk")
        return E.none

    async with coordinator(store, flaky) as coord:
        pid, epoch = await init(coord)
        await coord.add_partitions("tx", pid, epoch, [T0])
        assert await coord.end_txn("tx", pid, epoch, True) is E.none
        assert calls == 3 and coord.cache["tx"].state is S.COMPLETE_COMMIT


async def test_restart_in_every_state_replays_what_was_live(store: Store, autojump_clock) -> None:
    markers = FakeMarkers()
    async with coordinator(store, markers) as coord:
        await init(coord, "empty")
        pid, e = await init(coord, "ongoing")
        await coord.add_partitions("ongoing", pid, e, [T0, T1])
        for tid, commit in (("committed", True), ("aborted", False)):
            pid, e = await init(coord, tid)
            await coord.add_offsets(tid, pid, e, 3)
            assert await coord.end_txn(tid, pid, e, commit) is E.none
        pid, e = await init(coord, "bumped")
        assert (await coord.init_producer_id("bumped", 30_000, pid, e)).producer_epoch == e + 1
        live = durable(coord.cache)
        assert durable(await replayed(coord)) == live
        assert {m.state for m in coord.cache.values()} == {
            S.EMPTY,
            S.ONGOING,
            S.COMPLETE_COMMIT,
            S.COMPLETE_ABORT,
        }
    async with coordinator(store, FakeMarkers()) as coord:
        assert durable(coord.cache) == live
        pid, e = coord.cache["ongoing"].producer_id, coord.cache["ongoing"].producer_epoch
        assert await coord.end_txn("ongoing", pid, e, True) is E.none  # carries on


async def test_kill_between_prepare_and_complete_redrives_markers(
    store: Store, autojump_clock
) -> None:
    stuck = FakeMarkers(block=True)
    async with coordinator(store, stuck) as coord:
        pid, epoch = await init(coord)
        await coord.add_partitions("tx", pid, epoch, [T0, T1])
        assert await coord.end_txn("tx", pid, epoch, True) is E.none  # Prepare* is durable
        assert coord.cache["tx"].state is S.PREPARE_COMMIT
        assert len(stuck.calls) == 1
    # killed: PrepareCommit is the last record of "tx"
    async with coordinator(store, FakeMarkers(block=True)) as coord:
        assert (await replayed(coord))["tx"].state is S.PREPARE_COMMIT
    markers = FakeMarkers()
    async with coordinator(store, markers) as coord:
        await coord.settle("tx", math.inf)
        assert markers.written() == {(T0, pid, epoch, True), (T1, pid, epoch, True)}
        assert coord.cache["tx"].state is S.COMPLETE_COMMIT
        assert durable(await replayed(coord)) == durable(coord.cache)
        assert await coord.add_partitions("tx", pid, epoch, [T0]) is E.none


async def test_crash_points_are_called_after_prepare_and_after_the_first_marker(
    store: Store, autojump_clock
) -> None:
    markers = FakeMarkers()
    seen: list[tuple[str, int]] = []  # (point, markers written so far)

    def crash_point(point: str) -> None:
        seen.append((point, len(markers.calls)))

    async with coordinator(store, markers, crash_point=crash_point) as coord:
        pid, epoch = await init(coord)
        await coord.add_partitions("tx", pid, epoch, [T0, T1])
        assert await coord.end_txn("tx", pid, epoch, True) is E.none
        assert seen == [("txn_after_prepare", 0), ("txn_after_first_marker", 1)]
        await coord.add_partitions("tx", pid, epoch, [T0])  # one partition: no "first of several"
        assert await coord.end_txn("tx", pid, epoch, False) is E.none
        assert seen[2:] == [("txn_after_prepare", 2)]


async def test_kill_and_restart_on_disk(tmp_path: Path) -> None:
    """The same on the file store, on the real clock (its reads run in threads, which the mock
    clock does not wait for); EndTxn gives up waiting for the stuck marker after 10 ms."""
    url = f"file://{tmp_path}"
    config = TxnConfig(num_partitions=3, completion_wait_ms=10)
    with trio.fail_after(30):
        async with (
            open_store(url) as disk,
            coordinator(disk, FakeMarkers(block=True), config) as coord,
        ):
            pid, epoch = await init(coord)
            await coord.add_partitions("tx", pid, epoch, [T0])
            await coord.add_offsets("tx", pid, epoch, 3)
            assert await coord.end_txn("tx", pid, epoch, False) is E.none
        markers = FakeMarkers()
        async with open_store(url) as disk, coordinator(disk, markers) as coord:
            await coord.settle("tx", math.inf)
            assert markers.written() == {(T0, pid, epoch, False), (OFF, pid, epoch, False)}
            assert coord.cache["tx"].state is S.COMPLETE_ABORT
            live = durable(coord.cache)
        async with open_store(url) as disk, coordinator(disk, FakeMarkers()) as coord:
            assert durable(coord.cache) == live


async def test_concurrent_first_inits_create_the_log_once(tmp_path: Path) -> None:
    """Regression: two InitProducerIds racing on a broker that has no __transaction_state yet
    both created it; the second failed with "already exists" (found by bench/throughput.py
    --transactions with two clients)."""
    with trio.fail_after(30):
        async with open_store(f"file://{tmp_path}") as disk, coordinator(disk, None) as coord:
            results: dict[str, int] = {}

            async def one(tid: str) -> None:
                results[tid] = (await init(coord, tid))[0]

            async with trio.open_nursery() as nursery:
                for tid in ("a", "b", "c"):
                    nursery.start_soon(one, tid)
            assert len(set(results.values())) == 3
            assert len(coord.topics.get(TXN_TOPIC).partitions) == 3  # type: ignore[union-attr]


async def test_requests_wait_for_the_load(store: Store, autojump_clock) -> None:
    topics = TopicManager(store, LogConfig(), VALUES)
    ids = ProducerIdManager(store)
    coord = TxnCoordinator(topics, CONFIG, ids, FakeMarkers(), now_ms)
    assert (await coord.init_producer_id("tx", 1000)).error is E.coordinator_load_in_progress
    assert await coord.end_txn("tx", 1, 0, True) is E.coordinator_load_in_progress
    assert await coord.add_offsets("tx", 1, 0, 3) is E.coordinator_load_in_progress
    tp = TopicPartition("t", 0)
    assert coord.verify_partition("tx", 1, 0, tp) is E.coordinator_load_in_progress
    assert coord.describe("tx") is E.coordinator_load_in_progress
    assert coord.list_transactions([], [], -1)[0] is E.coordinator_load_in_progress


async def test_timed_out_transaction_is_aborted_and_its_producer_fenced(
    store: Store, autojump_clock
) -> None:
    markers = FakeMarkers()
    async with coordinator(store, markers) as coord:
        pid, epoch = await init(coord, timeout_ms=5_000)
        await coord.add_partitions("tx", pid, epoch, [T0])
        await trio.sleep(4)
        assert coord.cache["tx"].state is S.ONGOING
        await trio.sleep(3)  # start + timeout passed, and the scan at 6 s aborted it
        meta = coord.cache["tx"]
        assert meta.state is S.COMPLETE_ABORT and meta.producer_epoch == epoch + 1
        assert markers.written() == {(T0, pid, epoch + 1, False)}
        # the old instance is fenced everywhere
        assert await coord.end_txn("tx", pid, epoch, True) is E.producer_fenced
        assert await coord.add_partitions("tx", pid, epoch, [T0]) is E.producer_fenced
        assert coord.verify_partition("tx", pid, epoch, TopicPartition("t", 0)) is (
            E.producer_fenced
        )
        r = await coord.init_producer_id("tx", 5_000, pid, epoch)
        assert r.error is E.producer_fenced
        assert durable(await replayed(coord)) == durable(coord.cache)
        assert await init(coord) == (pid, epoch + 2)  # a new instance


async def test_second_instance_fences_the_first(store: Store, autojump_clock) -> None:
    markers = FakeMarkers()
    async with coordinator(store, markers) as coord:
        pid, epoch = await init(coord)
        await coord.add_partitions("tx", pid, epoch, [T0, T1])
        tp = TopicPartition("t", 0)
        assert coord.verify_partition("tx", pid, epoch, tp) is E.none
        assert coord.verify_partition("tx", pid, epoch, TopicPartition("t", 5)) is (
            E.transaction_abortable
        )
        assert coord.verify_partition("tx", pid + 1, epoch, tp) is E.invalid_producer_id_mapping
        # the zombie's open transaction is aborted under epoch + 1; the new instance retries
        r = await coord.init_producer_id("tx", 60_000)
        assert r.error is E.concurrent_transactions
        assert markers.written() == {(T0, pid, epoch + 1, False), (T1, pid, epoch + 1, False)}
        assert coord.cache["tx"].state is S.COMPLETE_ABORT
        assert await init(coord) == (pid, epoch + 2)
        assert await coord.add_partitions("tx", pid, epoch, [T0]) is E.producer_fenced
        assert await coord.end_txn("tx", pid, epoch, False) is E.producer_fenced
        assert coord.verify_partition("tx", pid, epoch, tp) is E.producer_fenced


async def test_transactional_id_expires(store: Store, autojump_clock) -> None:
    config = TxnConfig(num_partitions=3, id_expiration_ms=60_000, expire_interval_ms=10_000)
    async with coordinator(store, FakeMarkers(), config) as coord:
        pid, _ = await init(coord, "idle")
        busy_pid, busy_epoch = await init(coord, "busy", timeout_ms=900_000)
        await coord.add_partitions("busy", busy_pid, busy_epoch, [T0])
        await trio.sleep(55)
        assert "idle" in coord.cache  # the scan at 50 s found it idle for less than 60 s
        await trio.sleep(10)
        assert "idle" not in coord.cache  # tombstoned by the scan at 60 s
        assert coord.cache["busy"].state is S.ONGOING  # an open transaction never expires
        assert "idle" not in await replayed(coord)
        assert coord.describe("idle") is E.transactional_id_not_found
        new_pid, new_epoch = await init(coord, "idle")
        assert new_pid != pid and new_epoch == 0
    async with coordinator(store, FakeMarkers(), config) as coord:
        assert coord.cache["idle"].producer_id == new_pid


async def test_failed_log_append_is_abandoned(store: Store, autojump_clock) -> None:
    async with coordinator(store, FakeMarkers()) as coord:
        real = coord.txn_log.append
        plan = [True]  # whether each next append fails; then they succeed

        async def failing(transit: Any) -> None:
            if plan and plan.pop(0):
                raise StorageError("disk full")
            await real(transit)

        coord.txn_log.append = failing  # type: ignore[method-assign]
        r = await coord.init_producer_id("tx", 60_000)
        assert r.error is E.not_coordinator and not coord.cache["tx"].pending
        pid, epoch = await init(coord)
        assert epoch == 0
        await coord.add_partitions("tx", pid, epoch, [T0])
        plan[:] = [False, True, True]  # the Prepare record lands, the Complete one fails twice
        assert await coord.end_txn("tx", pid, epoch, True) is E.none
        assert coord.cache["tx"].state is S.COMPLETE_COMMIT and not plan
        assert durable(await replayed(coord)) == durable(coord.cache)


async def test_describe_and_list(store: Store, autojump_clock) -> None:
    async with coordinator(store, FakeMarkers()) as coord:
        pid, epoch = await init(coord, "a")
        await coord.add_partitions("a", pid, epoch, [T0])
        other, _ = await init(coord, "b")
        assert coord.describe("") is E.invalid_request
        meta = coord.describe("a")
        assert not isinstance(meta, ErrorCode) and meta.state is S.ONGOING
        await trio.sleep(2)
        code, unknown, found = coord.list_transactions([], [], -1)
        assert code is E.none and not unknown and [m.transactional_id for m in found] == ["a", "b"]
        code, unknown, found = coord.list_transactions(["Ongoing", "Bogus"], [], -1)
        assert unknown == ["Bogus"] and [m.transactional_id for m in found] == ["a"]
        assert coord.list_transactions(["Bogus"], [], -1)[2] == []
        assert [m.transactional_id for m in coord.list_transactions([], [other], -1)[2]] == ["b"]
        assert [m.transactional_id for m in coord.list_transactions(["Ongoing"], [], 1_000)[2]] == [
            "a"
        ]
        assert coord.list_transactions(["Ongoing"], [], 5_000)[2] == []
