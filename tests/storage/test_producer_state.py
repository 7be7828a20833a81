"""The append checks of spec eos.md §3.2 as a table, and property tests against a model."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from storage.producer_snapshot import decode_snapshot, encode_snapshot
from storage.producer_state import (
    INT32_MAX,
    AbortedTxn,
    BatchFacts,
    BatchMetadata,
    Check,
    ProducerAppendInfo,
    ProducerStateEntry,
    ProducerStateManager,
    check_append,
    last_sequence,
)
from wire.records import ATTR_CONTROL, ATTR_TRANSACTIONAL, BatchHeader

E = ErrorCode
PID = 7


def header(epoch: int, seq: int, count: int = 1, pid: int = PID, ts: int = 1000) -> BatchHeader:
    return BatchHeader(
        base_offset=0,
        batch_length=49,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=0,
        last_offset_delta=count - 1,
        base_timestamp=ts,
        max_timestamp=ts,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        records_count=count,
    )


def state_with(epoch: int, batches: list[tuple[int, int]]) -> ProducerStateManager:
    """A manager whose producer PID has ``batches`` [(first_seq, count)] of ``epoch``
    appended at offsets 100, 200, ..."""
    m = ProducerStateManager()
    for i, (seq, count) in enumerate(batches):
        info = m.prepare_update(header(epoch, seq, count))
        assert isinstance(info, ProducerAppendInfo), info
        m.update(info, 100 * (i + 1))
    if not batches:
        m.producers[PID] = ProducerStateEntry(PID, epoch)
    return m


DUP = "duplicate"
OK = "append"
# (case, entry epoch or None for no entry, retained [(first_seq, count)], batch epoch,
#  batch first seq, batch count, expected)
TABLE = [
    ("unknown producer, seq 0", None, [], 0, 0, 1, OK),
    ("unknown producer, any seq (KIP-360)", None, [], 3, 4242, 5, OK),
    ("entry without epoch accepts any seq", -1, [], 0, 17, 1, OK),
    ("next in sequence", 0, [(0, 5)], 0, 5, 3, OK),
    ("exact duplicate of the newest batch", 0, [(0, 5), (5, 2)], 0, 5, 2, DUP),
    ("exact duplicate of an older retained batch", 0, [(0, 5), (5, 2)], 0, 0, 5, DUP),
    (
        "same first seq, different length: not a duplicate",
        0,
        [(0, 5)],
        0,
        0,
        4,
        E.out_of_order_sequence_number,
    ),
    ("gap", 0, [(0, 5)], 0, 6, 1, E.out_of_order_sequence_number),
    (
        "old sequence that is not a retained batch",
        0,
        [(0, 5), (5, 5)],
        0,
        3,
        1,
        E.out_of_order_sequence_number,
    ),
    ("stale epoch", 2, [(0, 1)], 1, 1, 1, E.invalid_producer_epoch),
    ("stale epoch beats a sequence match", 2, [(0, 1)], 1, 0, 1, E.invalid_producer_epoch),
    ("epoch bump from 0", 2, [(0, 5)], 3, 0, 1, OK),
    ("epoch bump not from 0", 2, [(0, 5)], 3, 5, 1, E.out_of_order_sequence_number),
    ("duplicate seq range of the old epoch under a new epoch", 2, [(0, 5)], 3, 0, 5, OK),
    ("same epoch, nothing retained: must start at 0", 4, [], 4, 0, 1, OK),
    ("same epoch, nothing retained, seq 3", 4, [], 4, 3, 1, E.out_of_order_sequence_number),
]


@pytest.mark.parametrize(
    ("case", "epoch", "retained", "b_epoch", "b_seq", "b_count", "expected"),
    TABLE,
    ids=[row[0] for row in TABLE],
)
def test_append_checks(
    case: str,
    epoch: int | None,
    retained: list[tuple[int, int]],
    b_epoch: int,
    b_seq: int,
    b_count: int,
    expected: object,
) -> None:
    m = ProducerStateManager() if epoch is None else state_with(epoch, retained)
    before = {pid: (e.producer_epoch, list(e.batches)) for pid, e in m.producers.items()}
    got = m.prepare_update(header(b_epoch, b_seq, b_count))
    if expected == DUP:
        assert isinstance(got, BatchMetadata)
        assert (got.first_seq, got.last_seq) == (b_seq, b_seq + b_count - 1)
    elif expected == OK:
        assert isinstance(got, ProducerAppendInfo)
    else:
        assert got == expected
    after = {pid: (e.producer_epoch, list(e.batches)) for pid, e in m.producers.items()}
    assert after == before, "prepare_update must not change anything"


def test_duplicate_returns_the_original_offsets() -> None:
    m = state_with(0, [(0, 5), (5, 2)])
    dup = m.prepare_update(header(0, 0, 5))
    assert isinstance(dup, BatchMetadata)
    assert (dup.first_offset, dup.last_offset) == (100, 104)


def test_window_is_five_batches() -> None:
    m = state_with(0, [(i, 1) for i in range(6)])
    assert m.prepare_update(header(0, 0, 1)) == E.out_of_order_sequence_number  # evicted
    assert isinstance(m.prepare_update(header(0, 1, 1)), BatchMetadata)


def test_sequence_wraps_after_int32_max() -> None:
    assert last_sequence(INT32_MAX - 1, 3) == 1
    m = ProducerStateManager()
    info = m.prepare_update(header(0, INT32_MAX - 2, 3))
    assert isinstance(info, ProducerAppendInfo) and info.last_seq == INT32_MAX
    m.update(info, 0)
    assert isinstance(m.prepare_update(header(0, 0, 2)), ProducerAppendInfo)
    wrapped = m.prepare_update(header(0, INT32_MAX, 4))
    assert wrapped == E.out_of_order_sequence_number
    m2 = ProducerStateManager()
    info = m2.prepare_update(header(0, INT32_MAX - 1, 4))  # MAX-1, MAX, 0, 1
    assert isinstance(info, ProducerAppendInfo) and info.last_seq == 1
    m2.update(info, 0)
    assert isinstance(m2.prepare_update(header(0, 2, 1)), ProducerAppendInfo)
    assert isinstance(m2.prepare_update(header(0, INT32_MAX - 1, 4)), BatchMetadata)


def test_epoch_change_clears_the_window() -> None:
    m = state_with(0, [(0, 1), (1, 1)])
    info = m.prepare_update(header(1, 0, 1))
    assert isinstance(info, ProducerAppendInfo)
    m.update(info, 500)
    entry = m.get(PID)
    assert entry is not None and entry.producer_epoch == 1 and len(entry.batches) == 1
    assert m.prepare_update(header(0, 2, 1)) == E.invalid_producer_epoch


def test_expiration_keeps_open_transactions() -> None:
    m = ProducerStateManager()
    for pid, ts in ((1, 1000), (2, 5000), (3, 1000)):
        info = m.prepare_update(header(0, 0, 1, pid=pid, ts=ts))
        assert isinstance(info, ProducerAppendInfo)
        m.update(info, pid)
    entry = m.get(3)
    assert entry is not None
    entry.current_txn_first_offset = 3
    assert m.remove_expired(now_ms=6000, expiration_ms=5000) == [1]
    assert sorted(m.producers) == [2, 3]


def test_replay_rebuilds_the_same_state() -> None:
    live = state_with(0, [(0, 5), (5, 2), (7, 1)])
    replayed = ProducerStateManager()
    for i, (seq, count) in enumerate([(0, 5), (5, 2), (7, 1)]):
        replayed.replay(header(0, seq, count)._replace(base_offset=100 * (i + 1)))
    assert replayed.producers == live.producers


def test_replay_of_a_marker_moves_the_epoch_and_closes_the_transaction() -> None:
    m = ProducerStateManager()
    m.replay(header(0, 0, 2)._replace(attributes=ATTR_TRANSACTIONAL, base_offset=10))
    entry = m.get(PID)
    assert entry is not None and entry.current_txn_first_offset == 10
    control = header(1, -1, 1)._replace(attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL)
    m.replay(control._replace(base_offset=12), None)  # not a COMMIT/ABORT marker: ignored
    assert entry.current_txn_first_offset == 10
    m.replay(control._replace(base_offset=12), (False, 3))
    assert (entry.producer_epoch, entry.current_txn_first_offset, len(entry.batches)) == (1, -1, 0)
    assert entry.coordinator_epoch == 3
    assert m.aborted == [AbortedTxn(PID, 10, 12, 13)] and m.ongoing == {}


def test_snapshot_round_trip_keeps_every_retained_batch() -> None:
    m = state_with(3, [(i * 2, 2) for i in range(7)])
    m.producers[99] = ProducerStateEntry(99, 0, coordinator_epoch=4, current_txn_first_offset=55)
    offset, entries = decode_snapshot(encode_snapshot(1234, list(m)))
    assert offset == 1234
    assert {e.producer_id: e for e in entries} == m.producers


# -- property tests ---------------------------------------------------------------------------
#
# A producer sends batches 0..n-1 (sequence numbers consecutive) of one epoch, possibly over
# several epochs (a bump restarts at batch sequence 0); the "network" delivers attempts in any
# order, duplicated, and retries old ones. The model of a correct broker: an attempt is
# appended iff it is the next batch in sequence for its epoch (or the first of a new epoch),
# an attempt repeating a batch among the last 5 appended of the current epoch is a duplicate
# with the original offset, anything else is refused; and the log never holds a batch twice
# or out of order.

Attempt = tuple[int, int]  # (epoch, batch index within that epoch)


@st.composite
def attempts(draw: st.DrawFn) -> list[Attempt]:
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    out: list[Attempt] = []
    for epoch, n in enumerate(sizes):
        batches = list(range(draw(st.integers(1, 12))))
        order = draw(st.permutations(batches))
        retries = draw(st.lists(st.sampled_from(batches), max_size=12))
        mixed = draw(st.permutations(list(order) + retries))
        out += [(epoch, b) for b in mixed][: n * 10]
    return out


def batch_counts(epoch: int, index: int) -> int:
    return 1 + (epoch * 7 + index * 3) % 4  # deterministic sizes per batch


def first_seq(epoch: int, index: int) -> int:
    return sum(batch_counts(epoch, i) for i in range(index))


@settings(max_examples=300, deadline=None)
@given(attempts())
def test_random_retries_never_duplicate_or_reorder(history: list[Attempt]) -> None:
    m = ProducerStateManager()
    log: list[Attempt] = []  # what was appended, in order
    offsets: dict[Attempt, int] = {}
    end = 0
    model_epoch, model_next = -1, 0  # model: current epoch, next batch index expected
    for epoch, index in history:
        count = batch_counts(epoch, index)
        got = m.prepare_update(header(epoch, first_seq(epoch, index), count))
        window = [a for a in log if a[0] == model_epoch][-5:]
        if isinstance(got, ProducerAppendInfo):
            m.update(got, end)
            log.append((epoch, index))
            offsets[(epoch, index)] = end
            end += count
            # model: accepted iff new epoch starting at 0, or next index of this epoch, or
            # the very first batch of an unknown producer
            assert (
                (model_epoch == -1)
                or (epoch > model_epoch and index == 0)
                or (epoch == model_epoch and index == model_next)
            ), (epoch, index, model_epoch, model_next)
            model_epoch, model_next = epoch, index + 1
        elif isinstance(got, BatchMetadata):
            assert (epoch, index) in window
            assert got.first_offset == offsets[(epoch, index)]
        else:
            assert (epoch, index) not in window
            assert got in (E.invalid_producer_epoch, E.out_of_order_sequence_number)
            if got is E.invalid_producer_epoch:
                assert epoch < model_epoch
    # the log: per epoch a run of consecutive batch indexes, each at most once, in order
    assert len(set(log)) == len(log)
    for epoch in {e for e, _ in log}:
        idx = [i for e, i in log if e == epoch]
        assert idx == list(range(idx[0], idx[0] + len(idx)))
    assert [e for e, _ in log] == sorted(e for e, _ in log)


@settings(max_examples=100, deadline=None)
@given(attempts(), st.integers(0, 40))
def test_snapshot_plus_replay_equals_live_state(history: list[Attempt], cut: int) -> None:
    """Rebuilding from a snapshot taken at any point plus a replay of the rest of the log gives
    the live state."""
    live = ProducerStateManager()
    appended: list[BatchHeader] = []
    end = 0
    snapshot: bytes | None = None
    for n, (epoch, index) in enumerate(history):
        if n == cut:
            snapshot = encode_snapshot(end, list(live))
        h = header(epoch, first_seq(epoch, index), batch_counts(epoch, index))
        got = live.prepare_update(h)
        if isinstance(got, ProducerAppendInfo):
            live.update(got, end)
            appended.append(h._replace(base_offset=end))
            end += h.records_count
    rebuilt = ProducerStateManager()
    start = 0
    if snapshot is not None:
        start, entries = decode_snapshot(snapshot)
        rebuilt.load(entries)
    for h in appended:
        if h.base_offset >= start:
            rebuilt.replay(h)
    assert rebuilt.producers == live.producers


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(-1, 2), st.sampled_from([0, 1, 2, 3, 5, INT32_MAX - 1, INT32_MAX])),
        max_size=30,
    ),
    st.integers(1, 3),
)
def test_prepare_update_answers_as_the_table(batches: list[tuple[int, int]], count: int) -> None:
    """``prepare_update`` shortcuts the usual batch (same epoch, next in sequence, no
    duplicate); every answer is still APPEND_CHECKS' (sequences wrapping included)."""
    m = ProducerStateManager()
    for offset, (epoch, seq) in enumerate(batches):
        entry = m.get(PID)
        expected = check_append(BatchFacts(entry, epoch, seq, last_sequence(seq, count - 1)))
        got = m.prepare_update(header(epoch, seq, count))
        if expected is Check.DUPLICATE:
            assert isinstance(got, BatchMetadata)
        elif isinstance(expected, ErrorCode):
            assert got == expected
        else:
            assert isinstance(got, ProducerAppendInfo)
            m.update(got, offset * 10)


def walked(
    m: ProducerStateManager, h: BatchHeader, max_ts: int | None, coordinator: bool
) -> ProducerAppendInfo | BatchMetadata | ErrorCode:
    """``prepare_update`` without its shortcut: the table walked for every batch."""
    entry = m.get(h.producer_id)
    last = last_sequence(h.base_sequence, h.last_offset_delta)
    if coordinator:
        if entry is not None and h.producer_epoch < entry.producer_epoch:
            return E.invalid_producer_epoch
    else:
        facts = BatchFacts(entry, h.producer_epoch, h.base_sequence, last)
        outcome = check_append(facts)
        if outcome is Check.DUPLICATE:
            assert facts.duplicate is not None
            return facts.duplicate
        if isinstance(outcome, ErrorCode):
            return outcome
    if entry is not None and entry.current_txn_first_offset != -1 and not h.is_transactional:
        return E.invalid_txn_state
    ts = h.max_timestamp if max_ts is None else max_ts
    return ProducerAppendInfo(
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
        last,
        h.last_offset_delta,
        ts,
        h.is_transactional,
    )


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(-1, 2),  # epoch
            st.sampled_from([-1, 0, 1, 2, 3, 4, 5, 6, INT32_MAX - 1, INT32_MAX]),  # sequence
            st.integers(1, 3),  # records
            st.booleans(),  # transactional
            st.sampled_from([False, False, False, True]),  # coordinator (TxnOffsetCommit)
            st.sampled_from([None, None, 5_000]),  # LogAppendTime
            st.sampled_from([False, False, False, True]),  # a marker first
        ),
        max_size=40,
    )
)
@example(  # in sequence after a coordinator batch (no sequence), yet a retained duplicate
    [
        (0, 0, 1, False, False, None, False),
        (0, 9, 1, False, True, None, False),
        (0, 0, 1, False, False, None, False),
    ]
)
def test_prepare_update_returns_what_the_walked_table_returns(
    steps: list[tuple[int, int, int, bool, bool, int | None, bool]],
) -> None:
    """Every answer of ``prepare_update`` (the info's fields, the duplicate's offsets, the
    codes) equals the table walked for every batch, over sequences of batches with coordinator
    batches (no sequence), transactions opened and closed by markers, epochs moving and
    sequences wrapping; ``update`` then applies it."""
    m = ProducerStateManager()
    offset = 0
    for epoch, seq, count, transactional, coordinator, max_ts, marker in steps:
        if marker and m.check_marker(PID, max(epoch, 0), 0) is E.none:  # as write_marker
            m.complete_txn(PID, max(epoch, 0), True, 0, offset, 0)
            offset += 1
        h = header(epoch, -1 if coordinator else seq, count)  # coordinator batches: none
        if transactional:
            h = h._replace(attributes=ATTR_TRANSACTIONAL)
        expected = walked(m, h, max_ts, coordinator)
        got = m.prepare_update(h, max_ts, coordinator=coordinator)
        assert got == expected and type(got) is type(expected)
        if isinstance(got, ProducerAppendInfo):
            m.update(got, offset)
            offset += count


def txn(epoch: int, seq: int, count: int = 1) -> BatchHeader:
    return header(epoch, seq, count)._replace(attributes=ATTR_TRANSACTIONAL)


def accepted(m: ProducerStateManager, h: BatchHeader) -> ProducerAppendInfo:
    info = m.prepare_update(h)
    assert isinstance(info, ProducerAppendInfo), info
    return info


OOO = E.out_of_order_sequence_number


def test_verification_entry_keeps_the_lowest_sequence_of_the_newest_epoch() -> None:
    m = ProducerStateManager()
    m.start_verification(PID, 5, 2, False, 1000)
    m.start_verification(PID, 7, 2, True, 2000)  # a higher one, the flag and time stay
    found = m.verifying[PID]
    assert (found.lowest_sequence, found.epoch, found.supports_epoch_bump) == (5, 2, False)
    assert found.timestamp == 1000
    m.start_verification(PID, 3, 2, False, 2000)
    assert found.lowest_sequence == 3
    m.start_verification(PID, 9, 1, False, 2000)  # an older epoch changes nothing
    assert (found.lowest_sequence, found.epoch) == (3, 2)
    m.start_verification(PID, 9, 4, False, 2000)  # a newer one starts again
    assert (found.lowest_sequence, found.epoch) == (9, 4)
    assert m.check_verification(accepted(m, txn(4, 10))) is OOO
    assert m.check_verification(accepted(m, txn(4, 9))) is E.none


def test_tv2_entry_wants_sequence_0_while_nothing_is_retained() -> None:
    m = ProducerStateManager()
    m.start_verification(PID, 0, 0, True, 1000)
    assert m.check_verification(accepted(m, txn(0, 0))) is E.none
    m.update(accepted(m, txn(0, 0, 3)), 10)  # written: the entry is gone
    assert m.verifying == {}
    # a TV1 marker keeps the retained batches: a new verification at the epoch may go on
    assert m.complete_txn(PID, 0, True, 0, 13, 1000) is None
    m.start_verification(PID, 3, 0, True, 2000)
    assert m.check_verification(accepted(m, txn(0, 3))) is E.none
    # no retained batch (a TV2 marker moved the epoch and cleared them): 0 only (the
    # sequence checks want 0 there too; the verification's check comes first in Kafka)
    m.complete_txn(PID, 1, True, 0, 14, 1000)
    m.start_verification(PID, 3, 1, True, 2000)
    info = ProducerAppendInfo(PID, 1, 3, 3, 0, 1000, True)
    assert m.check_verification(info) is OOO
    m.verifying.clear()
    m.start_verification(PID, 3, 1, False, 2000)  # not TV2: the lowest seen only
    assert m.check_verification(info) is E.none
    # no entry at all: any sequence for the checks (KIP-360), 0 for a TV2 verification
    fresh = ProducerStateManager()
    fresh.start_verification(PID, 3, 0, True, 2000)
    assert fresh.check_verification(accepted(fresh, txn(0, 3))) is OOO


def test_stale_epoch_starts_no_verification() -> None:
    m = state_with(3, [(0, 1)])
    m.start_verification(PID, 0, 2, True, 1000)
    assert m.verifying == {}


def test_markers_clear_the_entry_but_a_tv2_one_of_its_epoch() -> None:
    m = ProducerStateManager()
    m.start_verification(PID, 0, 5, True, 1000)
    m.complete_txn(PID, 5, True, 0, 10, 1000)  # the previous transaction's TV2 marker
    assert PID in m.verifying
    m.complete_txn(PID, 6, True, 0, 11, 1000)
    assert PID not in m.verifying
    m.start_verification(PID, 0, 6, False, 1000)
    m.complete_txn(PID, 6, True, 0, 12, 1000)  # not TV2: cleared whatever the epoch
    assert PID not in m.verifying


def test_only_a_transactional_append_clears_the_entry() -> None:
    m = ProducerStateManager()
    m.start_verification(PID, 0, 0, False, 1000)
    m.update(accepted(m, header(0, 0)), 10)
    assert PID in m.verifying
    m.update(accepted(m, txn(0, 1)), 11)
    assert PID not in m.verifying


def test_lingering_verifications_expire() -> None:
    m = ProducerStateManager()
    m.start_verification(1, 0, 0, True, 1000)
    m.start_verification(2, 0, 0, True, 2000)
    assert m.remove_expired(now_ms=6000, expiration_ms=5000) == []
    assert list(m.verifying) == [2]
