"""Transactions on the partition side (spec eos.md §3.2 step 6, §4.10, §5.1-5.4, §5.8):
ongoing transactions, the last stable offset, markers, the aborted-transaction index, what a
read_committed client delivers, and all of it after a restart (clean, kill -9, no snapshots)."""

from __future__ import annotations

import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from storage.api import LogConfig, StorageError, Store, TopicMeta, TopicPartition
from storage.backends import open_store
from storage.partition import Partition
from storage.producer_snapshot import encode_snapshot, read_snapshot
from storage.producer_state import AbortedTxn, ProducerStateEntry, ProducerStateManager
from storage.segment.store import FileStore
from wire.records import (
    Record,
    build_batch,
    decode_batch_records,
    iter_batches,
    read_batch_header,
    read_end_txn_marker,
)

E = ErrorCode
TP = TopicPartition("t", 0)
NOW = 1_700_000_000_000


def batch(pid: int = -1, epoch: int = 0, seq: int = -1, n: int = 1, *, txn: bool = False) -> bytes:
    return build_batch(
        [Record(i, 0, None, b"v%d" % i) for i in range(n)],
        base_timestamp=NOW,
        producer_id=pid,
        producer_epoch=epoch if pid >= 0 else -1,
        base_sequence=seq if pid >= 0 else -1,
        transactional=txn,
    )


async def open_partition(store: Store, config: LogConfig | None = None) -> Partition:
    if "t" not in {m.name for m in store.topics()}:
        await store.create_topic(TopicMeta("t", uuid.uuid4(), 1))
    cfg = config or LogConfig()
    p = Partition(TP, uuid.uuid4(), await store.open_partition(TP, cfg), cfg)
    await p.load_producer_state()
    return p


async def put(p: Partition, data: bytes, **kw: object) -> int:
    got = await p.append(data, read_batch_header(data), NOW, **kw)  # type: ignore[arg-type]
    assert not isinstance(got, ErrorCode), got
    return got[0]


def drop_snapshots(directory: Path) -> None:
    for s in directory.glob("*.snapshot"):
        s.unlink()


def client_deliver(data: bytes, aborted: list[tuple[int, int]] | None) -> list[int]:
    """What a stock consumer delivers from a fetch response (spec §5.4): offsets of the data
    records it surfaces (``aborted`` None = read_uncommitted)."""
    pending = sorted(aborted or [], key=lambda a: a[1])
    aborting: set[int] = set()
    out = []
    for pos, h in iter_batches(data):
        raw = data[pos : pos + h.total_size]
        if aborted is not None and h.producer_id >= 0:
            while pending and pending[0][1] <= h.last_offset:
                aborting.add(pending.pop(0)[0])
        if h.is_control:
            marker = read_end_txn_marker(raw)
            if marker is not None and not marker.commit:
                aborting.discard(h.producer_id)
            continue
        if aborted is not None and h.is_transactional and h.producer_id in aborting:
            continue
        out.extend(h.base_offset + r.offset_delta for r in decode_batch_records(raw))
    return out


async def read_committed(p: Partition, offset: int) -> tuple[list[int], list[tuple[int, int]]]:
    """A read_committed fetch as the Fetch handler does it: whole batches below the LSO."""
    lso = p.last_stable_offset
    data = await p.read(offset, 1 << 30) if offset < lso else b""
    keep, upper = 0, offset
    for pos, h in iter_batches(data):
        if h.last_offset >= lso:
            break
        keep, upper = pos + h.total_size, h.last_offset + 1
    aborted = p.aborted_transactions(offset, upper) if keep else []
    return client_deliver(data[:keep], aborted), aborted


# -- producer state ------------------------------------------------------------------------------


MARKER_CHECKS = [
    # (entry epoch, entry coordinator epoch, marker epoch, marker coordinator epoch) -> outcome
    ((None, None, 0, 0), E.none),  # no entry: legal, creates one
    ((3, 2, 3, 2), E.none),  # TV1: same epoch
    ((3, 2, 4, 2), E.none),  # a bumped epoch (abort on timeout)
    ((3, 2, 2, 5), E.invalid_producer_epoch),  # epoch below the producer's
    ((3, 2, 3, 1), E.transaction_coordinator_fenced),  # an older coordinator
    ((3, 2, 2, 1), E.invalid_producer_epoch),  # epoch is checked first
]


@pytest.mark.parametrize(("case", "outcome"), MARKER_CHECKS)
def test_marker_checks(case: tuple[int | None, int | None, int, int], outcome: ErrorCode) -> None:
    epoch, coord, m_epoch, m_coord = case
    m = ProducerStateManager()
    if epoch is not None and coord is not None:
        m.load([ProducerStateEntry(7, epoch, coordinator_epoch=coord)])
    assert m.check_marker(7, m_epoch, m_coord) is outcome


def test_transaction_shape_and_coordinator_origin() -> None:
    m = ProducerStateManager()
    h = read_batch_header(batch(7, 0, 0, 2, txn=True))
    info = m.prepare_update(h)
    assert not isinstance(info, ErrorCode)
    m.update(info, 10)  # type: ignore[arg-type]
    assert m.ongoing == {7: 10} and m.first_unstable_offset() == 10
    # a plain (idempotent) batch while the transaction is open
    assert m.prepare_update(read_batch_header(batch(7, 0, 2))) is E.invalid_txn_state
    # a second transactional batch keeps the first offset
    info = m.prepare_update(read_batch_header(batch(7, 0, 2, txn=True)))
    m.update(info, 12)  # type: ignore[arg-type]
    assert m.ongoing == {7: 10}
    # coordinator origin: no sequence, epoch checked
    coord = read_batch_header(batch(8, 2, -1, 1, txn=True))
    assert not isinstance(m.prepare_update(coord, coordinator=True), ErrorCode)
    m.load([ProducerStateEntry(8, 3)])
    assert m.prepare_update(coord, coordinator=True) is E.invalid_producer_epoch


def test_abort_entry_records_the_next_open_transaction_as_lso() -> None:
    m = ProducerStateManager()
    for pid, offset in ((1, 1), (2, 3)):
        info = m.prepare_update(read_batch_header(batch(pid, 0, 0, txn=True)))
        m.update(info, offset)  # type: ignore[arg-type]
    assert m.complete_txn(1, 0, False, 0, 4, NOW) == AbortedTxn(1, 1, 4, 3)
    assert m.complete_txn(2, 0, False, 0, 6, NOW) == AbortedTxn(2, 3, 6, 7)
    assert m.complete_txn(3, 0, False, 0, 7, NOW) is None  # wrote nothing here: no entry
    assert m.aborted_transactions(0, 100) == [(1, 1), (2, 3)]
    assert m.aborted_transactions(5, 100) == [(2, 3)]  # 1's range (1-4) ends before 5
    assert m.aborted_transactions(0, 3) == [(1, 1)]  # 2's starts at the upper bound
    m.truncate_aborted(5)
    assert m.aborted == [AbortedTxn(2, 3, 6, 7)]


def test_snapshot_round_trips_open_transactions_and_the_index() -> None:
    entries = [
        ProducerStateEntry(
            1, 2, coordinator_epoch=4, current_txn_first_offset=55, last_timestamp=9
        ),
        ProducerStateEntry(2, 0),
    ]
    aborted = [AbortedTxn(3, 10, 20, 21), AbortedTxn(4, 5, 30, 31)]
    offset, got, got_aborted = read_snapshot(encode_snapshot(77, entries, aborted))
    assert (offset, got, got_aborted) == (77, entries, aborted)
    m = ProducerStateManager()
    m.load(got, got_aborted)
    assert m.ongoing == {1: 55}


# -- the worked example (spec §5.8) ----------------------------------------------------------------


async def worked_example(p: Partition) -> None:
    assert await put(p, batch()) == 0
    assert await put(p, batch(1, 0, 0, txn=True)) == 1
    assert await put(p, batch(1, 0, 1, txn=True)) == 2
    assert await put(p, batch(2, 0, 0, txn=True)) == 3
    assert await p.write_marker(1, 0, False, 0, NOW) == 4
    assert await put(p, batch()) == 5


async def test_worked_example(url: str) -> None:
    async with open_store(url) as store:
        p = await open_partition(store)
        await worked_example(p)
        assert (p.high_watermark, p.last_stable_offset) == (6, 3)
        assert await read_committed(p, 0) == ([0], [(1, 1)])
        everything = await p.read(0, 1 << 30)
        assert client_deliver(everything, None) == [0, 1, 2, 3, 5]
        assert p.has_open_transaction(2, 0) and not p.has_open_transaction(1, 0)
        assert await p.write_marker(2, 0, True, 0, NOW) == 6
        assert (p.high_watermark, p.last_stable_offset) == (7, 7)
        assert await read_committed(p, 3) == ([3, 5], [(1, 1)])
        assert (await read_committed(p, 0))[0] == [0, 3, 5]


@pytest.mark.parametrize("how", ["clean", "kill9", "kill9-no-snapshots"])
async def test_restart_rebuilds_lso_and_index(tmp_path: Path, how: str) -> None:
    url = f"file://{tmp_path / 'data'}"
    small = LogConfig(segment_bytes=200)  # rolls: snapshots mid-log
    async with open_store(url) as store:
        p = await open_partition(store, small)
        await worked_example(p)
        for seq in range(3):  # more segments, P3 open across them
            await put(p, batch(3, 0, seq, txn=True))
        await p.write_marker(3, 1, False, 5, NOW)
        await put(p, batch(4, 0, 0, txn=True))
        live = (p.last_stable_offset, dict(p.producers.ongoing), list(p.producers.aborted))
        live_entries = {e.producer_id: e for e in p.producers}
        if how == "clean":
            await p.take_snapshot()
        else:
            assert isinstance(store, FileStore)
            store.abandon()
    if how == "kill9-no-snapshots":
        drop_snapshots(tmp_path / "data" / "t-0")
    async with open_store(url) as store:
        p = await open_partition(store, small)
        assert (p.last_stable_offset, p.producers.ongoing, p.producers.aborted) == live
        assert live == (3, {2: 3, 4: 10}, [AbortedTxn(1, 1, 4, 3), AbortedTxn(3, 6, 9, 3)])
        got = {e.producer_id: e for e in p.producers}
        assert {k: (e.producer_epoch, e.coordinator_epoch) for k, e in got.items()} == {
            k: (e.producer_epoch, e.coordinator_epoch) for k, e in live_entries.items()
        }
        # and it goes on: a stale coordinator is still fenced after the restart
        assert await p.write_marker(3, 1, True, 4, NOW) is E.transaction_coordinator_fenced


async def test_retention_drops_index_entries(url: str) -> None:
    async with open_store(url) as store:
        p = await open_partition(store, LogConfig(segment_bytes=150))
        await worked_example(p)
        await p.write_marker(2, 0, False, 0, NOW)  # abort P2 too: (2, 3, 6, 7)
        await put(p, batch())
        await p.delete_before(5)
        assert p.producers.aborted == [AbortedTxn(2, 3, 6, 7)]
        await p.delete_before(7)
        assert p.producers.aborted == []


async def test_retention_follows_the_high_watermark_not_the_lso(url: str) -> None:
    """Issue 21.5: Kafka bounds retention by the high watermark, so a hanging transaction does
    not pin the log: with retention.bytes=0 everything goes, the active segment and the open
    transaction's first offset included; the LSO is then the log start, and read_committed
    still hides the transaction, before and after a crash, until its marker resolves it."""
    cfg = LogConfig(retention_bytes=0)
    async with open_store(url) as store:
        p = await open_partition(store, cfg)
        await put(p, batch())
        first = await put(p, batch(7, 0, 0, txn=True))  # P7 opens here
        await put(p, batch())
        assert (first, p.last_stable_offset, p.high_watermark) == (1, 1, 3)
        assert await p.apply_retention(NOW) == 1  # roll, then the one segment goes
        assert (p.log_start_offset, p.high_watermark, p.last_stable_offset) == (3, 3, 3)
        await put(p, batch(7, 0, 1, txn=True))
        await put(p, batch())
        assert p.last_stable_offset == 3  # still open: nothing past it is committed
        assert await read_committed(p, 3) == ([], [])
        if not isinstance(store, FileStore):
            await check_hanging_txn_resolves(p, first)
            return
        store.abandon()  # kill -9: the retention roll's snapshot keeps the open txn
    async with open_store(url) as store:
        await check_hanging_txn_resolves(await open_partition(store, cfg), first)


async def check_hanging_txn_resolves(p: Partition, first: int) -> None:
    assert (p.log_start_offset, p.last_stable_offset, p.high_watermark) == (3, 3, 5)
    assert p.producers.ongoing == {7: first}
    assert await p.write_marker(7, 0, False, 0, NOW) == 5
    assert p.last_stable_offset == 6
    assert await read_committed(p, 3) == ([4], [(7, first)])


async def test_a_snapshot_below_the_log_start_is_not_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot older than the log start cannot be completed by a replay (the batches
    between it and the log start are gone), so it is not used: Kafka's ``truncateAndReload``
    drops it. Here retention deleted the whole log and the snapshot at its roll was not
    written (it failed, or the process died first): loading the older snapshot brought back a
    transaction committed since (a phantom that pinned the LSO at the log start forever) and
    an idempotent producer's old sequence (OUT_OF_ORDER_SEQUENCE_NUMBER for its next batch)."""
    url = f"file://{tmp_path / 'data'}"
    cfg = LogConfig(retention_bytes=0)
    async with open_store(url) as store:
        p = await open_partition(store, cfg)
        await put(p, batch(7, 0, 0, txn=True))  # P7 opens a transaction at 0
        await put(p, batch(8, 0, 0))
        await p.take_snapshot()  # at 2: P7 open, P8 at sequence 0
        await p.write_marker(7, 0, True, 0, NOW)
        await put(p, batch(8, 0, 1))
        assert (p.last_stable_offset, p.high_watermark) == (4, 4)

        async def failing(offset: int, data: bytes) -> None:
            raise StorageError("disk full")

        monkeypatch.setattr(p.log, "write_producer_snapshot", failing)
        assert await p.apply_retention(NOW) == 1  # roll at 4, the segment goes
        assert isinstance(store, FileStore)
        store.abandon()
    async with open_store(url) as store:
        p = await open_partition(store, cfg)
        assert p.producers.ongoing == {}
        assert await put(p, batch(8, 0, 2)) == 4  # accepted (as an unknown producer)
        await put(p, batch())
        assert (p.log_start_offset, p.last_stable_offset, p.high_watermark) == (4, 6, 6)


async def test_retention_snapshots_at_its_roll_before_deleting(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's ``roll`` snapshots the producer state before ``deleteSegments`` removes
    anything: retention that empties the log writes its snapshot at the new segment while the
    old segments are still there, so no crash finds the batches gone and no snapshot for them."""
    async with open_store(url) as store:
        p = await open_partition(store, LogConfig(retention_bytes=0))
        await put(p, batch(8, 0, 0))
        written: list[tuple[int, int]] = []
        original = p.log.write_producer_snapshot

        async def recording(offset: int, data: bytes) -> None:
            written.append((offset, p.log.log_start_offset))
            await original(offset, data)

        monkeypatch.setattr(p.log, "write_producer_snapshot", recording)
        assert await p.apply_retention(NOW) == 1
        assert written == [(1, 0)]  # at the new segment, while the log still started at 0
        assert p.log_start_offset == 1


async def test_a_transactions_first_batch_is_never_below_the_lso(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The high watermark moves only after the producer state knows the transaction is open
    (Kafka: ``producerStateManager.update`` inside ``append``, the high watermark after it).
    Here the first batch rolls a segment and the roll's snapshot write is slow: while it runs
    the batch is in the log but not yet in the producer state, and the LSO must not pass it."""
    async with open_store(url) as store:
        first = batch(7, 0, 0, txn=True)
        p = await open_partition(store, LogConfig(segment_bytes=len(first) + 10))
        await put(p, batch())
        writing, proceed = trio.Event(), trio.Event()
        original = p.log.write_producer_snapshot

        async def slow(offset: int, data: bytes) -> None:
            writing.set()
            await proceed.wait()
            await original(offset, data)

        monkeypatch.setattr(p.log, "write_producer_snapshot", slow)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(put, p, first)
            await writing.wait()
            assert p.log.log_end_offset == 2
            assert (p.high_watermark, p.last_stable_offset) == (1, 1)
            assert await read_committed(p, 1) == ([], [])
            proceed.set()
        assert (p.high_watermark, p.last_stable_offset) == (2, 1)


async def test_verify_runs_only_for_the_first_batch_and_after_the_epoch_check(url: str) -> None:
    calls: list[int] = []

    def verify() -> ErrorCode:
        calls.append(1)
        return E.none

    def refuse() -> ErrorCode:
        return E.transaction_abortable

    async with open_store(url) as store:
        p = await open_partition(store)
        data = batch(1, 0, 0, txn=True)
        assert await p.append(data, read_batch_header(data), NOW, verify=refuse) is (
            E.transaction_abortable
        )
        assert p.high_watermark == 0 and not p.has_open_transaction(1, 0)
        await put(p, data, verify=verify)
        await put(p, batch(1, 0, 1, txn=True), verify=verify)
        assert await put(p, data, verify=refuse) == 0  # a duplicate needs no verification
        assert len(calls) == 1
        await p.write_marker(1, 1, False, 0, NOW)
        stale = batch(1, 0, 2, txn=True)
        assert await p.append(stale, read_batch_header(stale), NOW, verify=refuse) is (
            E.invalid_producer_epoch  # KAFKA-19690: the epoch wins over verification
        )


async def test_open_transaction_shortcut_checks_the_producer_epoch(url: str) -> None:
    """Issue 21.6: Kafka's hasOngoingTransaction(producerId, producerEpoch). A transactional
    batch with a newer epoch than the open transaction's (transaction version 2 bumps it per
    transaction) is verified, not waved through by the open transaction of the old epoch."""

    def refuse() -> ErrorCode:
        return E.transaction_abortable

    async with open_store(url) as store:
        p = await open_partition(store)
        await put(p, batch(1, 0, 0, txn=True))
        assert p.has_open_transaction(1, 0) and not p.has_open_transaction(1, 1)
        bumped = batch(1, 1, 0, txn=True)
        assert await p.append(bumped, read_batch_header(bumped), NOW, verify=refuse) is (
            E.transaction_abortable
        )
        assert p.high_watermark == 1


async def test_a_batch_larger_than_segment_bytes_is_refused(url: str) -> None:
    """Issue 23.11: Kafka refuses a batch no segment can hold with RECORD_LIST_TOO_LARGE
    (``UnifiedLog.append``), before the producer state sees it; one that fits is appended."""
    big = batch(1, 0, 0, n=20)
    async with open_store(url) as store:
        p = await open_partition(store, LogConfig(segment_bytes=len(big) - 1))
        assert await p.append(big, read_batch_header(big), NOW) is E.record_list_too_large
        assert p.high_watermark == 0 and p.producers.get(1) is None
        assert await put(p, batch(1, 0, 0)) == 0  # sequence 0 is still next


# -- model test ------------------------------------------------------------------------------------


@dataclass
class Model:
    """Offsets and what they hold; the expected LSO, aborted list and delivered offsets."""

    next_offset: int = 0
    open: dict[int, int] = field(default_factory=dict)  # pid -> first offset
    txn_data: dict[int, list[int]] = field(default_factory=dict)  # pid -> offsets of open txn
    committed_data: list[int] = field(default_factory=list)
    aborted: list[tuple[int, int]] = field(default_factory=list)

    def lso(self) -> int:
        return min(self.open.values(), default=self.next_offset)


ops = st.lists(
    st.one_of(
        st.tuples(st.just("plain"), st.integers(1, 3)),
        st.tuples(st.just("txn"), st.integers(0, 2), st.integers(1, 3)),
        st.tuples(st.just("marker"), st.integers(0, 2), st.booleans()),
        st.just(("restart",)),
    ),
    max_size=25,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=ops, lose_snapshots=st.booleans())
async def test_partition_matches_the_model(
    steps: list[tuple[object, ...]], lose_snapshots: bool
) -> None:
    seqs = [0, 0, 0]
    model = Model()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"file://{tmp}"
        cfg = LogConfig(segment_bytes=300)
        store_cm = open_store(url)
        store = await store_cm.__aenter__()
        try:
            p = await open_partition(store, cfg)
            for step in steps:
                kind = step[0]
                if kind == "plain":
                    n = int(step[1])  # type: ignore[call-overload]
                    base = await put(p, batch(n=n))
                    model.committed_data.extend(range(base, base + n))
                    model.next_offset = base + n
                elif kind == "txn":
                    k, n = int(step[1]), int(step[2])  # type: ignore[call-overload]
                    base = await put(p, batch(100 + k, 0, seqs[k], n, txn=True))
                    seqs[k] += n
                    model.open.setdefault(k, base)
                    model.txn_data.setdefault(k, []).extend(range(base, base + n))
                    model.next_offset = base + n
                elif kind == "marker":
                    k, commit = int(step[1]), bool(step[2])  # type: ignore[call-overload]
                    at = await p.write_marker(100 + k, 0, commit, 0, NOW)
                    assert at == model.next_offset
                    model.next_offset += 1
                    first = model.open.pop(k, None)
                    data = model.txn_data.pop(k, [])
                    if commit:
                        model.committed_data.extend(data)
                    elif first is not None:
                        model.aborted.append((100 + k, first))
                else:  # restart, as after kill -9, maybe without snapshots
                    assert isinstance(store, FileStore)
                    store.abandon()
                    await store_cm.__aexit__(None, None, None)
                    if lose_snapshots:
                        drop_snapshots(Path(tmp, "t-0"))
                    store_cm = open_store(url)
                    store = await store_cm.__aenter__()
                    p = await open_partition(store, cfg)
                assert p.high_watermark == model.next_offset
                assert p.last_stable_offset == model.lso()
                assert p.aborted_transactions(0, 1 << 62) == model.aborted
                assert {pid - 100: f for pid, f in p.producers.ongoing.items()} == model.open
                delivered, _ = await read_committed(p, 0)
                lso = model.lso()
                assert delivered == sorted(o for o in model.committed_data if o < lso)
        finally:
            await store_cm.__aexit__(None, None, None)
