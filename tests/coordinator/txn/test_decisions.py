"""Decision tables: every (state, request) pair of InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn (spec eos.md §4.4-4.7), with the codes each request version gets."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coordinator.txn import decisions
from coordinator.txn.decisions import Write
from coordinator.txn.metadata import TxnMetadata
from coordinator.txn.state import TxnState
from tests.coordinator.txn.helpers import MAX_TIMEOUT, meta_in
from wire.errors import translate_error

E = ErrorCode
S = TxnState
LIVE = [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT, S.COMPLETE_ABORT]
RESTING = [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT]
NOW = 50_000
PID, EPOCH = 1000, 5


def init(
    meta: TxnMetadata | None,
    *,
    pid: int = -1,
    epoch: int = -1,
    timeout: int = 30_000,
    tid: str = "tx",
    new_id: int = 4242,
) -> ErrorCode | Write:
    return decisions.init_producer_id(
        meta,
        tid,
        timeout,
        producer_id=pid,
        producer_epoch=epoch,
        max_timeout_ms=MAX_TIMEOUT,
        new_producer_id=lambda: new_id,
        now_ms=NOW,
    )


def written(outcome: ErrorCode | Write) -> Write:
    assert isinstance(outcome, Write), outcome
    return outcome


# -- InitProducerId --------------------------------------------------------------------------


def test_init_unknown_id_creates_metadata() -> None:
    w = written(init(None))
    assert w.created is not None and w.created.producer_epoch == -1
    t = w.transit
    assert (t.state, t.producer_id, t.producer_epoch, t.txn_timeout_ms) == (
        S.EMPTY,
        4242,
        0,
        30_000,
    )
    assert w.reply is E.none and w.created.pending_state is S.EMPTY


@pytest.mark.parametrize(
    "pid, epoch, tid, timeout, code",
    [
        (-1, 3, "tx", 30_000, E.invalid_request),  # exactly one of them is -1
        (7, -1, "tx", 30_000, E.invalid_request),
        (-1, -1, "", 30_000, E.invalid_request),
        (-1, -1, "tx", 0, E.invalid_transaction_timeout),
        (-1, -1, "tx", -5, E.invalid_transaction_timeout),
        (-1, -1, "tx", MAX_TIMEOUT + 1, E.invalid_transaction_timeout),
    ],
)
def test_init_request_checks(pid: int, epoch: int, tid: str, timeout: int, code: ErrorCode) -> None:
    assert init(meta_in(S.EMPTY), pid=pid, epoch=epoch, tid=tid, timeout=timeout) is code
    assert init(None, pid=pid, epoch=epoch, tid=tid, timeout=timeout) is code


def test_init_accepts_the_max_timeout() -> None:
    assert (
        written(init(meta_in(S.EMPTY), timeout=MAX_TIMEOUT)).transit.txn_timeout_ms == MAX_TIMEOUT
    )


@pytest.mark.parametrize("state", LIVE)
def test_init_pending_is_concurrent(state: TxnState) -> None:
    meta = meta_in(state)
    meta.pending_state = state  # any move in flight
    assert init(meta) is E.concurrent_transactions
    assert init(meta, pid=PID, epoch=EPOCH) is E.concurrent_transactions
    assert init(meta, pid=999_999, epoch=EPOCH) is E.concurrent_transactions  # before fencing


# state -> outcome for a new instance (no KIP-360 fields), and for the same producer (v3+).
@pytest.mark.parametrize("state", LIVE)
@pytest.mark.parametrize("supplied", [False, True])
def test_init_by_state(state: TxnState, supplied: bool) -> None:
    meta = meta_in(state, producer_id=PID, epoch=EPOCH, last_epoch=3)
    outcome = init(meta, pid=PID, epoch=EPOCH) if supplied else init(meta)
    if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        assert outcome is E.concurrent_transactions
        return
    w = written(outcome)
    t = w.transit
    if state is S.ONGOING:  # fence: abort under epoch + 1, answer CONCURRENT_TRANSACTIONS
        assert (t.state, t.producer_epoch, t.epoch_fence) == (S.PREPARE_ABORT, EPOCH + 1, True)
        assert w.reply is E.concurrent_transactions and w.writes_markers
        return
    assert (t.state, t.producer_id, t.producer_epoch) == (S.EMPTY, PID, EPOCH + 1)
    assert t.last_producer_epoch == (EPOCH if supplied else -1)
    assert (t.partitions, t.txn_start_timestamp, t.txn_timeout_ms) == (frozenset(), -1, 30_000)
    assert w.reply is E.none and not w.writes_markers


@pytest.mark.parametrize("state", RESTING)
def test_init_retry_of_a_successful_bump_returns_the_current_epoch(state: TxnState) -> None:
    meta = meta_in(state, epoch=EPOCH, last_epoch=EPOCH - 1)
    t = written(init(meta, pid=PID, epoch=EPOCH - 1)).transit
    assert (t.producer_id, t.producer_epoch, t.last_producer_epoch) == (PID, EPOCH, EPOCH - 1)


@pytest.mark.parametrize("state", LIVE)
@pytest.mark.parametrize(
    "pid, epoch",
    [(PID, EPOCH - 2), (PID, EPOCH + 1), (PID + 1, EPOCH), (PID - 1, 32766)],
    ids=["older-epoch", "newer-epoch", "other-id", "other-id-exhausted"],
)
def test_init_fenced_by_state(state: TxnState, pid: int, epoch: int) -> None:
    meta = meta_in(state, epoch=EPOCH, last_epoch=-1)
    outcome = init(meta, pid=pid, epoch=epoch)
    if pid != PID:  # not this transactional id's producer at all: fenced in every state
        assert outcome is E.producer_fenced
    elif state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        assert outcome is E.concurrent_transactions
    elif state is S.ONGOING:
        assert written(outcome).transit.epoch_fence  # Kafka fences first, whatever the epoch
    else:
        assert outcome is E.producer_fenced


@pytest.mark.parametrize("version, code", [(0, 47), (2, 47), (3, 47), (4, 90), (5, 90)])
def test_init_fenced_code_per_version(version: int, code: int) -> None:
    assert translate_error(22, version, E.producer_fenced).value == code


@pytest.mark.parametrize("state", RESTING)
@pytest.mark.parametrize("supplied", [False, True])
def test_init_epoch_exhaustion_rotates_the_producer_id(state: TxnState, supplied: bool) -> None:
    meta = meta_in(state, epoch=32766)
    assert decisions.needs_new_producer_id(meta, 32766 if supplied else -1)
    outcome = init(meta, pid=PID, epoch=32766) if supplied else init(meta)
    t = written(outcome).transit
    assert (t.producer_id, t.producer_epoch, t.prev_producer_id) == (4242, 0, PID)
    assert t.last_producer_epoch == (32766 if supplied else -1)
    meta.complete(t)
    # the answer got lost; a KIP-360 client retries with the old id and its exhausted epoch
    retry = init(meta, pid=PID, epoch=32766, new_id=1)
    if supplied:
        assert (written(retry).transit.producer_id, written(retry).transit.producer_epoch) == (
            4242,
            0,
        )
    else:  # the rotation was for a new instance: the old one is fenced
        assert retry is E.producer_fenced


def test_init_after_a_fence_at_the_last_epoch_rotates() -> None:
    meta = meta_in(S.COMPLETE_ABORT, epoch=32767)  # fenced from 32766
    assert written(init(meta)).transit.producer_id == 4242
    assert init(meta_in(S.COMPLETE_ABORT, epoch=32767), pid=PID, epoch=32766) is E.producer_fenced


def test_init_exhausted_retry_is_answered() -> None:
    # Kafka throws IllegalStateException here; the retry of the bump to 32766 is answered.
    meta = meta_in(S.EMPTY, epoch=32766, last_epoch=32765)
    t = written(init(meta, pid=PID, epoch=32765)).transit
    assert (t.producer_id, t.producer_epoch) == (PID, 32766)


def test_init_supplied_ids_on_fresh_metadata() -> None:
    # The transactional id expired; the client still knows its old (id, epoch).
    w = written(init(None, pid=7, epoch=12))
    assert (w.transit.producer_id, w.transit.producer_epoch) == (4242, 0)


def test_needs_new_producer_id() -> None:
    assert decisions.needs_new_producer_id(None)
    assert not decisions.needs_new_producer_id(meta_in(S.EMPTY))
    assert not decisions.needs_new_producer_id(meta_in(S.ONGOING, epoch=32766))
    assert not decisions.needs_new_producer_id(meta_in(S.EMPTY, epoch=32766), 32765)


# -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------

NEW = ("t", 7)


def add(meta: TxnMetadata | None, *tps: tuple[str, int], pid: int = PID, epoch: int = EPOCH):  # type: ignore[no-untyped-def]
    return decisions.add_partitions_to_txn(meta, "tx", pid, epoch, tps or (NEW,), NOW)


@pytest.mark.parametrize("state", LIVE)
def test_add_partitions_by_state(state: TxnState) -> None:
    meta = meta_in(state)
    outcome = add(meta)
    if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        assert outcome is E.concurrent_transactions
        return
    t = written(outcome).transit
    assert t.state is S.ONGOING and t.producer_epoch == EPOCH
    assert t.partitions == meta.partitions | {NEW}
    assert t.txn_start_timestamp == (meta.txn_start_timestamp if state is S.ONGOING else NOW)


def test_add_partitions_already_present_needs_no_write() -> None:
    meta = meta_in(S.ONGOING)
    assert add(meta, ("t", 0)) is E.none
    assert meta.pending_state is None


@pytest.mark.parametrize("state", LIVE)
@pytest.mark.parametrize(
    "meta_kind, pid, epoch, code",
    [
        ("none", PID, EPOCH, E.invalid_producer_id_mapping),
        ("meta", PID + 1, EPOCH, E.invalid_producer_id_mapping),
        ("meta", PID, EPOCH - 1, E.producer_fenced),
        ("meta", PID, EPOCH + 1, E.producer_fenced),
        ("pending", PID, EPOCH, E.concurrent_transactions),
        # pending before the id and epoch (Kafka 4.0+, KAFKA-18660)
        ("pending", PID, EPOCH - 1, E.concurrent_transactions),
        ("pending", PID + 1, EPOCH, E.concurrent_transactions),
    ],
)
def test_add_partitions_checks(
    state: TxnState, meta_kind: str, pid: int, epoch: int, code: ErrorCode
) -> None:
    meta = None if meta_kind == "none" else meta_in(state)
    if meta is not None and meta_kind == "pending":
        meta.pending_state = state
    assert add(meta, pid=pid, epoch=epoch) is code
    assert decisions.add_offsets_to_txn(meta, "tx", pid, epoch, 3, NOW) is code


def test_add_partitions_empty_transactional_id() -> None:
    for tid in ("", None):
        assert decisions.add_partitions_to_txn(meta_in(S.EMPTY), tid, PID, EPOCH, [NEW], NOW) is (
            E.invalid_request
        )


def test_add_offsets_adds_the_groups_offsets_partition() -> None:
    t = written(decisions.add_offsets_to_txn(meta_in(S.EMPTY), "tx", PID, EPOCH, 13, NOW)).transit
    assert t.partitions == {("__consumer_offsets", 13)}


@pytest.mark.parametrize("key", [24, 25, 26])
@pytest.mark.parametrize("version, code", [(0, 47), (1, 47), (2, 90), (3, 90), (4, 90)])
def test_fenced_code_per_version(key: int, version: int, code: int) -> None:
    assert translate_error(key, version, E.producer_fenced).value == code


def test_partition_errors_all_or_nothing() -> None:
    tps = [("a", 0), ("b", 0), ("c", 0)]
    assert decisions.partition_errors(tps, {}) is None
    assert decisions.partition_errors(tps, {("a", 0): E.none}) is None
    assert decisions.partition_errors(tps, {("b", 0): E.unknown_topic_or_partition}) == {
        ("a", 0): E.operation_not_attempted,
        ("b", 0): E.unknown_topic_or_partition,
        ("c", 0): E.operation_not_attempted,
    }


@pytest.mark.parametrize("state", LIVE)
def test_verify_partitions(state: TxnState) -> None:
    meta = meta_in(state)
    meta.pending_state = state  # not consulted
    got = decisions.verify_partitions(meta, "tx", PID, EPOCH, [("t", 0), NEW])
    if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        assert got is E.concurrent_transactions
    elif state is S.ONGOING:
        assert got == {("t", 0): E.none, NEW: E.transaction_abortable}
    else:
        assert got == {("t", 0): E.transaction_abortable, NEW: E.transaction_abortable}
    assert decisions.verify_partitions(meta, "tx", PID, EPOCH + 1, [NEW]) is E.producer_fenced
    assert decisions.verify_partitions(None, "tx", PID, EPOCH, [NEW]) is (
        E.invalid_producer_id_mapping
    )
    assert decisions.verify_partitions(meta, "", PID, EPOCH, [NEW]) is E.invalid_request


# -- EndTxn ----------------------------------------------------------------------------------

# The spec's table (§4.7), written out: (state, commit) -> state prepared or code answered.
END_TXN_TABLE = {
    (S.ONGOING, True): S.PREPARE_COMMIT,
    (S.ONGOING, False): S.PREPARE_ABORT,
    (S.PREPARE_COMMIT, True): E.concurrent_transactions,
    (S.PREPARE_COMMIT, False): E.invalid_txn_state,
    (S.PREPARE_ABORT, True): E.invalid_txn_state,
    (S.PREPARE_ABORT, False): E.concurrent_transactions,
    (S.COMPLETE_COMMIT, True): E.none,
    (S.COMPLETE_COMMIT, False): E.invalid_txn_state,
    (S.COMPLETE_ABORT, True): E.invalid_txn_state,
    (S.COMPLETE_ABORT, False): E.none,
    (S.EMPTY, True): E.invalid_txn_state,
    (S.EMPTY, False): E.invalid_txn_state,
}


@pytest.mark.parametrize(("state", "commit"), list(END_TXN_TABLE))
def test_end_txn_table(state: TxnState, commit: bool) -> None:
    meta = meta_in(state)
    outcome = decisions.end_txn(meta, "tx", PID, EPOCH, commit, NOW)
    expected = END_TXN_TABLE[state, commit]
    if isinstance(expected, ErrorCode):
        assert outcome is expected and meta.pending_state is None
        return
    w = written(outcome)
    t = w.transit
    assert (t.state, t.producer_epoch, t.partitions) == (expected, EPOCH, meta.partitions)
    assert t.txn_start_timestamp == meta.txn_start_timestamp and t.txn_last_update_timestamp == NOW
    assert w.reply is E.none and w.writes_markers


@pytest.mark.parametrize(("state", "commit"), list(END_TXN_TABLE))
@pytest.mark.parametrize(
    "meta_kind, pid, epoch, code",
    [
        ("none", PID, EPOCH, E.invalid_producer_id_mapping),
        ("meta", PID + 1, EPOCH, E.invalid_producer_id_mapping),
        ("meta", PID, EPOCH - 1, E.producer_fenced),
        ("meta", PID, EPOCH + 1, E.producer_fenced),  # TV1: strict equality
        ("pending", PID, EPOCH, E.concurrent_transactions),
        ("pending", PID + 1, EPOCH, E.invalid_producer_id_mapping),
        ("pending", PID, EPOCH - 1, E.producer_fenced),
    ],
)
def test_end_txn_checks(
    state: TxnState, commit: bool, meta_kind: str, pid: int, epoch: int, code: ErrorCode
) -> None:
    meta = None if meta_kind == "none" else meta_in(state)
    if meta is not None and meta_kind == "pending":
        meta.pending_state = state
    assert decisions.end_txn(meta, "tx", pid, epoch, commit, NOW) is code


def test_end_txn_empty_transactional_id() -> None:
    assert decisions.end_txn(meta_in(S.ONGOING), "", PID, EPOCH, True, NOW) is E.invalid_request


def test_append_errors() -> None:
    assert decisions.append_error(E.not_enough_replicas) is E.coordinator_not_available
    assert decisions.append_error(E.request_timed_out) is E.coordinator_not_available
    assert decisions.append_error(E.kafka_storage_error) is E.not_coordinator
    assert decisions.append_error(E.record_list_too_large) is E.unknown_server_error
    assert decisions.append_error(E.invalid_record) is E.invalid_record
