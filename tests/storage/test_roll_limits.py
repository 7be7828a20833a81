"""``log_policy.roll_limits``: ``should_roll`` solved once per segment, and the file log's quick
check built on it (``FileLog.append`` asks ``should_roll`` only past a limit). Both must give
``should_roll``'s answer for every append."""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from storage.api import LogConfig
from storage.log_policy import (
    OFFSET_INDEX_ENTRY,
    REL_OFFSET_MAX,
    TIME_INDEX_ENTRY,
    roll_limits,
    should_roll,
)
from storage.segment.log import FileLog
from tests.storage.conftest import Clock, append, batch_max_ts, make_batch
from tests.storage.test_file_backend import open_log, opened

_NEAR = st.integers(-3, 3)  # a few values each side of a bound


@given(
    segment_bytes=st.integers(1, 2**33),
    segment_ms=st.integers(0, 2**40),
    index_bytes=st.integers(0, 200),
    seg_base=st.integers(0, 2**40),
    seg_size=st.integers(1, 2**33),
    add_bytes=st.integers(61, 2**20),
    rel_last=st.one_of(st.integers(0, 2**32), _NEAR.map(lambda d: REL_OFFSET_MAX + d)),
    first_ts=st.one_of(st.none(), st.integers(-1, 2**41)),
    age=st.integers(-(2**20), 2**41),
    age_at_segment_ms=st.booleans(),
    near=_NEAR,
    wall_age=st.integers(-(2**20), 2**41),
    offset_entries=st.integers(0, 30),
    time_entries=st.integers(0, 30),
)
def test_an_append_inside_the_limits_never_rolls_and_past_one_it_does(
    segment_bytes: int,
    segment_ms: int,
    index_bytes: int,
    seg_base: int,
    seg_size: int,
    add_bytes: int,
    rel_last: int,
    first_ts: int | None,
    age: int,
    age_at_segment_ms: bool,
    near: int,
    wall_age: int,
    offset_entries: int,
    time_entries: int,
) -> None:
    cfg = LogConfig(
        segment_bytes=segment_bytes, segment_ms=segment_ms, segment_index_bytes=index_bytes
    )
    if age_at_segment_ms:
        age = segment_ms + near
    base_ts = 0 if first_ts is None or first_ts < 0 else first_ts
    max_ts, created, now = base_ts + age, 10**12, 10**12 + wall_age
    rolls = should_roll(
        cfg,
        seg_size=seg_size,
        seg_base=seg_base,
        add_bytes=add_bytes,
        last_offset=seg_base + rel_last,
        max_timestamp=max_ts,
        first_batch_ts=first_ts,
        created_ms=created,
        now_ms=now,
        offset_entries=offset_entries,
        time_entries=time_entries,
    )
    limits = roll_limits(cfg, seg_base, first_ts)
    past = (
        seg_size + add_bytes > limits.max_size
        or seg_base + rel_last > limits.max_last_offset
        or max_ts > limits.max_timestamp
        or offset_entries * OFFSET_INDEX_ENTRY > limits.max_offset_index
        or time_entries * TIME_INDEX_ENTRY > limits.max_time_index
    )
    assert past or not rolls  # inside every limit: no roll, whatever the clock says
    if first_ts is not None and first_ts >= 0:
        assert past == rolls  # exact when the age is record time


async def test_the_file_log_rolls_exactly_when_should_roll_says(tmp_path: Path) -> None:
    """Random appends through ``FileLog.append`` (sizes, record timestamps with and without
    timestamps, wall time, last offsets near the int32 relative limit, config changes, a
    reopen): before each one ``should_roll`` is asked with the log's state, and the log rolls
    exactly when it says so. Every rule fires along the way."""
    rng = random.Random(20261127)
    clock = Clock()
    root = tmp_path / "data"
    configs = [
        LogConfig(segment_bytes=3_000, segment_ms=5_000, segment_index_bytes=10**6),
        LogConfig(segment_bytes=1_500, segment_ms=60_000, segment_index_bytes=10**6),
        LogConfig(
            segment_bytes=10**6, segment_ms=10**6, segment_index_bytes=40, index_interval_bytes=0
        ),
        LogConfig(segment_bytes=10**6, segment_ms=10**6, segment_index_bytes=10**6),
    ]
    fired = dict.fromkeys(["size", "age", "offset", "index"], 0)
    ts = 1_000
    for run in range(2):  # the second run reopens the log: its limits come from the open
        async with opened(root, clock) as store:
            log = await open_log(store, configs[0])
            for _ in range(700):
                if rng.random() < 0.02:
                    log.update_config(rng.choice(configs))
                clock.now += rng.choice([0, 1, 2_500, 70_000])
                seg, base, cfg = log.segments[-1], log.log_end_offset, log.config
                count = rng.choice([1, 1, 2, 5])
                if rng.random() < 0.1:
                    batch_ts = -1
                else:
                    ts += rng.choice([0, 1, 2_000, cfg.segment_ms - 1, cfg.segment_ms, -5])
                    batch_ts = ts
                data = make_batch(
                    base, count, timestamp=batch_ts, max_timestamp=batch_ts,
                    value_size=rng.randrange(0, 400),
                )  # fmt: skip
                last = base + count - 1
                if rng.random() < 0.03:  # the last offset right at the int32 relative limit
                    last = max(last, seg.base + REL_OFFSET_MAX + rng.choice([-1, 0, 1]))
                max_ts = batch_max_ts(data)
                rule = {
                    "size": seg.size + len(data) > cfg.segment_bytes,
                    "age": seg.first_batch_ts is not None
                    and seg.first_batch_ts >= 0
                    and max_ts - seg.first_batch_ts > cfg.segment_ms,
                    "offset": last - seg.base > REL_OFFSET_MAX,
                    "index": (len(seg.offsets()) + 1) * OFFSET_INDEX_ENTRY
                    > cfg.segment_index_bytes,
                }
                expected = bool(seg.size) and should_roll(
                    cfg,
                    seg_size=seg.size,
                    seg_base=seg.base,
                    add_bytes=len(data),
                    last_offset=last,
                    max_timestamp=max_ts,
                    first_batch_ts=seg.first_batch_ts,
                    created_ms=seg.created_ms,
                    now_ms=clock.now,
                    offset_entries=len(seg.offsets()),
                    time_entries=len(seg.times()),
                )
                await log.append(base, last, max_ts, data)
                assert (log.segments[-1] is not seg) == expected, (run, base, rule)
                for name, hit in rule.items():
                    fired[name] += expected and hit and bool(seg.size)
    assert min(fired.values()) >= 3, fired


async def test_a_config_change_moves_the_limits_at_once(tmp_path: Path) -> None:
    async with opened(tmp_path / "data") as store:
        log = await open_log(store, LogConfig(segment_bytes=10**6))
        await append(log)
        await append(log)
        log.update_config(LogConfig(segment_bytes=len(make_batch(0)) * 2))
        await append(log)  # 3 batches do not fit in 2 batches' bytes
        assert [s.base for s in log.segments] == [0, 2]


async def test_a_reopened_log_takes_its_limits_from_the_open(tmp_path: Path) -> None:
    root = tmp_path / "data"
    async with opened(root) as store:
        log = await open_log(store, LogConfig(segment_bytes=10**6))
        await append(log)
        await append(log)
    async with opened(root) as store:
        log = await open_log(store, LogConfig(segment_bytes=len(make_batch(0)) * 2))
        assert isinstance(log, FileLog)
        await append(log)
        assert [s.base for s in log.segments] == [0, 2]


async def test_the_relative_offset_limit_is_exact(tmp_path: Path) -> None:
    """Kafka's ``canConvertToRelativeOffset``: a last offset ``2**31 - 1`` past the segment's
    base still fits, one more rolls."""
    async with opened(tmp_path / "data") as store:
        log = await open_log(store, LogConfig())
        await append(log)
        data = make_batch(1)
        await log.append(1, REL_OFFSET_MAX, batch_max_ts(data), data)
        assert len(log.segments) == 1
        data = make_batch(REL_OFFSET_MAX + 1)
        await log.append(REL_OFFSET_MAX + 1, REL_OFFSET_MAX + 1, batch_max_ts(data), data)
        assert [s.base for s in log.segments] == [0, REL_OFFSET_MAX + 1]
