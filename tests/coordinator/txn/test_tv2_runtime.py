"""Transaction version 2 through the coordinator runtime (MockClock, in-memory store reopened to
simulate kills): EndTxn v5's answer, markers at the bumped epoch, a kill between the Prepare
record and Complete (re-driven at the bumped epoch after the restart, also across an epoch
overflow), and the timeout abort with ``transaction.version`` 2."""

from __future__ import annotations

import dataclasses
import math

import pytest
import trio
from kio.schema.errors import ErrorCode

from coordinator.txn.runtime import EndTxnResult
from coordinator.txn.state import MAX_EPOCH, TV2, TxnState
from storage.api import Store
from storage.memory import MemoryStore
from tests.coordinator.txn.test_runtime import (
    CONFIG,
    OFF,
    T0,
    T1,
    FakeMarkers,
    completion_mode,  # noqa: F401 (autouse: every test with and without inline completions)
    coordinator,
    durable,
    init,
    now_ms,
    replayed,
)

E = ErrorCode
S = TxnState


@pytest.fixture
def mem() -> MemoryStore:
    return MemoryStore(now_ms)


async def test_tv2_transactions_bump_and_answer_the_new_epoch(mem: Store, autojump_clock) -> None:
    markers = FakeMarkers()
    async with coordinator(mem, markers) as coord:
        pid, epoch = await init(coord)
        for commit in (True, False, True):
            assert await coord.add_partitions("tx", pid, epoch, [T0, T1], TV2) is E.none
            result = await coord.end_transaction("tx", pid, epoch, commit, TV2)
            assert result == EndTxnResult(E.none, pid, epoch + 1)
            assert markers.written() >= {(T0, pid, epoch + 1, commit), (T1, pid, epoch + 1, commit)}
            assert coord.cache["tx"].state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
            # the finished transaction's epoch is fenced at the coordinator
            assert await coord.add_partitions("tx", pid, epoch, [T0], TV2) is E.producer_fenced
            # a retried EndTxn (answer lost) is recognised
            retry = await coord.end_transaction("tx", pid, epoch, commit, TV2)
            assert retry == EndTxnResult(E.none, pid, epoch + 1)
            epoch += 1
        assert durable(await replayed(coord)) == durable(coord.cache)
        assert coord.cache["tx"].client_transaction_version == TV2
        # a classic EndTxn v4 on the same id still works, without a bump
        assert await coord.add_partitions("tx", pid, epoch, [T0]) is E.none
        assert await coord.end_txn("tx", pid, epoch, True) is E.none
        assert coord.cache["tx"].producer_epoch == epoch
        assert coord.cache["tx"].client_transaction_version == 0


async def test_markers_say_the_transaction_version(mem: Store, autojump_clock) -> None:
    """WriteTxnMarkers v2's ``TransactionVersion``: the partition refuses a TV2 marker at or
    below the producer's epoch (KAFKA-19446), so the coordinator must say which kind it writes."""
    markers = FakeMarkers()
    async with coordinator(mem, markers) as coord:
        pid, epoch = await init(coord)
        await coord.add_partitions("tx", pid, epoch, [T0], TV2)
        await coord.end_transaction("tx", pid, epoch, True, TV2)
        await coord.settle("tx", math.inf)
        assert markers.versions == [TV2]
        await coord.add_partitions("tx", pid, epoch + 1, [T0])
        assert await coord.end_txn("tx", pid, epoch + 1, True) is E.none
        await coord.settle("tx", math.inf)
        assert markers.versions == [TV2, 0]


async def test_kill_between_tv2_prepare_and_complete(mem: Store, autojump_clock) -> None:
    async with coordinator(mem, FakeMarkers(block=True)) as coord:
        pid, epoch = await init(coord)
        await coord.add_partitions("tx", pid, epoch, [T0, T1], TV2)
        # the Prepare record is durable: answered after completion_wait_ms with the new epoch
        result = await coord.end_transaction("tx", pid, epoch, True, TV2)
        assert result == EndTxnResult(E.none, pid, epoch + 1)
        assert coord.cache["tx"].state is S.PREPARE_COMMIT
    # killed with PrepareCommit(epoch + 1) as the last record
    markers = FakeMarkers()
    async with coordinator(mem, markers) as coord:
        await coord.settle("tx", math.inf)
        assert markers.written() == {(T0, pid, epoch + 1, True), (T1, pid, epoch + 1, True)}
        meta = coord.cache["tx"]
        assert (meta.state, meta.producer_epoch) == (S.COMPLETE_COMMIT, epoch + 1)
        # the client retries its EndTxn after the restart: a retry, not a new abort
        retry = await coord.end_transaction("tx", pid, epoch, True, TV2)
        assert retry == EndTxnResult(E.none, pid, epoch + 1)
        assert await coord.add_partitions("tx", pid, epoch + 1, [T0], TV2) is E.none
        assert durable(await replayed(coord)) == durable(coord.cache)


async def test_kill_during_an_overflowing_tv2_commit(mem: Store, autojump_clock) -> None:
    top = MAX_EPOCH - 1
    async with coordinator(mem, FakeMarkers(block=True)) as coord:
        pid, _ = await init(coord)
        # fast-forward the id to the last epoch a client gets (as if 32766 commits happened)
        meta = coord.cache["tx"]
        meta.producer_epoch = top
        assert await coord.add_partitions("tx", pid, top, [T0], TV2) is E.none
        result = await coord.end_transaction("tx", pid, top, True, TV2)
        assert result.error is E.none and result.producer_epoch == 0
        new_id = result.producer_id
        assert new_id != pid and coord.cache["tx"].next_producer_id == new_id
    markers = FakeMarkers()
    async with coordinator(mem, markers) as coord:
        await coord.settle("tx", math.inf)
        assert markers.written() == {(T0, pid, MAX_EPOCH, True)}
        meta = coord.cache["tx"]
        assert (meta.producer_id, meta.producer_epoch, meta.prev_producer_id) == (new_id, 0, pid)
        assert (meta.state, meta.next_producer_id) == (S.COMPLETE_COMMIT, -1)
        retry = await coord.end_transaction("tx", pid, top, True, TV2)
        assert retry == EndTxnResult(E.none, new_id, 0)
        assert await coord.add_partitions("tx", new_id, 0, [T1], TV2) is E.none
        assert await coord.end_transaction("tx", new_id, 0, False, TV2) == EndTxnResult(
            E.none, new_id, 1
        )


async def test_timeout_abort_with_transaction_version_2(mem: Store, autojump_clock) -> None:
    config = dataclasses.replace(CONFIG, transaction_version=TV2)
    markers = FakeMarkers()
    async with coordinator(mem, markers, config) as coord:
        pid, epoch = await init(coord, timeout_ms=2_000)
        await coord.add_partitions("tx", pid, epoch, [T0], TV2)
        await trio.sleep(4)  # two abort scans
        meta = coord.cache["tx"]
        assert (meta.state, meta.producer_epoch) == (S.COMPLETE_ABORT, epoch + 1)
        assert markers.written() == {(T0, pid, epoch + 1, False)}
        # the producer's own abort, late: answered as a retry with the epoch to continue with
        late = await coord.end_transaction("tx", pid, epoch, False, TV2)
        assert late == EndTxnResult(E.none, pid, epoch + 1)


async def test_timeout_abort_at_the_top_of_the_epoch_range(mem: Store, autojump_clock) -> None:
    config = dataclasses.replace(CONFIG, transaction_version=TV2)
    markers = FakeMarkers()
    async with coordinator(mem, markers, config) as coord:
        pid, _ = await init(coord, timeout_ms=2_000)
        coord.cache["tx"].producer_epoch = MAX_EPOCH - 1
        await coord.add_partitions("tx", pid, MAX_EPOCH - 1, [T0], TV2)
        await trio.sleep(4)
        meta = coord.cache["tx"]
        assert markers.written() == {(T0, pid, MAX_EPOCH, False)}
        assert meta.state is S.COMPLETE_ABORT and meta.producer_id != pid
        assert meta.producer_epoch == 0 and meta.prev_producer_id == pid
        assert durable(await replayed(coord)) == durable(coord.cache)


async def test_tv2_offsets_partition_added_implicitly(mem: Store, autojump_clock) -> None:
    """TxnOffsetCommit v5's add of the group's offsets partition (no AddOffsetsToTxn)."""
    markers = FakeMarkers()
    async with coordinator(mem, markers) as coord:
        pid, epoch = await init(coord)
        assert await coord.add_offsets("tx", pid, epoch, OFF[1], TV2) is E.none
        assert coord.cache["tx"].client_transaction_version == TV2
        result = await coord.end_transaction("tx", pid, epoch, True, TV2)
        assert result == EndTxnResult(E.none, pid, epoch + 1)
        assert markers.written() == {(OFF, pid, epoch + 1, True)}


async def test_timeout_scan_rechecks_the_rotation_after_reserving_an_id(
    mem: Store, autojump_clock
) -> None:
    """The scan reserves the fence's next producer id (an await); if meanwhile the id moved on
    to a transaction at a fresh epoch that timed out too, that one is fenced without a
    rotation (Kafka decides the rotation on the metadata it fences), not with the stale id."""
    config = dataclasses.replace(CONFIG, transaction_version=TV2)
    async with coordinator(mem, FakeMarkers(), config) as coord:
        pid, _ = await init(coord, timeout_ms=2_000)
        coord.cache["tx"].producer_epoch = MAX_EPOCH - 1
        await coord.add_partitions("tx", pid, MAX_EPOCH - 1, [T0], TV2)
        real = coord.producer_ids.generate_producer_id
        moved: list[int] = []

        async def generate() -> int:
            reserved = await real()
            if not moved:  # the producer aborts itself (rotating) and starts again
                moved.append(reserved)
                ended = await coord.end_transaction("tx", pid, MAX_EPOCH - 1, False, TV2)
                assert (ended.error, ended.producer_epoch) == (E.none, 0)
                assert await coord.add_partitions("tx", ended.producer_id, 0, [T1], TV2) is E.none
                await trio.sleep(3)  # and lets that transaction time out as well
            return reserved

        coord.producer_ids.generate_producer_id = generate  # type: ignore[method-assign]
        await trio.sleep(10)
        await coord.settle("tx", math.inf)
        meta = coord.cache["tx"]
        assert meta.state is S.COMPLETE_ABORT, meta
        # fenced once at epoch 0 -> 1, still the id the producer's abort moved to
        assert (meta.producer_epoch, meta.prev_producer_id) == (1, meta.producer_id)
        assert meta.producer_id not in moved
        assert durable(await replayed(coord)) == durable(coord.cache)
