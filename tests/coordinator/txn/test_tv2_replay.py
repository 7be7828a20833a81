"""Replay equals live with transaction version 2 in the mix: random programs of TV1 and TV2
requests (clients that follow EndTxn v5's answers, stale ones, retries), fences at either
coordinator level, failed appends and restarts, starting far from and near the top of the
epoch range. Every transit also passes ``TxnMetadata.complete``'s invariants (a violation
raises), and at level 2 no epoch a client is told ever reaches Short.MaxValue."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from coordinator.txn import decisions, lifecycle, log_format
from coordinator.txn.decisions import Write
from coordinator.txn.metadata import TxnTransit
from coordinator.txn.state import MAX_EPOCH, TV2, TxnState
from tests.coordinator.txn.helpers import Coordinator
from tests.coordinator.txn.test_replay import EXPIRATION_MS, assert_replay_equals_live

E = ErrorCode
TIDS = ["a", "b"]

tid = st.sampled_from(TIDS)
fail = st.sampled_from([False] * 5 + [True])
age = st.sampled_from(["current"] * 4 + ["retry", "stale"])
tv = st.sampled_from([0, TV2, TV2])
ops = st.sampled_from(
    [
        st.tuples(st.just("init"), tid, st.sampled_from(["fresh", "kip360"]), fail),
        st.tuples(st.just("add"), tid, st.integers(0, 2), age, tv, fail),
        st.tuples(st.just("add"), tid, st.integers(0, 2), age, tv, fail),
        st.tuples(st.just("end"), tid, st.booleans(), age, tv, fail),
        st.tuples(st.just("end"), tid, st.booleans(), age, tv, fail),
        st.tuples(st.just("markers"), tid, fail),
        st.tuples(st.just("markers"), tid, fail),
        st.tuples(st.just("tick"), st.integers(1, 40_000)),
        st.tuples(st.just("timeouts"), fail),
        st.tuples(st.just("expire"), fail),
    ]
).flatmap(lambda strategy: strategy)
programs = st.lists(ops, min_size=20, max_size=80)


def run_tv2_ops(c: Coordinator, program: list[tuple[Any, ...]], known: dict[str, Any]) -> None:
    """``known``: the (producer id, epoch) each client continues with, from its answers."""

    def ids(t: str, how: str) -> tuple[int, int]:
        pid, epoch = known.get(t, (999, 0))
        return {"current": (pid, epoch), "retry": (pid, epoch - 1), "stale": (pid, epoch - 2)}[how]

    for op in program:
        match op:
            case ("init", t, mode, f):
                pid, epoch = (-1, -1) if mode == "fresh" or t not in known else ids(t, "current")
                outcome = c.init(t, timeout_ms=30_000, pid=pid, epoch=epoch)
                if c.run(outcome, fail=f) is E.none and isinstance(outcome, Write):
                    known[t] = (outcome.transit.producer_id, outcome.transit.producer_epoch)
            case ("add", t, p, how, v, f):
                c.run(c.add(t, *ids(t, how), ("out", p), tv=v), fail=f)
            case ("end", t, commit, how, v, f):
                outcome = c.end(t, *ids(t, how), commit, tv=v)
                reply = decisions.end_txn_reply_ids(c.cache.get(t), outcome)
                if c.run(outcome, fail=f) is E.none and v == TV2 and how == "current":
                    known[t] = reply
            case ("markers", t, f):
                c.finish_markers(t, fail=f)
            case ("tick", ms):
                c.now_ms += ms
            case ("timeouts", f):
                for meta in lifecycle.expired_transactions(c.cache, c.now_ms):
                    next_id = (
                        c.new_producer_id()
                        if decisions.fence_needs_new_producer_id(meta, c.transaction_version)
                        else -1
                    )
                    write = lifecycle.abort_timed_out(
                        meta, c.now_ms, c.transaction_version, next_id
                    )
                    assert write is not None
                    c.run(write, fail=f)
            case ("expire", f):
                for meta in lifecycle.expired_transactional_ids(c.cache, c.now_ms, EXPIRATION_MS):
                    c.run(lifecycle.expire_transactional_id(meta), fail=f)
        if c.transaction_version == TV2:
            # (at level 0 a TV1 fence may take 32766 to Short.MaxValue and a TV2 EndTxn retry
            # then answers it, as Kafka does when the level is lowered under a TV2 client)
            for pid, epoch in known.values():
                assert 0 <= epoch < MAX_EPOCH, (pid, epoch)


def near_the_top(c: Coordinator, known: dict[str, Any]) -> None:
    """Both ids resting a few epochs below Short.MaxValue - 1, as durable records."""
    for i, t in enumerate(TIDS):
        pid, epoch = c.new_producer_id(), MAX_EPOCH - 4 + i
        record = TxnTransit(
            t, pid, pid, -1, epoch, -1, 30_000, TxnState.COMPLETE_COMMIT, frozenset(), 1, 1, TV2
        )
        c.log.append(log_format.encode(record))
        known[t] = (pid, epoch)
    c.cache = c.replayed()


@settings(max_examples=150, deadline=None)
@given(program=programs, level=st.sampled_from([0, TV2]), top=st.booleans())
def test_tv2_replay_equals_live(program: list[tuple[Any, ...]], level: int, top: bool) -> None:
    c = Coordinator(transaction_version=level)
    known: dict[str, Any] = {}
    if top:
        near_the_top(c, known)
    run_tv2_ops(c, program, known)
    assert_replay_equals_live(c)


@settings(max_examples=60, deadline=None)
@given(program=programs, more=programs, level=st.sampled_from([0, TV2]), top=st.booleans())
def test_tv2_work_continues_after_a_restart(
    program: list[tuple[Any, ...]], more: list[tuple[Any, ...]], level: int, top: bool
) -> None:
    c = Coordinator(transaction_version=level)
    known: dict[str, Any] = {}
    if top:
        near_the_top(c, known)
    run_tv2_ops(c, program, known)
    c.cache, c.completions = c.replayed(), {}
    for completion in lifecycle.transactions_to_complete(c.cache, c.now_ms):
        c.completions[completion.markers.transactional_id] = completion
    run_tv2_ops(c, more, known)
    assert_replay_equals_live(c)
