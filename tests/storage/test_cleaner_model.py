"""Model-based property test of the log cleaner (issue 8).

Random keyed writes (plain, idempotent, transactional; committed, aborted and still open;
tombstones), random cleaning passes at random times (tombstone and marker horizons pass or
not, the key map sometimes too small for the dirty section), kill -9 restarts with or without
producer snapshots (file backend), and a lagging read_committed consumer. After every step:

* a read_committed read of the whole log, folded key -> value as a consumer of a compacted
  topic does, equals the model's latest committed value per key below the LSO (tombstoned
  keys absent);
* everything delivered is a committed record the model knows (no aborted read, nothing made
  up), in offset order;
* the high watermark, the LSO and the bytes at and past the LSO are exactly what they were
  before the clean (open transactions are never touched);
* every aborted-transaction entry still has its ABORT marker in the log;
* the lagging consumer, whenever it has caught up and no tombstone horizon could have passed
  while it lagged, holds the model's state too.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from storage.api import LogConfig
from storage.backends import open_store
from storage.cleaner.policy import plan
from storage.cleaner.runner import Throttle, clean_partition
from storage.partition import Partition
from storage.segment.store import FileStore
from tests.storage.test_transactions import NOW, drop_snapshots, open_partition, put
from wire.records import Record, build_batch, decode_batch_records, iter_batches

RETENTION = 1_000  # delete.retention.ms
KEYS = [b"k%d" % i for i in range(5)]
Delivered = tuple[int, bytes | None, bytes | None]  # offset, key, value


def deliver(data: bytes, aborted: list[tuple[int, int]]) -> list[Delivered]:
    """What a stock read_committed consumer surfaces from a fetch (spec §5.4)."""
    pending = sorted(aborted, key=lambda a: a[1])
    aborting: set[int] = set()
    out = []
    for pos, h in iter_batches(data):
        records = decode_batch_records(data[pos : pos + h.total_size])
        if h.producer_id >= 0:
            while pending and pending[0][1] <= h.last_offset:
                aborting.add(pending.pop(0)[0])
        if h.is_control:
            if records and records[0].key is not None and records[0].key[2:4] == b"\x00\x00":
                aborting.discard(h.producer_id)
            continue
        if h.is_transactional and h.producer_id in aborting:
            continue
        out.extend((h.base_offset + r.offset_delta, r.key, r.value) for r in records)
    return out


async def fetch(p: Partition, offset: int, max_bytes: int) -> tuple[list[Delivered], int]:
    """A read_committed fetch as the Fetch handler does it; returns the next position."""
    lso = p.last_stable_offset
    if offset >= lso:
        return [], offset
    data = await p.read(max(offset, p.log_start_offset), max_bytes)
    keep, upper = 0, offset
    for pos, h in iter_batches(data):
        if h.last_offset >= lso:
            break
        keep, upper = pos + h.total_size, h.last_offset + 1
    aborted = p.aborted_transactions(offset, upper) if keep else []
    got = [d for d in deliver(data[:keep], aborted) if d[0] >= offset]
    return got, max(upper, offset)


def fold(records: list[Delivered], state: dict[bytes, bytes] | None = None) -> dict[bytes, bytes]:
    out = dict(state or {})
    for _, key, value in records:
        assert key is not None
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


@dataclass
class Model:
    next_offset: int = 0
    open: dict[int, int] = field(default_factory=dict)  # pid -> first offset
    txn_data: dict[int, list[Delivered]] = field(default_factory=dict)
    committed: list[Delivered] = field(default_factory=list)

    def lso(self) -> int:
        return min(self.open.values(), default=self.next_offset)

    def state(self) -> dict[bytes, bytes]:
        lso = self.lso()
        return fold(sorted(d for d in self.committed if d[0] < lso))


values = st.one_of(st.none(), st.integers(0, 9))
plain = st.tuples(st.just("plain"), st.integers(0, 4), values)
marker = st.tuples(st.just("marker"), st.integers(0, 2), st.booleans())
clean = st.tuples(st.just("clean"), st.sampled_from([0, 10, RETENTION + 1]), st.integers(1, 8))
ops = st.lists(
    st.one_of(
        plain,
        plain,
        st.tuples(st.just("idem"), st.integers(0, 4), values),
        st.tuples(st.just("txn"), st.integers(0, 2), st.integers(0, 4), values),
        marker,
        marker,
        clean,
        clean,
        st.tuples(st.just("poll"), st.integers(50, 400)),
        st.just(("restart",)),
    ),
    min_size=10,
    max_size=60,
)


async def log_bytes(p: Partition, offset: int) -> bytes:
    if offset >= p.high_watermark:
        return b""
    data = await p.read(offset, 1 << 30)
    return b"".join(
        data[pos : pos + h.total_size] for pos, h in iter_batches(data) if h.last_offset >= offset
    )


async def check_markers(p: Partition) -> None:
    data = await p.read(p.log_start_offset, 1 << 30) if p.high_watermark else b""
    aborts = set()
    for pos, h in iter_batches(data):
        records = decode_batch_records(data[pos : pos + h.total_size])
        if h.is_control and records and records[0].key == b"\x00\x00\x00\x00":
            aborts.add((h.producer_id, h.base_offset))
    for a in p.producers.aborted:
        assert (a.producer_id, a.last_offset) in aborts, a


@settings(
    max_examples=int(os.environ.get("KAFKAD_CLEANER_EXAMPLES", "80")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=ops, lose_snapshots=st.booleans(), memory=st.booleans())
async def test_compaction_matches_the_model(
    steps: list[tuple[object, ...]], lose_snapshots: bool, memory: bool
) -> None:
    cfg = LogConfig(
        segment_bytes=250,
        compact=True,
        delete=False,
        delete_retention_ms=RETENTION,
        min_cleanable_dirty_ratio=0.0,
    )
    model = Model()
    seqs = {pid: 0 for pid in (50, 100, 101, 102)}
    now = NOW
    n = 0
    checkpoint: int | None = None
    reader_pos, reader_state, reader_fresh = 0, {}, True
    with tempfile.TemporaryDirectory() as tmp:
        url = "memory://" if memory else f"file://{tmp}"
        store_cm = open_store(url)
        store = await store_cm.__aenter__()
        try:
            p = await open_partition(store, cfg)
            for step in steps:
                kind = step[0]
                if kind in ("plain", "idem", "txn"):
                    pid = {"plain": -1, "idem": 50}.get(kind, 100 + int(step[1]))  # type: ignore[call-overload]
                    key, v = KEYS[int(step[-2])], step[-1]  # type: ignore[call-overload]
                    n += 1
                    value = None if v is None else b"%d:%d" % (n, v)  # type: ignore[str-format]
                    data = build_batch(
                        [Record(0, 0, key, value)],
                        base_timestamp=now,
                        producer_id=pid,
                        producer_epoch=0 if pid >= 0 else -1,
                        base_sequence=seqs[pid] if pid >= 0 else -1,
                        transactional=kind == "txn",
                    )
                    if pid >= 0:
                        seqs[pid] += 1
                    base = await put(p, data)
                    model.next_offset = base + 1
                    if kind == "txn":
                        model.open.setdefault(pid, base)
                        model.txn_data.setdefault(pid, []).append((base, key, value))
                    else:
                        model.committed.append((base, key, value))
                elif kind == "marker":
                    pid, commit = 100 + int(step[1]), bool(step[2])  # type: ignore[call-overload]
                    at = await p.write_marker(pid, 0, commit, 0, now)
                    assert at == model.next_offset
                    model.next_offset += 1
                    model.open.pop(pid, None)
                    data_ = model.txn_data.pop(pid, [])
                    if commit:
                        model.committed.extend(data_)
                elif kind == "clean":
                    jump, entries = int(step[1]), int(step[2])  # type: ignore[call-overload]
                    now += jump
                    if jump > RETENTION:
                        reader_fresh = False
                    lso, hw = p.last_stable_offset, p.high_watermark
                    before = await log_bytes(p, 0)
                    tail = await log_bytes(p, lso)
                    pl = plan(
                        p.log.segment_infos(),
                        cfg,
                        checkpoint=checkpoint,
                        log_start=p.log_start_offset,
                        log_end=hw,
                        last_stable=lso,
                        now_ms=now,
                    )
                    if pl.worth_cleaning(cfg):
                        r = await clean_partition(
                            p, pl, now, max_map_entries=entries, throttle=Throttle(float("inf"))
                        )
                        if r.complete:
                            checkpoint = r.map_end
                        event("a pass removed data" if await log_bytes(p, 0) != before else "no-op")
                        if r.segments_after < r.segments_before:
                            event("segments merged")
                    assert (p.last_stable_offset, p.high_watermark) == (lso, hw)
                    assert await log_bytes(p, lso) == tail
                elif kind == "poll":
                    got, reader_pos = await fetch(p, reader_pos, int(step[1]))  # type: ignore[call-overload]
                    reader_state = fold(got, reader_state)
                else:
                    if memory:
                        continue
                    assert isinstance(store, FileStore)
                    store.abandon()
                    await store_cm.__aexit__(None, None, None)
                    if lose_snapshots:
                        drop_snapshots(Path(tmp, "t-0"))
                    store_cm = open_store(url)
                    store = await store_cm.__aenter__()
                    p = await open_partition(store, cfg)
                    checkpoint = None
                assert p.high_watermark == model.next_offset
                assert p.last_stable_offset == model.lso()
                got, _ = await fetch(p, p.log_start_offset, 1 << 30)
                known = set(model.committed)
                assert all(d in known for d in got), [d for d in got if d not in known]
                assert [d[0] for d in got] == sorted(d[0] for d in got)
                assert fold(got) == model.state()
                await check_markers(p)
                if reader_pos >= p.last_stable_offset:
                    if reader_fresh:
                        assert reader_state == model.state()
                    else:
                        # It lagged while a tombstone horizon passed: Kafka promises such a
                        # reader nothing about the tombstones it missed (delete.retention.ms),
                        # so, as a consumer of a compacted topic must, it starts over.
                        got, _ = await fetch(p, p.log_start_offset, 1 << 30)
                        reader_state = fold(got)
                    reader_fresh = True
        finally:
            await store_cm.__aexit__(None, None, None)
