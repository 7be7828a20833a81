"""Replay equals live: any sequence of requests, scans, marker completions and failed appends
leaves a cache equal to the one rebuilt from the encoded log (modulo what is memory-only)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from coordinator.txn import lifecycle
from coordinator.txn.decisions import Write
from coordinator.txn.metadata import TxnMetadata
from tests.coordinator.txn.helpers import Coordinator

E = ErrorCode
TIDS = ["a", "b"]
EXPIRATION_MS = 50_000

tid = st.sampled_from(TIDS)
fail = st.sampled_from([False] * 5 + [True])  # one append in six fails
stale = st.sampled_from([False] * 5 + [True])
add = st.tuples(st.just("add"), tid, st.integers(0, 3), stale, fail)
end = st.tuples(st.just("end"), tid, st.booleans(), stale, fail)
markers = st.tuples(st.just("markers"), tid, fail)
ops = st.sampled_from(  # weighted towards whole transactions
    [
        st.tuples(st.just("init"), tid, st.sampled_from(["fresh", "kip360", "stale"]), fail),
        add,
        add,
        st.tuples(st.just("offsets"), tid, st.integers(0, 2), stale, fail),
        end,
        end,
        markers,
        markers,
        st.tuples(st.just("tick"), st.integers(1, 40_000)),
        st.tuples(st.just("timeouts"), fail),
        st.tuples(st.just("expire"), fail),
    ]
).flatmap(lambda strategy: strategy)
programs = st.lists(ops, min_size=20, max_size=80)


def run_ops(c: Coordinator, program: list[tuple[Any, ...]]) -> None:
    known: dict[str, tuple[int, int]] = {}  # what each client was told by InitProducerId

    def ids(t: str, is_stale: bool) -> tuple[int, int]:
        pid, epoch = known.get(t, (999, 0))
        return (pid, epoch - 1) if is_stale else (pid, epoch)

    for op in program:
        match op:
            case ("init", t, mode, f):
                pid, epoch = (
                    (-1, -1) if mode == "fresh" or t not in known else ids(t, mode == "stale")
                )
                outcome = c.init(t, timeout_ms=30_000, pid=pid, epoch=epoch)
                if c.run(outcome, fail=f) is E.none and isinstance(outcome, Write):
                    known[t] = (outcome.transit.producer_id, outcome.transit.producer_epoch)
            case ("add", t, p, s, f):
                c.run(c.add(t, *ids(t, s), ("out", p)), fail=f)
            case ("offsets", t, p, s, f):
                c.run(c.add_offsets(t, *ids(t, s), p), fail=f)
            case ("end", t, commit, s, f):
                c.run(c.end(t, *ids(t, s), commit), fail=f)
            case ("markers", t, f):
                c.finish_markers(t, fail=f)
            case ("tick", ms):
                c.now_ms += ms
            case ("timeouts", f):
                for meta in lifecycle.expired_transactions(c.cache, c.now_ms):
                    write = lifecycle.abort_timed_out(meta, c.now_ms)
                    assert write is not None
                    c.run(write, fail=f)
            case ("expire", f):
                for meta in lifecycle.expired_transactional_ids(c.cache, c.now_ms, EXPIRATION_MS):
                    c.run(lifecycle.expire_transactional_id(meta), fail=f)


def assert_replay_equals_live(c: Coordinator) -> None:
    live, replayed = c.cache, c.replayed()
    for t in set(live) | set(replayed):
        if t not in replayed:  # created, and its first append failed: memory only, epoch -1
            assert live[t].producer_epoch == -1
            continue
        assert t in live, f"{t} was expired in memory but not in the log"
        expected = _durable(live[t], c.value_version)
        if live[t].has_failed_epoch_fence:  # memory keeps the fence's bump, the log does not
            expected = {**expected, "producer_epoch": live[t].producer_epoch - 1}
        assert _durable(replayed[t], c.value_version) == expected
        assert replayed[t].pending_state is None and replayed[t].last_producer_epoch == -1


def _durable(meta: TxnMetadata, value_version: int) -> dict[str, object]:
    fields = dataclasses.asdict(meta)
    for memory_only in ("last_producer_epoch", "pending_state", "has_failed_epoch_fence"):
        del fields[memory_only]
    if value_version == 0:  # v0 has no tagged fields
        for tagged in ("prev_producer_id", "next_producer_id", "client_transaction_version"):
            del fields[tagged]
    return fields


@pytest.mark.parametrize("value_version", [1, 0])
@settings(max_examples=300, deadline=None)
@given(program=programs)
def test_replay_equals_live(value_version: int, program: list[tuple[Any, ...]]) -> None:
    c = Coordinator(value_version=value_version)
    run_ops(c, program)
    assert_replay_equals_live(c)


@settings(max_examples=100, deadline=None)
@given(program=programs, more=programs)
def test_work_continues_on_a_replayed_cache(
    program: list[tuple[Any, ...]], more: list[tuple[Any, ...]]
) -> None:
    """A restart in the middle: replay, re-drive Prepare*, go on; still replay == live."""
    c = Coordinator()
    run_ops(c, program)
    c.cache, c.completions = c.replayed(), {}
    for completion in lifecycle.transactions_to_complete(c.cache, c.now_ms):
        c.completions[completion.markers.transactional_id] = completion
    run_ops(c, more)
    assert_replay_equals_live(c)
