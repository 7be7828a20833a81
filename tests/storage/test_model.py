"""Property tests: random appends, reads and deletions against a list of batches, on both
backends; and on the file backend a crash at a random point that also loses a random number
of bytes off the tail, after which the log must be a prefix of what was appended."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.api import LogConfig, PartitionLog
from storage.backends import open_store
from storage.segment.store import FileStore
from tests.storage.conftest import TP0, make_batch, new_log

Append = tuple[str, int, int, int]  # ("append", records, value size, timestamp)
Read = tuple[str, float, int]  # ("read", where in the log, max_bytes)
Delete = tuple[str, float]  # ("delete", where in the log)

appends = st.tuples(
    st.just("append"), st.integers(1, 6), st.integers(0, 400), st.integers(0, 10_000)
)
reads = st.tuples(st.just("read"), st.floats(0, 1), st.integers(0, 3_000))
deletes = st.tuples(st.just("delete"), st.floats(0, 1))
ops = st.lists(st.one_of(appends, appends, reads, deletes), max_size=60)
configs = st.builds(
    LogConfig,
    segment_bytes=st.sampled_from([200, 700, 2_500, 1 << 20]),
    index_interval_bytes=st.sampled_from([0, 64, 500, 4096]),
)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass
class Model:
    batches: list[tuple[int, int, bytes]] = field(default_factory=list)  # base, last, bytes
    log_start_offset: int = 0

    @property
    def log_end_offset(self) -> int:
        return self.batches[-1][1] + 1 if self.batches else self.log_start_offset

    def holding(self, offset: int) -> int:
        return next(k for k, (_, last, _) in enumerate(self.batches) if last >= offset)

    def read(self, offset: int, max_bytes: int) -> bytes:
        if offset == self.log_end_offset:
            return b""
        out: list[bytes] = []
        for _, _, data in self.batches[self.holding(offset) :]:
            if out and sum(map(len, out)) + len(data) > max_bytes:
                break
            out.append(data)
        return b"".join(out)


def at(model: Model, where: float) -> int:
    lo, hi = model.log_start_offset, model.log_end_offset
    return lo + round(where * (hi - lo))


async def run(log: PartitionLog, model: Model, steps: list[Append | Read | Delete]) -> None:
    for step in steps:
        if step[0] == "append":
            _, count, size, ts = step  # type: ignore[misc]
            base = log.log_end_offset
            batch = make_batch(base, count, timestamp=ts, value_size=size, fill=base % 251)
            await log.append(base, base + count - 1, ts + count - 1, batch)
            model.batches.append((base, base + count - 1, batch))
        elif step[0] == "read":
            _, where, max_bytes = step  # type: ignore[misc]
            offset = at(model, where)
            assert await log.read(offset, max_bytes) == model.read(offset, max_bytes)
        else:
            offset = at(model, step[1])
            await log.delete_before(offset)
            model.log_start_offset = max(model.log_start_offset, offset)
        assert (log.log_start_offset, log.log_end_offset) == (
            model.log_start_offset,
            model.log_end_offset,
        )


@SETTINGS
@given(backend=st.sampled_from(["memory://", "file://"]), config=configs, steps=ops)
async def test_log_matches_the_model(
    backend: str, config: LogConfig, steps: list[Append | Read | Delete]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = backend + (tmp if backend == "file://" else "")
        model = Model()
        async with open_store(url) as store:
            log = await new_log(store, config)
            await run(log, model, steps)
            lso = log.log_start_offset
            assert await log.read(lso, 1 << 30) == model.read(lso, 1 << 30)
        if backend == "file://":
            async with open_store(url) as store:  # and again after a clean reopen
                log = await store.open_partition(TP0, config)
                assert await log.read(lso, 1 << 30) == model.read(lso, 1 << 30)


def cut_tail(directory: Path, nbytes: int) -> None:
    """Lose ``nbytes`` off the end of the last segment (what never reached the disk)."""
    last = max(directory.glob("*.log"))
    os.truncate(last, max(0, last.stat().st_size - nbytes))


@SETTINGS
@given(
    config=configs,
    steps=ops,
    after=st.lists(appends, max_size=5),
    cut=st.integers(0, 5_000),
)
async def test_a_crash_leaves_a_prefix(
    config: LogConfig, steps: list[Append | Read | Delete], after: list[Append], cut: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        model = Model()
        async with open_store(tmp) as store:
            assert isinstance(store, FileStore)
            await run(await new_log(store, config), model, steps)
            store.abandon()
        cut_tail(Path(tmp, str(TP0)), cut)
        async with open_store(tmp) as store:
            log = await store.open_partition(TP0, config)
            lso, leo = log.log_start_offset, log.log_end_offset
            assert lso == model.log_start_offset
            got = await log.read(lso, 1 << 30)
            first = model.holding(lso) if lso < model.log_end_offset else len(model.batches)
            kept = [b for b in model.batches[first:] if b[1] < leo]
            assert got == b"".join(data for _, _, data in kept)
            assert leo == (kept[-1][1] + 1 if kept else lso)
            model.batches = model.batches[:first] + kept
            if not kept:
                model.batches = []
                model.log_start_offset = lso
            await run(log, model, [*after, ("read", 0.0, 1 << 30)])
            store.abandon()  # crash again, this time losing nothing
        async with open_store(tmp) as store:
            log = await store.open_partition(TP0, config)
            await run(log, model, [("read", 0.0, 1 << 30)])
