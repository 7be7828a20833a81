"""Kafka's compaction rules, case by case (``storage/cleaner/decide.py``), and the rebuilt
batches (``rewrite.py``): what survives a pass, delete horizons on tombstones and markers, the
aborted-transaction index, producer state, offsets preserved."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from storage.api import LogConfig, SegmentInfo
from storage.cleaner.decide import (
    Action,
    Batch,
    CleanContext,
    LastRecord,
    TxnTracker,
    build_key_map,
    decide_batch,
)
from storage.cleaner.policy import group_segments, plan
from storage.cleaner.rewrite import parse_batches, rebuild
from storage.producer_state import AbortedTxn
from wire.records import (
    ATTR_DELETE_HORIZON,
    Record,
    build_batch,
    build_control_batch,
    crc_ok,
    decode_batch_records,
    read_batch_header,
)

NOW = 1_700_000_000_000


def data(
    base: int,
    *kvs: tuple[bytes | None, bytes | None],
    pid: int = -1,
    txn: bool = False,
    codec: int = 0,
) -> Batch:
    raw = build_batch(
        [Record(i, i, k, v) for i, (k, v) in enumerate(kvs)],
        base_offset=base,
        base_timestamp=NOW,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1,
        transactional=txn,
        compression=codec,
    )
    return parse_batches(raw)[0]


def marker(offset: int, pid: int, commit: bool) -> Batch:
    return parse_batches(build_control_batch(pid, 0, commit, 0, offset, NOW))[0]


def sweep(
    log: list[Batch],
    aborted: list[AbortedTxn],
    now: int,
    *,
    active: dict[int, LastRecord] | None = None,
    retention: int = 100,
) -> tuple[list[Batch], TxnTracker]:
    """One pass over the whole log (all of it dirty); returns the cleaned log."""
    key_map: dict[bytes, int] = {}
    assert build_key_map(log, TxnTracker(aborted), 0, key_map, 1000) is None
    end = log[-1].header.last_offset + 1
    ctx = CleanContext(key_map, end, active or {}, now, retention)
    tracker = TxnTracker(aborted)
    out = []
    for b in log:
        d = decide_batch(b, tracker, ctx)
        if d.action is Action.KEEP:
            out.append(b)
        elif d.action is Action.REWRITE:
            out.extend(parse_batches(rebuild(b, d.records, d.horizon)))
    return out, tracker


def values(log: list[Batch]) -> list[tuple[int, bytes | None, bytes | None]]:
    return [
        (b.header.base_offset + r.offset_delta, r.key, r.value)
        for b in log
        if not b.header.is_control
        for r in decode_batch_records(b.raw)
    ]


def test_latest_value_per_key_and_offsets_kept() -> None:
    log = [data(0, (b"a", b"1"), (b"b", b"1")), data(2, (b"a", b"2"), (None, b"x"))]
    out, _ = sweep(log, [], NOW)
    assert values(out) == [(1, b"b", b"1"), (2, b"a", b"2")]  # no key: dropped (Kafka)
    first = out[0].header
    assert (first.base_offset, first.last_offset, first.records_count) == (0, 1, 1)
    assert all(crc_ok(b.raw, 0, b.header) for b in out)


def test_compressed_batches_are_recompressed_with_their_codec() -> None:
    log = [data(0, (b"a", b"1"), (b"b", b"1"), codec=1), data(2, (b"a", b"2"), codec=4)]
    out, _ = sweep(log, [], NOW)
    assert out[0].header.compression == 1
    assert values(out) == [(1, b"b", b"1"), (2, b"a", b"2")]


def test_tombstones_get_a_horizon_then_go() -> None:
    log = [data(0, (b"a", b"1")), data(1, (b"a", None), (b"b", b"1"))]
    out, _ = sweep(log, [], NOW, retention=100)
    assert values(out) == [(1, b"a", None), (2, b"b", b"1")]
    h = out[0].header
    assert h.attributes & ATTR_DELETE_HORIZON and h.base_timestamp == NOW + 100
    assert decode_batch_records(out[0].raw)[1].timestamp_delta == NOW + 1 - (NOW + 100)
    again, _ = sweep(out, [], NOW + 99)
    assert values(again) == values(out)
    gone, _ = sweep(out, [], NOW + 100)
    assert values(gone) == [(2, b"b", b"1")]


def test_aborted_data_goes_and_its_entry_and_marker_follow_in_later_passes() -> None:
    entry = AbortedTxn(7, 1, 3, 4)
    log = [
        data(0, (b"a", b"1")),
        data(1, (b"a", b"bad"), pid=7, txn=True),
        data(2, (b"c", b"bad"), pid=7, txn=True),
        marker(3, 7, commit=False),
        data(4, (b"a", b"2"), pid=7, txn=True),  # the producer's next (committed) transaction
        marker(5, 7, commit=True),
    ]
    out, tracker = sweep(log, [entry], NOW)
    assert values(out) == [(4, b"a", b"2")]
    assert [b.header.base_offset for b in out if b.header.is_control] == [3, 5]
    assert tracker.dropped == []  # the data was still there in this pass: the entry stays
    out2, tracker2 = sweep(out, [entry], NOW)
    assert tracker2.dropped == [entry]  # nothing of it is left: the entry goes now
    abort = next(b for b in out2 if b.header.base_offset == 3)
    assert abort.header.attributes & ATTR_DELETE_HORIZON  # the marker waits a horizon
    out3, _ = sweep(out2, [], NOW + 100)
    assert [b.header.base_offset for b in out3 if b.header.is_control] == [5]


def test_commit_marker_stays_while_its_data_does() -> None:
    log = [
        data(0, (b"a", b"1"), pid=7, txn=True),
        data(1, (b"b", b"1"), pid=7, txn=True),
        marker(2, 7, commit=True),
        data(3, (b"a", b"2"), (b"b", b"2")),
    ]
    out, _ = sweep(log, [], NOW)
    assert [b.header.base_offset for b in out] == [2, 3]
    assert not out[0].header.attributes & ATTR_DELETE_HORIZON  # its data was seen this pass
    out2, _ = sweep(out, [], NOW)
    assert out2[0].header.attributes & ATTR_DELETE_HORIZON  # now nothing of it is left
    out3, _ = sweep(out2, [], NOW + 100)
    assert [b.header.base_offset for b in out3] == [3]


def test_the_last_batch_of_an_active_producer_stays_as_an_empty_header() -> None:
    log = [data(0, (b"a", b"1"), pid=9), data(1, (b"a", b"2"))]
    out, _ = sweep(log, [], NOW, active={9: LastRecord(0, 0)})
    first = out[0].header
    assert (first.base_offset, first.producer_id, first.records_count) == (0, 9, 0)
    assert read_batch_header(out[0].raw).base_sequence == 0
    gone, _ = sweep(log, [], NOW, active={})
    assert [b.header.base_offset for b in gone] == [1]


def test_records_past_the_key_map_are_kept() -> None:
    log = [data(0, (b"a", b"1")), data(1, (b"a", b"2")), data(2, (b"a", None))]
    key_map: dict[bytes, int] = {}
    stop = build_key_map(log, TxnTracker([]), 0, key_map, 1)
    assert stop == 1 and key_map == {b"a": 0}
    ctx = CleanContext(key_map, stop, {}, NOW, 0)
    t = TxnTracker([])
    got = [decide_batch(b, t, ctx) for b in log]
    assert [d.action for d in got] == [Action.KEEP, Action.KEEP, Action.REWRITE]
    assert len(got[2].records) == 1 and got[2].horizon == NOW  # the tombstone's horizon


def test_plan_stops_at_the_lso_and_the_active_segment() -> None:
    infos = [
        SegmentInfo(0, 100, NOW, NOW),
        SegmentInfo(10, 100, NOW, NOW),
        SegmentInfo(20, 100, NOW, NOW),
        SegmentInfo(30, 50, NOW, NOW),
    ]
    cfg = LogConfig(compact=True, min_cleanable_dirty_ratio=0.5)
    pl = plan(infos, cfg, checkpoint=None, log_start=0, log_end=35, last_stable=35, now_ms=NOW)
    assert (pl.first_dirty, pl.upper, pl.cleanable_bytes) == (0, 30, 300)
    pl = plan(infos, cfg, checkpoint=None, log_start=0, log_end=35, last_stable=15, now_ms=NOW)
    assert pl.upper == 10  # the segment holding the LSO is not cleaned
    pl = plan(infos, cfg, checkpoint=20, log_start=0, log_end=35, last_stable=35, now_ms=NOW)
    assert (pl.clean_bytes, pl.cleanable_bytes) == (200, 100) and not pl.worth_cleaning(cfg)
    lagged = LogConfig(compact=True, max_compaction_lag_ms=10)
    pl = plan(
        infos, lagged, checkpoint=20, log_start=0, log_end=35, last_stable=35, now_ms=NOW + 11
    )
    assert pl.needs_compaction_now and pl.worth_cleaning(lagged)
    young = LogConfig(compact=True, min_compaction_lag_ms=10)
    pl = plan(
        infos, young, checkpoint=None, log_start=0, log_end=35, last_stable=35, now_ms=NOW + 5
    )
    assert pl.upper == 0 and not pl.worth_cleaning(young)
    assert group_segments(infos[:3], [10, 20, 30], 250) == [[0, 10], [20]]


async def test_throttle_bounds_the_io_rate(autojump_clock: object) -> None:
    import trio

    from storage.cleaner.runner import Throttle

    t = Throttle(1000.0)
    start = trio.current_time()
    for _ in range(10):
        await t.spent(500)
    assert trio.current_time() - start >= 4.5
    unbounded = Throttle(float("inf"))
    before = trio.current_time()
    await unbounded.spent(10**9)
    assert trio.current_time() == before


def test_max_compaction_lag_caps_the_roll_time() -> None:
    from storage.topic_config import topic_log_config

    cfg = topic_log_config(LogConfig(), {"cleanup.policy": "compact", "max.compaction.lag.ms": "5"})
    assert cfg.segment_ms == 5 and cfg.compact and not cfg.delete
    cfg = topic_log_config(LogConfig(), {"max.compaction.lag.ms": "5"})
    assert cfg.segment_ms == LogConfig().segment_ms  # not compacted: segment.ms alone


@settings(max_examples=150, deadline=None)
@given(
    recs=st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=200)),
            st.one_of(st.none(), st.binary(max_size=200)),
            st.integers(-(2**40), 2**40),
        ),
        min_size=1,
        max_size=6,
    ),
    codec=st.sampled_from([0, 1, 3, 4]),
)
def test_scan_matches_the_decoder_and_copies_rebuild_exactly(
    recs: list[tuple[bytes | None, bytes | None, int]], codec: int
) -> None:
    raw = build_batch(
        [Record(i * 3, ts, k, v) for i, (k, v, ts) in enumerate(recs)],
        base_timestamp=NOW,
        compression=codec,
    )
    (b,) = parse_batches(raw)
    decoded = decode_batch_records(raw)
    assert [(r.offset_delta, r.timestamp_delta, r.key, r.tombstone) for r in b.records] == [
        (r.offset_delta, r.timestamp_delta, r.key, r.value is None) for r in decoded
    ]
    kept = b.records[1:]
    (again,) = parse_batches(rebuild(b, kept, None))
    assert [(r.offset_delta, r.key) for r in decode_batch_records(again.raw)] == [
        (r.offset_delta, r.key) for r in decoded[1:]
    ]
    assert again.header.last_offset == b.header.last_offset
    assert crc_ok(again.raw, 0, again.header)
