"""Storage contract, continued: producer-state snapshots, the active segment base, and the
store's metadata blobs (both backends)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from storage.api import LogConfig, PartitionLog, Store, TopicMeta, TopicPartition
from storage.backends import open_store
from tests.storage.conftest import TP0, append, new_log


async def test_active_segment_base_moves_on_roll(store: Store) -> None:
    log = await new_log(store, LogConfig(segment_bytes=300))
    assert log.active_segment_base == 0
    await append(log, 2, value_size=100)
    assert log.active_segment_base == 0
    await append(log, 2, value_size=100)  # does not fit: a new segment starts at offset 2
    assert log.active_segment_base == 2


async def test_snapshots_round_trip(log: PartitionLog) -> None:
    assert await log.producer_snapshots() == []
    assert await log.read_producer_snapshot(0) is None
    await log.write_producer_snapshot(7, b"seven")
    await log.write_producer_snapshot(3, b"three")
    await log.write_producer_snapshot(7, b"seven again")
    assert await log.producer_snapshots() == [3, 7]
    assert await log.read_producer_snapshot(7) == b"seven again"
    await log.delete_producer_snapshot(3)
    await log.delete_producer_snapshot(99)  # no-op
    assert await log.producer_snapshots() == [7]


async def test_snapshots_survive_close_and_reopen(store: Store) -> None:
    log = await new_log(store)
    await append(log)
    await log.write_producer_snapshot(1, b"s1")
    await log.close()
    again = await store.open_partition(TP0, LogConfig())
    assert await again.producer_snapshots() == [1]
    assert await again.read_producer_snapshot(1) == b"s1"


async def test_deleted_topic_loses_its_snapshots(store: Store) -> None:
    log = await new_log(store)
    await log.write_producer_snapshot(0, b"x")
    await store.delete_topic("t")
    await store.create_topic(TopicMeta("t", uuid.uuid4(), 1))
    fresh = await store.open_partition(TopicPartition("t", 0), LogConfig())
    assert await fresh.producer_snapshots() == []


async def test_metadata_blobs(store: Store) -> None:
    assert await store.read_metadata("producer-ids") is None
    await store.write_metadata("producer-ids", b"a")
    await store.write_metadata("producer-ids", b"bb")
    assert await store.read_metadata("producer-ids") == b"bb"
    for bad in ("", "..", "a/b", "UP"):
        with pytest.raises(ValueError):
            await store.write_metadata(bad, b"x")


async def test_file_metadata_and_snapshots_survive_a_new_store(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'data'}"
    async with open_store(url) as store:
        await store.write_metadata("producer-ids", b"hwm")
        log = await new_log(store)
        await log.write_producer_snapshot(0, b"snap")
    async with open_store(url) as store:
        assert await store.read_metadata("producer-ids") == b"hwm"
        log = await store.open_partition(TP0, LogConfig())
        assert await log.read_producer_snapshot(0) == b"snap"
