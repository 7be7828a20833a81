"""The storage contract: every backend passes the same suite (memory:// and file://)."""

from __future__ import annotations

import uuid

import pytest

from storage.api import LogConfig, PartitionLog, StorageError, Store, TopicMeta, TopicPartition
from tests.storage.conftest import TP0, Clock, append, make_batch, new_log

# -- appends -----------------------------------------------------------------------------


async def test_empty_log(log: PartitionLog) -> None:
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (0, 0, 0)
    assert await log.read(0, 1000) == b""
    with pytest.raises(ValueError):
        await log.read(1, 1000)
    assert await log.find_timestamp(0) is None
    assert await log.max_timestamp() is None


async def test_appends_are_contiguous(log: PartitionLog) -> None:
    batch = make_batch(0, 3)
    await log.append(0, 2, 1002, batch)
    assert log.log_end_offset == 3
    assert log.size_bytes == len(batch)
    for wrong in (9, 2, 0):
        with pytest.raises(ValueError):
            await log.append(wrong, wrong, 1000, make_batch(wrong, 1))
    assert log.log_end_offset == 3
    assert log.size_bytes == len(batch)


async def test_append_refuses_bytes_that_disagree(log: PartitionLog) -> None:
    with pytest.raises(ValueError):
        await log.append(0, 0, 1000, make_batch(5, 1))  # base offset field says 5
    with pytest.raises(ValueError):
        await log.append(0, 0, 1000, b"short")
    with pytest.raises(ValueError):
        await log.append(0, -1, 1000, make_batch(0, 1))
    assert log.log_end_offset == 0


async def test_closed_log_refuses_appends(store: Store) -> None:
    log = await new_log(store)
    await append(log)
    await log.close()
    with pytest.raises(StorageError):
        await append(log)


# -- reads -------------------------------------------------------------------------------


async def test_read_returns_exactly_the_bytes(log: PartitionLog) -> None:
    batches = [await append(log, n, value_size=10 * n) for n in (1, 5, 2, 7)]
    assert await log.read(0, 1 << 20) == b"".join(batches)
    assert await log.read(1, 1 << 20) == b"".join(batches[1:])


async def test_first_batch_is_whole_beyond_max_bytes(log: PartitionLog) -> None:
    big = await append(log, 3, value_size=5000)
    await append(log)
    assert await log.read(0, 10) == big
    assert await log.read(2, 0) == big


async def test_max_bytes_stops_before_the_next_batch(log: PartitionLog) -> None:
    a, b, c = [await append(log, 2, value_size=100) for _ in range(3)]
    assert await log.read(0, len(a) + len(b) - 1) == a
    assert await log.read(0, len(a) + len(b)) == a + b
    assert await log.read(0, len(a) + len(b) + len(c)) == a + b + c
    assert await log.read(2, len(b) + len(c) - 1) == b


async def test_read_from_the_middle_of_a_batch_starts_at_that_batch(log: PartitionLog) -> None:
    first = await append(log, 5)
    second = await append(log, 5)
    for offset in range(5):
        assert await log.read(offset, 1 << 20) == first + second
    for offset in range(5, 10):
        assert await log.read(offset, 1 << 20) == second


async def test_read_at_and_beyond_the_end(log: PartitionLog) -> None:
    await append(log, 3)
    assert await log.read(3, 1 << 20) == b""
    for bad in (4, 100, -1):
        with pytest.raises(ValueError):
            await log.read(bad, 1 << 20)


async def test_multi_batch_append(log: PartitionLog) -> None:
    parts = [
        make_batch(0, 2, timestamp=10),
        make_batch(2, 3, timestamp=50),
        make_batch(5, 1, timestamp=20),
    ]
    await log.append(0, 5, 52, b"".join(parts))
    assert log.log_end_offset == 6
    assert await log.read(3, 1 << 20) == parts[1] + parts[2]
    assert await log.read(5, 1) == parts[2]
    hit = await log.find_timestamp(30)
    assert hit is not None and (hit.batch_base_offset, hit.batch_bytes) == (2, parts[1])
    assert await log.max_timestamp() == (52, 2)


# -- timestamps --------------------------------------------------------------------------


async def test_find_timestamp(log: PartitionLog) -> None:
    batches = [await append(log, 2, timestamp=ts - 1) for ts in (100, 300, 200, 400)]
    cases = {50: 0, 100: 0, 101: 1, 300: 1, 250: 1, 301: 3, 400: 3}
    for target, k in cases.items():
        hit = await log.find_timestamp(target)
        assert hit is not None, target
        assert (hit.batch_base_offset, hit.batch_bytes) == (2 * k, batches[k]), target
    assert await log.find_timestamp(401) is None


async def test_max_timestamp_is_the_first_batch_holding_it(log: PartitionLog) -> None:
    for ts in (100, 400, 200, 400, 300):
        await append(log, 2, timestamp=ts - 1)
    assert await log.max_timestamp() == (400, 2)


# -- deleting ----------------------------------------------------------------------------

ONE_BATCH_SEGMENTS = LogConfig(segment_bytes=200, index_interval_bytes=0)


async def test_delete_before(store: Store) -> None:
    log = await new_log(store, ONE_BATCH_SEGMENTS)
    batches = [await append(log, 2, value_size=100) for _ in range(5)]  # one segment each
    size = len(batches[0])
    await log.delete_before(3)
    assert log.log_start_offset == 3
    assert log.size_bytes == 4 * size  # the segment holding offsets 0-1 went
    assert await log.read(3, 1 << 20) == b"".join(batches[1:])
    for bad in (0, 2):
        with pytest.raises(ValueError):
            await log.read(bad, 1 << 20)
    await log.delete_before(1)  # behind the start: nothing happens
    assert log.log_start_offset == 3
    with pytest.raises(ValueError):
        await log.delete_before(11)
    await log.delete_before(10)  # everything: the active segment stays, empty of live data
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (10, 10, size)
    assert await log.read(10, 1 << 20) == b""
    await append(log)
    assert log.log_end_offset == 11


async def test_find_timestamp_ignores_batches_below_the_start(store: Store) -> None:
    log = await new_log(store)
    await append(log, 2, timestamp=500)
    second = await append(log, 2, timestamp=100)
    await log.delete_before(2)
    hit = await log.find_timestamp(50)
    assert hit is not None and hit.batch_bytes == second


async def test_retention_by_size(store: Store) -> None:
    cfg = LogConfig(segment_bytes=200, retention_bytes=0, index_interval_bytes=0)
    batches = [await append(log := await new_log(store, cfg), 2, value_size=100)]
    batches += [await append(log, 2, value_size=100) for _ in range(4)]
    size = len(batches[0])
    assert log.size_bytes == 5 * size
    cfg2 = LogConfig(segment_bytes=200, retention_bytes=2 * size, index_interval_bytes=0)
    log2 = await new_log(store, cfg2, topic="u")
    for _ in range(5):
        await append(log2, 2, value_size=100)
    assert await log2.apply_retention(0) == 3  # 5 - 3 = 2 segments left, exactly the limit
    assert (log2.log_start_offset, log2.size_bytes) == (6, 2 * size)
    assert await log2.apply_retention(0) == 0
    assert await log.apply_retention(0) == 5  # retention_bytes=0: the active one too
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (10, 10, 0)


async def test_retention_by_time(store: Store, clock: Clock) -> None:
    day = 86_400_000
    cfg = LogConfig(segment_bytes=200, retention_ms=day, index_interval_bytes=0)
    log = await new_log(store, cfg)
    for ts in (1_000, 2_000, 5_000, 2_500, 9_000):
        await append(log, 1, timestamp=ts, value_size=120)
    assert await log.apply_retention(day + 1_000) == 0  # nothing older than a day
    # segments' largest timestamps: 1000, 2000, 5000, 2500, 9000 (active)
    assert await log.apply_retention(day + 2_001) == 2
    assert log.log_start_offset == 2
    # 5000 blocks the 2500 behind it: deletion stops at the first segment still retained
    assert await log.apply_retention(day + 4_000) == 0
    assert await log.apply_retention(day + 6_000) == 2
    assert log.log_start_offset == 4
    assert await log.apply_retention(day + 9_000) == 0
    assert await log.apply_retention(day + 9_001) == 1  # the active segment too (rolled first)
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (5, 5, 0)


async def test_retention_empties_a_quiet_partition(store: Store, clock: Clock) -> None:
    """Issue 23.10: Kafka's deletableSegments considers the active segment (rolling before it
    deletes it), so retention.ms=2000 empties a quiet partition without waiting for segment.ms
    (7 days here); appends then go on at the log end offset."""
    log = await new_log(store, LogConfig(retention_ms=2_000))
    t0 = clock.now
    await append(log, 3, timestamp=t0 - 2)  # max timestamp t0
    assert await log.apply_retention(t0 + 2_000) == 0
    assert await log.apply_retention(t0 + 2_001) == 1
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (3, 3, 0)
    assert [(s.base_offset, s.size) for s in log.segment_infos()] == [(3, 0)]
    assert await log.apply_retention(t0 + 9_000) == 0  # an empty active segment stays
    assert await log.read(3, 100) == b""
    await append(log)
    assert log.log_end_offset == 4 and await log.read(3, 1 << 20) != b""


async def test_retention_rolls_an_expired_active_segment(store: Store, clock: Clock) -> None:
    cfg = LogConfig(segment_ms=1_000, retention_ms=5_000)
    log = await new_log(store, cfg)
    t0 = clock.now
    await append(log, 3, timestamp=t0 - 2)  # max timestamp t0
    await append(log, 3, timestamp=t0 - 2)
    assert await log.apply_retention(t0 + 1_000) == 0  # not yet over segment_ms
    assert await log.apply_retention(t0 + 5_000) == 0  # rolled, but not over retention_ms
    assert await log.apply_retention(t0 + 5_001) == 1
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (6, 6, 0)
    assert await log.read(6, 100) == b""
    await append(log)
    assert log.log_end_offset == 7


async def test_the_idle_roll_ages_segments_by_wall_time_not_record_time(
    store: Store, clock: Clock
) -> None:
    """Retention's roll of an idle active segment (a kafkad addition) compares wall time with
    wall time: batches with old timestamps (a mirrored or replayed topic) must not have their
    segment rolled at every retention check, nor future timestamps keep it from ever rolling.
    Record time against record time stays the append's rule (``should_roll``)."""
    cfg = LogConfig(segment_ms=1_000, retention_ms=-1)
    log = await new_log(store, cfg)
    await append(log, timestamp=clock.now - 10**9)  # a year-old record, appended now
    assert await log.apply_retention(clock.now + 500) == 0
    assert bases(log) == [0]  # not rolled: the segment is half a second old
    assert await log.apply_retention(clock.now + 1_001) == 0
    assert bases(log) == [0, 1]  # now it is over segment.ms
    clock.now += 1_001  # the new segment is created at this wall time
    await append(log, timestamp=clock.now + 10**9)  # far in the future
    assert await log.apply_retention(clock.now + 1_001) == 0
    assert bases(log) == [0, 1, 2]  # rolled all the same


def bases(log: PartitionLog) -> list[int]:
    return [s.base_offset for s in log.segment_infos()]


async def test_segments_roll_by_record_timestamps(store: Store, clock: Clock) -> None:
    """Issue 23.13: Kafka's LogSegment.shouldRoll compares the incoming batch's max timestamp
    with the segment's first batch's, not the wall clock of the first append."""
    log = await new_log(store, LogConfig(segment_ms=1_000))
    await append(log, timestamp=5_000)
    clock.now += 10_000  # wall time does not age a segment whose batches have timestamps
    await append(log, timestamp=6_000)  # exactly segment_ms after the first batch: no roll
    assert bases(log) == [0]
    await append(log, timestamp=6_001)
    assert bases(log) == [0, 2]
    await append(log, timestamp=100)  # an older timestamp ages nothing
    assert bases(log) == [0, 2]


async def test_segments_without_timestamps_roll_by_wall_clock(store: Store, clock: Clock) -> None:
    log = await new_log(store, LogConfig(segment_ms=1_000))
    await append(log, timestamp=-1)  # NO_TIMESTAMP: Kafka ages by the segment's creation
    clock.now += 1_000
    await append(log, timestamp=-1)
    assert bases(log) == [0]
    clock.now += 1
    await append(log, timestamp=-1)
    assert bases(log) == [0, 2]


async def test_flush_and_flush_every_append(store: Store) -> None:
    log = await new_log(store, LogConfig(flush_messages=1))
    first = await append(log)
    second = await append(log, 4)
    await log.flush()
    assert await log.read(0, 1 << 20) == first + second


# -- topics ------------------------------------------------------------------------------


async def test_topics_create_update_delete(store: Store) -> None:
    a = TopicMeta("a", uuid.uuid4(), 2, {"retention.ms": "100"})
    b = TopicMeta("b.x_y-z", uuid.uuid4(), 1)
    await store.create_topic(b)
    await store.create_topic(a)
    assert store.topics() == [a, b]
    with pytest.raises(ValueError):
        await store.create_topic(TopicMeta("a", uuid.uuid4(), 1))
    a2 = TopicMeta("a", a.topic_id, 5, {"retention.ms": "200", "segment.bytes": "1048576"})
    await store.update_topic(a2)
    assert store.topics() == [a2, b]
    with pytest.raises(ValueError):
        await store.update_topic(TopicMeta("nope", uuid.uuid4(), 1))
    with pytest.raises(ValueError):
        await store.update_topic(TopicMeta("a", uuid.uuid4(), 1))  # another topic's id
    await store.delete_topic("b.x_y-z")
    assert store.topics() == [a2]
    with pytest.raises(ValueError):
        await store.delete_topic("b.x_y-z")


async def test_open_partition_needs_the_topic_and_partition(store: Store) -> None:
    with pytest.raises(ValueError):
        await store.open_partition(TP0, LogConfig())
    await store.create_topic(TopicMeta("t", uuid.uuid4(), 2))
    with pytest.raises(ValueError):
        await store.open_partition(TopicPartition("t", 2), LogConfig())
    p1 = await store.open_partition(TopicPartition("t", 1), LogConfig())
    assert await store.open_partition(TopicPartition("t", 1), LogConfig()) is p1


async def test_deleted_topic_comes_back_empty(store: Store) -> None:
    log = await new_log(store)
    await append(log, 3)
    await store.delete_topic("t")
    with pytest.raises(StorageError):
        await append(log)
    with pytest.raises(ValueError):
        await store.open_partition(TP0, LogConfig())
    again = await new_log(store)
    assert (again.log_start_offset, again.log_end_offset, again.size_bytes) == (0, 0, 0)
    assert await again.read(0, 100) == b""
