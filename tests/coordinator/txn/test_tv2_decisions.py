"""Transaction version 2 (KIP-890 part 2) decisions, against Kafka 4.1's TransactionCoordinator:
the EndTxn v5 table (every state x commit/abort x current/retry/other epoch), the epoch bump at
prepare and the markers at the bumped epoch, epoch overflow to the next producer id, the fence
that bumps once (KAFKA-19367), the empty abort, and replay of the TV2 records."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from coordinator.txn import decisions, lifecycle, log_format
from coordinator.txn.decisions import Write
from coordinator.txn.metadata import TxnCache, TxnMetadata
from coordinator.txn.state import MAX_EPOCH, TV2, TxnState, is_legal
from tests.coordinator.txn.helpers import Coordinator, meta_in

E = ErrorCode
S = TxnState
NOW = 50_000
PID = 1000
NEW_ID = 4242


def end(meta: TxnMetadata | None, epoch: int, commit: bool, *, pid: int = PID) -> ErrorCode | Write:
    return decisions.end_txn(meta, "tx", pid, epoch, commit, NOW, TV2, lambda: NEW_ID)


def written(outcome: ErrorCode | Write) -> Write:
    assert isinstance(outcome, Write), outcome
    return outcome


# -- the EndTxn v5 table ---------------------------------------------------------------------

# (state, epoch the metadata holds, epoch sent, commit) -> a code, or the Prepare state written.
# The metadata of a Prepare*/Complete* transaction holds the bumped epoch 6; the client's
# transaction ran at 5. Kafka's table (TransactionCoordinator, TV2): Retry = epoch - 1.
V2_TABLE: list[tuple[TxnState, int, int, bool, ErrorCode | TxnState]] = [
    (S.ONGOING, 5, 5, True, S.PREPARE_COMMIT),
    (S.ONGOING, 5, 5, False, S.PREPARE_ABORT),
    (S.ONGOING, 5, 4, True, E.producer_fenced),  # "retry" of nothing: fenced
    (S.ONGOING, 5, 6, False, E.producer_fenced),
    (S.PREPARE_COMMIT, 6, 5, True, E.concurrent_transactions),  # retry while markers are written
    (S.PREPARE_COMMIT, 6, 5, False, E.invalid_txn_state),
    (S.PREPARE_COMMIT, 6, 6, True, E.producer_fenced),
    (S.PREPARE_ABORT, 6, 5, False, E.concurrent_transactions),
    (S.PREPARE_ABORT, 6, 5, True, E.invalid_txn_state),
    (S.PREPARE_ABORT, 6, 6, False, E.producer_fenced),
    (S.COMPLETE_COMMIT, 6, 5, True, E.none),  # retry of the finished commit
    (S.COMPLETE_COMMIT, 6, 5, False, E.invalid_txn_state),
    (S.COMPLETE_COMMIT, 6, 6, True, E.invalid_txn_state),  # a commit of nothing
    (S.COMPLETE_COMMIT, 6, 6, False, S.PREPARE_ABORT),  # empty abort: still bumps
    (S.COMPLETE_COMMIT, 6, 7, True, E.producer_fenced),
    (S.COMPLETE_ABORT, 6, 5, False, E.none),
    (S.COMPLETE_ABORT, 6, 5, True, E.invalid_txn_state),
    (S.COMPLETE_ABORT, 6, 6, False, S.PREPARE_ABORT),
    (S.COMPLETE_ABORT, 6, 6, True, E.invalid_txn_state),
    (S.COMPLETE_ABORT, 6, 3, False, E.producer_fenced),
    (S.EMPTY, 5, 5, False, S.PREPARE_ABORT),
    (S.EMPTY, 5, 5, True, E.invalid_txn_state),
    (S.EMPTY, 5, 4, False, E.producer_fenced),
]


@pytest.mark.parametrize("state, held, sent, commit, expected", V2_TABLE)
def test_end_txn_v2_table(
    state: TxnState, held: int, sent: int, commit: bool, expected: ErrorCode | TxnState
) -> None:
    meta = meta_in(state, epoch=held, tv=TV2, now_ms=NOW - 500)
    before = meta.durable_view()
    outcome = end(meta, sent, commit)
    if isinstance(expected, ErrorCode):
        assert outcome is expected
        assert meta.durable_view() == before and not meta.pending  # nothing written
        ids = decisions.end_txn_reply_ids(meta, outcome)
        assert ids == ((PID, held) if expected is E.none else (-1, -1))
        return
    t = written(outcome).transit
    assert (t.state, t.producer_id, t.producer_epoch, t.last_producer_epoch) == (
        expected,
        PID,
        held + 1,
        held,
    )
    assert t.client_transaction_version == TV2 and t.next_producer_id == -1
    assert t.partitions == meta.partitions
    # an empty abort starts its (empty) transaction now; an Ongoing one keeps its start
    assert t.txn_start_timestamp == (NOW if state is not S.ONGOING else meta.txn_start_timestamp)
    assert decisions.end_txn_reply_ids(meta, outcome) == (PID, held + 1)


@pytest.mark.parametrize("state", [S.ONGOING, S.COMPLETE_COMMIT, S.PREPARE_ABORT, S.EMPTY])
def test_end_txn_v2_identity_and_pending_checks(state: TxnState) -> None:
    assert end(None, 5, True) is E.invalid_producer_id_mapping
    meta = meta_in(state, epoch=5, tv=TV2)
    assert end(meta, 5, False, pid=PID + 1) is E.invalid_producer_id_mapping
    meta.pending_state = S.COMPLETE_COMMIT
    # pending is checked before the epoch (KAFKA-18464): any epoch gets the retriable code
    for epoch in (3, 4, 5, 6):
        assert end(meta, epoch, False) is E.concurrent_transactions
    assert decisions.end_txn(meta, "", PID, 5, True, NOW, TV2) is E.invalid_request


def test_end_txn_v1_on_a_tv2_transaction_keeps_the_strict_epoch() -> None:
    """EndTxn v4 (client version 0) never bumps, whatever the transaction was."""
    meta = meta_in(S.ONGOING, epoch=5, tv=TV2)
    t = written(decisions.end_txn(meta, "tx", PID, 5, True, NOW)).transit
    assert (t.producer_epoch, t.client_transaction_version) == (5, 0)
    meta.abandon(t)
    done = meta_in(S.COMPLETE_COMMIT, epoch=6, tv=TV2)
    assert decisions.end_txn(done, "tx", PID, 5, True, NOW) is E.producer_fenced
    assert decisions.end_txn(done, "tx", PID, 6, True, NOW) is E.none


def test_tv2_edges_exist_only_for_tv2() -> None:
    for src in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        assert not is_legal(src, S.PREPARE_ABORT)
        assert is_legal(src, S.PREPARE_ABORT, TV2)
        assert not is_legal(src, S.PREPARE_COMMIT, TV2)


# -- whole flows on the synchronous stand-in ------------------------------------------------


def test_every_commit_and_abort_bumps_and_markers_carry_the_bump() -> None:
    c = Coordinator()
    c.run(c.init())
    pid, epoch = c.ids()
    assert epoch == 0
    for round_, commit in enumerate([True, False, True, True]):
        assert c.run(c.add("tx", pid, epoch, ("t", 0), ("t", 1), tv=TV2)) is E.none
        assert c.cache["tx"].client_transaction_version == TV2
        outcome = c.end("tx", pid, epoch, commit, tv=TV2)
        assert decisions.end_txn_reply_ids(c.cache["tx"], outcome) == (pid, epoch + 1)
        assert c.run(outcome) is E.none
        markers = c.completions["tx"].markers
        assert (markers.producer_id, markers.producer_epoch, markers.commit) == (
            pid,
            epoch + 1,
            commit,
        )
        assert c.finish_markers("tx")
        meta = c.cache["tx"]
        assert meta.state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
        assert (meta.producer_epoch, meta.last_producer_epoch) == (epoch + 1, epoch)
        # the old epoch can no longer add to the next transaction
        assert c.add("tx", pid, epoch, ("t", 0), tv=TV2) is E.producer_fenced
        epoch += 1
        assert round_ + 1 == epoch
    assert c.replayed()["tx"].durable_view() == c.cache["tx"].durable_view()


def test_empty_abort_writes_no_markers_and_bumps() -> None:
    c = Coordinator()
    c.run(c.init())
    pid, epoch = c.ids()
    assert c.run(c.end("tx", pid, epoch, False, tv=TV2)) is E.none
    completion = c.completions["tx"]
    assert completion.markers.partitions == frozenset()
    assert c.finish_markers("tx")
    assert c.ids() == (pid, epoch + 1) and c.cache["tx"].state is S.COMPLETE_ABORT
    # committing a TV2 transaction that wrote nothing is refused and writes nothing
    log_size = len(c.log)
    assert c.end("tx", pid, epoch + 1, True, tv=TV2) is E.invalid_txn_state
    assert len(c.log) == log_size


def test_epoch_overflow_moves_to_the_next_producer_id() -> None:
    c = Coordinator()
    assert c.new_producer_id() == PID  # the allocator has handed out PID already
    top = MAX_EPOCH - 1  # 32766, the last epoch a client gets
    meta = meta_in(S.ONGOING, epoch=top, tv=TV2)
    c.cache.put_if_absent(meta)
    outcome = c.end("tx", PID, top, True, tv=TV2)
    t = written(outcome).transit
    assert (t.producer_id, t.producer_epoch, t.next_producer_id) == (PID, MAX_EPOCH, PID + 1)
    new_id = t.next_producer_id
    # the client continues as (next id, 0) (KAFKA-18660)
    assert decisions.end_txn_reply_ids(meta, outcome) == (new_id, 0)
    c.run(outcome)
    markers = c.completions["tx"].markers
    assert (markers.producer_id, markers.producer_epoch) == (PID, MAX_EPOCH)
    c.finish_markers("tx")
    meta = c.cache["tx"]
    assert (meta.producer_id, meta.producer_epoch, meta.prev_producer_id) == (new_id, 0, PID)
    assert (meta.next_producer_id, meta.last_producer_epoch) == (-1, top)
    # a retry with the old id and epoch is recognised and answered with the new ones
    retry = c.end("tx", PID, top, True, tv=TV2)
    assert retry is E.none and decisions.end_txn_reply_ids(meta, retry) == (new_id, 0)
    assert c.end("tx", PID, top, False, tv=TV2) is E.invalid_txn_state
    assert c.end("tx", PID, top - 1, True, tv=TV2) is E.invalid_producer_id_mapping
    # the new id works, and replay rebuilds the rotated state from the TV2 fields
    assert c.run(c.add("tx", new_id, 0, ("t", 0), tv=TV2)) is E.none
    assert c.replayed()["tx"].durable_view() == c.cache["tx"].durable_view()


@pytest.mark.parametrize("level", [0, TV2])
def test_init_producer_id_fences_an_ongoing_tv2_transaction_with_one_bump(level: int) -> None:
    c = Coordinator(transaction_version=level)
    c.run(c.init())
    pid, epoch = c.ids()
    c.run(c.add("tx", pid, epoch, ("t", 0), tv=TV2))
    w = written(c.init())
    assert w.reply is E.concurrent_transactions
    assert (w.transit.state, w.transit.producer_epoch) == (S.PREPARE_ABORT, epoch + 1)
    assert w.transit.client_transaction_version == (TV2 if level == TV2 else 0)
    c.run(w)
    assert c.completions["tx"].markers.producer_epoch == epoch + 1
    c.finish_markers("tx")
    c.run(c.init())
    assert c.ids() == (pid, epoch + 2)  # the retry bumps once more, not twice


def test_tv2_fence_at_the_top_of_the_epoch_range_rotates() -> None:
    """KAFKA-19367: with two bumps the epoch would pass Short.MaxValue; KAFKA-20090: the
    producer then moves to a new id."""
    c = Coordinator(transaction_version=TV2)
    assert c.new_producer_id() == PID
    top = MAX_EPOCH - 1
    c.cache.put_if_absent(meta_in(S.ONGOING, epoch=top, tv=TV2))
    w = written(c.init())
    assert (w.transit.producer_epoch, w.transit.next_producer_id) == (MAX_EPOCH, PID + 1)
    c.run(w)
    assert c.completions["tx"].markers.producer_epoch == MAX_EPOCH
    c.finish_markers("tx")
    assert c.ids() == (PID + 1, 0)
    # the fenced producer's late abort is a retry: answered with the new id, never with
    # (old id, Short.MaxValue)
    late = c.end("tx", PID, top, False, tv=TV2)
    assert late is E.none and decisions.end_txn_reply_ids(c.cache["tx"], late) == (PID + 1, 0)
    c.run(c.init())
    assert c.ids() == (PID + 1, 1)
    assert c.end("tx", PID, top, False, tv=TV2) is E.invalid_producer_id_mapping


def test_timeout_abort_of_a_tv2_transaction() -> None:
    c = Coordinator(transaction_version=TV2)
    c.run(c.init())
    pid, epoch = c.ids()
    c.run(c.add("tx", pid, epoch, ("t", 0), tv=TV2))
    meta = c.cache["tx"]
    w = lifecycle.abort_timed_out(meta, c.now_ms + 10**9, TV2)
    assert w is not None and w.transit.producer_epoch == epoch + 1
    c.run(w)
    c.finish_markers("tx")
    # the producer's own abort arrives late with its old epoch: a retry of the abort
    late = c.end("tx", pid, epoch, False, tv=TV2)
    assert late is E.none and decisions.end_txn_reply_ids(meta, late) == (pid, epoch + 1)
    assert c.end("tx", pid, epoch, True, tv=TV2) is E.invalid_txn_state


def test_failed_tv2_fence_append_leaves_memory_alone() -> None:
    c = Coordinator(transaction_version=TV2)
    c.run(c.init())
    pid, epoch = c.ids()
    c.run(c.add("tx", pid, epoch, ("t", 0), tv=TV2))
    assert c.run(c.init(), fail=True) is not E.none
    meta = c.cache["tx"]
    assert (meta.state, meta.producer_epoch, meta.has_failed_epoch_fence) == (
        S.ONGOING,
        epoch,
        False,
    )
    w = written(c.init())
    assert w.transit.producer_epoch == epoch + 1  # the retry bumps once


# -- the log ---------------------------------------------------------------------------------


def test_tv2_records_round_trip_with_kafkas_tagged_fields() -> None:
    meta = meta_in(S.ONGOING, epoch=MAX_EPOCH - 1, tv=TV2)
    t = written(end(meta, MAX_EPOCH - 1, True)).transit
    key, value = log_format.encode(t)
    assert value is not None and value[:2] == b"\x00\x01"  # value version 1 (flexible)
    back = log_format.decode(key, value)
    fields: dict[str, Any] = {
        "producer_id": PID,
        "prev_producer_id": PID,
        "next_producer_id": NEW_ID,
        "producer_epoch": MAX_EPOCH,
        "client_transaction_version": TV2,
        "state": S.PREPARE_COMMIT,
    }
    assert {name: getattr(back, name) for name in fields} == fields
    cache = TxnCache()
    cache.replay([back])
    completion = lifecycle.transactions_to_complete(cache, NOW)[0]
    assert completion.markers.producer_epoch == MAX_EPOCH
    assert (completion.transit.producer_id, completion.transit.producer_epoch) == (NEW_ID, 0)


def test_new_id_after_an_overflow_waits_for_the_completion_instead_of_failing() -> None:
    """KAFKA-18660: the client continues as (next id, 0) as soon as the Prepare record is
    durable; its first add must be told to retry while the old id's markers are written, not
    get the fatal INVALID_PRODUCER_ID_MAPPING."""
    c = Coordinator()
    assert c.new_producer_id() == PID
    c.cache.put_if_absent(meta_in(S.ONGOING, epoch=MAX_EPOCH - 1, tv=TV2))
    outcome = c.end("tx", PID, MAX_EPOCH - 1, False, tv=TV2)
    new_id, epoch = decisions.end_txn_reply_ids(c.cache["tx"], outcome)
    c.run(outcome)  # PrepareAbort durable, CompleteAbort pending
    assert c.add("tx", new_id, epoch, ("t", 0), tv=TV2) is E.concurrent_transactions
    # so must its EndTxn (an empty abort): Kafka's TV2 EndTxn checks the pending transition
    # before the producer id, for this very case
    for commit in (True, False):
        assert c.end("tx", new_id, epoch, commit, tv=TV2) is E.concurrent_transactions
    c.finish_markers("tx")
    assert c.run(c.add("tx", new_id, epoch, ("t", 0), tv=TV2)) is E.none


def test_tv2_end_at_short_max_value_rotates_without_a_bump() -> None:
    """Reachable when a TV1 fence (level 0) took 32766 to 32767 and the client went on with
    TV2: Kafka would overflow the short; here the epoch stays and the next id takes over."""
    c = Coordinator()
    assert c.new_producer_id() == PID
    c.cache.put_if_absent(meta_in(S.ONGOING, epoch=MAX_EPOCH, tv=TV2))
    outcome = c.end("tx", PID, MAX_EPOCH, True, tv=TV2)
    t = written(outcome).transit
    assert (t.producer_epoch, t.next_producer_id) == (MAX_EPOCH, PID + 1)
    assert decisions.end_txn_reply_ids(c.cache["tx"], outcome) == (PID + 1, 0)
    c.run(outcome)
    c.finish_markers("tx")
    assert c.ids() == (PID + 1, 0)
