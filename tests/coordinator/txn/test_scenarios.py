"""Whole transactions through decisions -> encoded log -> apply, and the background scans."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.txn import lifecycle
from coordinator.txn.lifecycle import MarkerAction, Markers
from coordinator.txn.state import TxnState
from tests.coordinator.txn.helpers import Coordinator

E = ErrorCode
S = TxnState


def initialized(c: Coordinator, tid: str = "tx") -> tuple[int, int]:
    assert c.run(c.init(tid)) is E.none
    return c.ids(tid)


def test_commit_with_offsets() -> None:
    c = Coordinator()
    pid, epoch = initialized(c)
    assert (pid, epoch) == (1000, 0)
    assert c.run(c.add("tx", pid, epoch, ("out", 0), ("out", 1))) is E.none
    assert c.run(c.add("tx", pid, epoch, ("out", 1))) is E.none  # no write needed
    assert c.run(c.add_offsets("tx", pid, epoch, 7)) is E.none
    meta = c.cache["tx"]
    assert meta.state is S.ONGOING and meta.txn_start_timestamp == c.now_ms
    c.now_ms += 10
    assert c.run(c.end("tx", pid, epoch, commit=True)) is E.none
    assert c.completions["tx"].markers == Markers(
        "tx", pid, epoch, True, frozenset({("out", 0), ("out", 1), ("__consumer_offsets", 7)})
    )
    # markers in flight: the next transaction must wait
    assert c.add("tx", pid, epoch, ("out", 0)) is E.concurrent_transactions
    assert c.end("tx", pid, epoch, True) is E.concurrent_transactions
    assert c.init("tx") is E.concurrent_transactions
    assert c.finish_markers("tx")
    assert meta.state is S.COMPLETE_COMMIT and meta.partitions == frozenset()
    assert c.run(c.end("tx", pid, epoch, commit=True)) is E.none  # retried EndTxn
    assert c.end("tx", pid, epoch, commit=False) is E.invalid_txn_state
    assert c.replayed()["tx"].state is S.COMPLETE_COMMIT
    assert len(c.log) == 5  # init, add, add offsets, prepare, complete: the 2nd add wrote nothing


def test_abort_then_next_transaction() -> None:
    c = Coordinator()
    pid, epoch = initialized(c)
    c.run(c.add("tx", pid, epoch, ("out", 0)))
    assert c.run(c.end("tx", pid, epoch, commit=False)) is E.none
    assert c.completions["tx"].markers.commit is False
    c.finish_markers("tx")
    assert c.cache["tx"].state is S.COMPLETE_ABORT
    c.now_ms += 1
    assert c.run(c.add("tx", pid, epoch, ("out", 3))) is E.none
    assert c.cache["tx"].partitions == {("out", 3)}
    assert c.cache["tx"].txn_start_timestamp == c.now_ms


def test_late_commit_of_the_previous_transaction_commits_the_ongoing_one() -> None:
    """Transaction version 1 keeps the epoch across transactions, so an EndTxn(COMMIT) of the
    previous transaction held in the network past the client's retry lands as a commit of
    the ongoing one, as Kafka's TransactionCoordinator does (TV1: Ongoing + COMMIT with the
    current epoch -> PrepareCommit). The client's abort then must fail, never answer NONE:
    it was not aborted (seen in the proxied workload, compat_tests/test_proxy_load.py)."""
    c = Coordinator()
    pid, epoch = initialized(c)
    c.run(c.add("tx", pid, epoch, ("out", 0)))
    assert c.run(c.end("tx", pid, epoch, commit=True)) is E.none  # the retry, answered
    c.finish_markers("tx")
    c.run(c.add("tx", pid, epoch, ("out", 1)))  # the next transaction
    assert c.run(c.end("tx", pid, epoch, commit=True)) is E.none  # the late first attempt
    assert c.completions["tx"].markers.commit is True
    # the client's abort: retried while the markers are written (Kafka: Complete pending)...
    assert c.end("tx", pid, epoch, commit=False) is E.concurrent_transactions
    c.finish_markers("tx")
    assert c.end("tx", pid, epoch, commit=False) is E.invalid_txn_state  # ...then refused
    assert c.cache["tx"].state is S.COMPLETE_COMMIT


def test_zombie_is_fenced_by_a_new_instance() -> None:
    c = Coordinator()
    old_pid, old_epoch = initialized(c)
    c.run(c.add("tx", old_pid, old_epoch, ("out", 0)))
    # a new instance with the same transactional id
    assert c.run(c.init("tx")) is E.concurrent_transactions  # fence written: abort at epoch+1
    markers = c.completions["tx"].markers
    assert (markers.producer_epoch, markers.commit) == (old_epoch + 1, False)
    assert c.init("tx") is E.concurrent_transactions  # markers still in flight
    # the zombie cannot do anything any more (an add while the abort completes is told to
    # retry, as Kafka 4.x checks the pending state first, then fenced)
    assert c.end("tx", old_pid, old_epoch, True) is E.producer_fenced
    assert c.add("tx", old_pid, old_epoch, ("out", 1)) is E.concurrent_transactions
    c.finish_markers("tx")
    assert c.add("tx", old_pid, old_epoch, ("out", 1)) is E.producer_fenced
    assert c.run(c.init("tx")) is E.none
    assert c.ids() == (old_pid, old_epoch + 2)  # the new instance: old epoch + 2
    assert c.end("tx", old_pid, old_epoch, False) is E.producer_fenced
    assert c.init("tx", pid=old_pid, epoch=old_epoch) is E.producer_fenced  # KIP-360 zombie


def test_kip360_bump_after_an_abortable_error() -> None:
    c = Coordinator()
    pid, epoch = initialized(c)
    c.run(c.add("tx", pid, epoch, ("out", 0)))
    c.run(c.end("tx", pid, epoch, commit=False))
    c.finish_markers("tx")
    assert c.run(c.init("tx", pid=pid, epoch=epoch)) is E.none
    assert c.ids() == (pid, epoch + 1)
    assert c.run(c.init("tx", pid=pid, epoch=epoch)) is E.none  # the answer was lost: retry
    assert c.ids() == (pid, epoch + 1)


def test_timeout_aborts_with_an_epoch_bump() -> None:
    c = Coordinator()
    pid, epoch = initialized(c, "slow")
    initialized(c, "fast")
    c.run(c.add("slow", pid, epoch, ("out", 0)))
    c.now_ms += 60_000
    assert lifecycle.expired_transactions(c.cache, c.now_ms) == []  # start + timeout == now
    c.run(c.add("fast", *c.ids("fast"), ("out", 1)))
    c.now_ms += 1
    assert [m.transactional_id for m in lifecycle.expired_transactions(c.cache, c.now_ms)] == [
        "slow"
    ]
    write = lifecycle.abort_timed_out(c.cache["slow"], c.now_ms)
    assert write is not None and write.transit.producer_epoch == epoch + 1
    c.run(write)
    assert lifecycle.expired_transactions(c.cache, c.now_ms) == []
    assert lifecycle.abort_timed_out(c.cache["slow"], c.now_ms) is None  # pending completion
    c.finish_markers("slow")
    assert c.cache["slow"].state is S.COMPLETE_ABORT
    assert (
        c.end("slow", pid, epoch, True) is E.producer_fenced
    )  # testFencingOnTransactionExpiration


def test_failed_fence_append_keeps_the_producer_fenced() -> None:
    c = Coordinator()
    pid, epoch = initialized(c)
    c.run(c.add("tx", pid, epoch, ("out", 0)))
    assert c.run(c.init("tx"), fail=True) is E.coordinator_not_available
    meta = c.cache["tx"]
    assert (meta.state, meta.producer_epoch, meta.has_failed_epoch_fence) == (
        S.ONGOING,
        epoch + 1,
        True,
    )
    assert c.end("tx", pid, epoch, True) is E.producer_fenced
    assert c.run(c.init("tx")) is E.concurrent_transactions
    assert c.completions["tx"].markers.producer_epoch == epoch + 1  # bumped once only


def test_epoch_exhaustion_rotates_the_producer_id() -> None:
    c = Coordinator()
    pid, _ = initialized(c)
    c.cache["tx"].producer_epoch = 32765
    assert c.run(c.init("tx")) is E.none
    assert c.ids() == (pid, 32766)
    assert c.run(c.init("tx")) is E.none
    new_pid, new_epoch = c.ids()
    assert new_pid != pid and new_epoch == 0
    assert c.cache["tx"].prev_producer_id == pid
    assert c.replayed()["tx"].durable_view() == c.cache["tx"].durable_view()


def test_transactional_id_expiration() -> None:
    c = Coordinator()
    pid, epoch = initialized(c, "idle")
    initialized(c, "busy")
    c.run(c.add("busy", *c.ids("busy"), ("out", 0)))
    week = 604_800_000
    c.now_ms += week
    expired = lifecycle.expired_transactional_ids(c.cache, c.now_ms, week)
    assert [m.transactional_id for m in expired] == ["idle"]  # Ongoing never expires
    c.run(lifecycle.expire_transactional_id(expired[0]))
    assert "idle" not in c.cache and c.log[-1][1] is None
    assert "idle" not in c.replayed()
    assert c.add("idle", pid, epoch, ("out", 0)) is E.invalid_producer_id_mapping
    assert c.run(c.init("idle", pid=pid, epoch=epoch)) is E.none  # starts over
    assert c.ids("idle")[0] != pid


def test_restart_redrives_prepared_transactions() -> None:
    c = Coordinator()
    pid, epoch = initialized(c, "a")
    initialized(c, "b")
    c.run(c.add("a", pid, epoch, ("out", 0)))
    c.run(c.end("a", pid, epoch, commit=True))  # crash before the markers are done
    c.run(c.add("b", *c.ids("b"), ("out", 1)))
    restarted = c.replayed()
    todo = lifecycle.transactions_to_complete(restarted, c.now_ms + 5)
    assert [x.markers for x in todo] == [Markers("a", pid, epoch, True, frozenset({("out", 0)}))]
    assert todo[0].transit.state is S.COMPLETE_COMMIT
    assert restarted["a"].pending_state is S.COMPLETE_COMMIT
    restarted.apply(todo[0].transit)
    assert restarted["a"].state is S.COMPLETE_COMMIT
    assert lifecycle.transactions_to_complete(restarted, c.now_ms) == []


def test_restart_loses_only_the_last_epoch() -> None:
    c = Coordinator()
    pid, epoch = initialized(c)
    c.run(c.init("tx", pid=pid, epoch=epoch))
    live, replayed = c.cache["tx"], c.replayed()["tx"]
    assert live.durable_view() == replayed.durable_view()
    assert (live.last_producer_epoch, replayed.last_producer_epoch) == (epoch, -1)
    # so a KIP-360 retry that spans a restart is fenced, as in Kafka
    c.cache = c.replayed()
    assert c.init("tx", pid=pid, epoch=epoch) is E.producer_fenced


def test_failed_first_append_leaves_the_new_id_in_memory_only() -> None:
    c = Coordinator()
    assert c.run(c.init("tx"), fail=True) is E.coordinator_not_available
    assert c.cache["tx"].producer_epoch == -1 and "tx" not in c.replayed()
    assert c.run(c.init("tx")) is E.none
    assert c.ids() == (1000, 0)  # the producer id allocated first is kept


def test_marker_actions() -> None:
    assert lifecycle.marker_action(E.none) is MarkerAction.DONE
    assert lifecycle.marker_action(E.not_leader_or_follower) is MarkerAction.RETRY
    assert lifecycle.marker_action(E.invalid_producer_epoch) is MarkerAction.STOP
    assert lifecycle.marker_action(E.unsupported_for_message_format) is MarkerAction.DROP
    assert lifecycle.marker_action(E.corrupt_message) is MarkerAction.BUG
    assert lifecycle.marker_action(E.group_id_not_found) is MarkerAction.BUG
