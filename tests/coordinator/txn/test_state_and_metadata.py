"""EDGES against Kafka's validPreviousStates, and every (state, move) pair of TxnMetadata."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from coordinator.txn.metadata import IllegalTransition, TxnCache, TxnMetadata, TxnTransit
from coordinator.txn.state import TxnState, is_epoch_exhausted, is_legal
from tests.coordinator.txn.helpers import meta_in

S = TxnState
STATES = list(S)
LIVE = [s for s in S if s not in (S.DEAD, S.PREPARE_EPOCH_FENCE)]

# Kafka's TransactionState.validPreviousStates, copied as a table (TV1).
KAFKA_VALID_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


@pytest.mark.parametrize("dst", STATES)
@pytest.mark.parametrize("src", STATES)
def test_edges_are_kafkas(src: TxnState, dst: TxnState) -> None:
    assert is_legal(src, dst) == (src in KAFKA_VALID_PREVIOUS[dst])


def test_ids_and_names() -> None:
    assert [int(s) for s in S] == list(range(8))
    assert S.PREPARE_EPOCH_FENCE.kafka_name == "PrepareEpochFence"
    assert all(S.from_kafka_name(s.kafka_name) is s for s in S)
    assert S.from_kafka_name("Bogus") is None
    assert not is_epoch_exhausted(32765) and is_epoch_exhausted(32766)


# Each kind of move, and the target state it must be legal for (from EDGES).
MOVES: dict[str, tuple[Callable[[TxnMetadata], TxnTransit], TxnState]] = {
    "increment": (lambda m: m.prepare_increment_epoch(m.producer_epoch + 1, -1, 1, 9), S.EMPTY),
    "rotate": (
        lambda m: m.prepare_producer_id_rotation(77, 1, 9, record_last_epoch=False),
        S.EMPTY,
    ),
    "add": (lambda m: m.prepare_add_partitions([("x", 0)], 9), S.ONGOING),
    "commit": (lambda m: m.prepare_end(True, 9), S.PREPARE_COMMIT),
    "abort": (lambda m: m.prepare_end(False, 9), S.PREPARE_ABORT),
    "fence": (lambda m: m.prepare_epoch_fence(9), S.PREPARE_EPOCH_FENCE),
    "complete": (lambda m: m.prepare_complete(9), S.COMPLETE_COMMIT),
    "dead": (lambda m: m.prepare_dead(), S.DEAD),
}


def _complete_target(state: TxnState) -> TxnState:
    return S.COMPLETE_COMMIT if state is S.PREPARE_COMMIT else S.COMPLETE_ABORT


@pytest.mark.parametrize("move", MOVES)
@pytest.mark.parametrize("state", LIVE)
def test_every_move_from_every_state(state: TxnState, move: str) -> None:
    prepare, target = MOVES[move]
    if move == "complete" and state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        target = _complete_target(state)
    meta = meta_in(state)
    if not is_legal(state, target):
        with pytest.raises(IllegalTransition):
            prepare(meta)
        assert meta.pending_state is None
        return
    t = prepare(meta)
    written = S.PREPARE_ABORT if move == "fence" else t.state
    assert meta.pending_state is written
    assert t.prev_producer_id == meta.producer_id
    with pytest.raises(IllegalTransition):  # one pending move at a time
        prepare(meta)
    if t.state is S.DEAD:
        return
    meta.complete(t)
    assert meta.state is written and meta.pending_state is None


def test_fence_bumps_once_and_abandon_keeps_the_bump() -> None:
    meta = meta_in(S.ONGOING, epoch=5)
    t = meta.prepare_epoch_fence(now_ms=2_000)
    assert (t.state, t.producer_epoch, t.last_producer_epoch, t.epoch_fence) == (
        S.PREPARE_ABORT,
        6,
        -1,
        True,
    )
    assert t.partitions == meta.partitions and t.txn_start_timestamp == meta.txn_start_timestamp
    meta.abandon(t)
    assert (meta.state, meta.producer_epoch, meta.has_failed_epoch_fence) == (S.ONGOING, 6, True)
    again = meta.prepare_epoch_fence(now_ms=3_000)
    assert again.producer_epoch == 6  # not bumped twice
    meta.complete(again)
    assert (meta.state, meta.producer_epoch, meta.has_failed_epoch_fence) == (
        S.PREPARE_ABORT,
        6,
        False,
    )


def test_fence_at_max_epoch_does_not_overflow() -> None:
    meta = meta_in(S.ONGOING, epoch=32767)
    assert meta.prepare_epoch_fence(1).producer_epoch == 32767


def test_abandon_plain_move_changes_nothing_but_pending() -> None:
    meta = meta_in(S.ONGOING)
    before = meta.durable_view()
    meta.abandon(meta.prepare_end(True, 5_000))
    assert meta.durable_view() == before and meta.pending_state is None


@pytest.mark.parametrize(
    "bad",
    [
        {"producer_epoch": 7},  # epoch jumps
        {"producer_id": 4},  # other producer
        {"txn_timeout_ms": 1},  # timeout changes while a transaction is open
        {"partitions": frozenset({("t", 0)})},  # partitions shrink while Ongoing
    ],
)
def test_complete_checks_kafkas_invariants(bad: dict[str, object]) -> None:
    import dataclasses

    meta = meta_in(S.ONGOING)
    t = meta.prepare_add_partitions([("t", 9)], 5_000)
    with pytest.raises(IllegalTransition):
        meta.complete(dataclasses.replace(t, **bad))  # type: ignore[arg-type]


def test_complete_needs_the_pending_state() -> None:
    meta = meta_in(S.ONGOING)
    t = meta.prepare_end(True, 5_000)
    meta.complete(t)
    with pytest.raises(IllegalTransition):
        meta.complete(t)


def test_remove_partition_only_while_prepared() -> None:
    meta = meta_in(S.PREPARE_COMMIT)
    meta.remove_partition(("t", 0))
    assert meta.partitions == {("t", 1)}
    with pytest.raises(IllegalTransition):
        meta_in(S.ONGOING).remove_partition(("t", 0))


def test_cache_apply_routes_live_replay_and_tombstones() -> None:
    cache = TxnCache()
    meta = cache.put_if_absent(meta_in(S.COMPLETE_COMMIT))
    assert cache.put_if_absent(meta_in(S.EMPTY)) is meta  # first creator wins
    t = meta.prepare_add_partitions([("t", 3)], 5_000)
    cache.apply(t)  # live: completes the pending move on the same object
    assert cache["tx"] is meta and meta.state is S.ONGOING
    replay = TxnCache()
    replay.replay([t])  # startup: builds it from the record
    assert replay["tx"].durable_view() == meta.durable_view()
    dead = TxnCache()
    dead.put_if_absent(meta_in(S.EMPTY))
    dead.apply(dead["tx"].prepare_dead())
    assert "tx" not in dead and len(dead) == 0
