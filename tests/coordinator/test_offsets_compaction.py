"""__consumer_offsets is compacted: after many commits and a cleaning pass, a restart replays
about one record per key (plus the active segment) and finds the same committed offsets. The
full-size run (1,000,000 commits, timed) is ``python -m tests.coordinator.offsets_restart``."""

from __future__ import annotations

import uuid
from pathlib import Path

from coordinator.group.offsets import CommitRequest
from coordinator.group.offsets_log import OFFSETS_TOPIC
from storage.api import TopicMeta, TopicPartition
from storage.backends import open_store
from tests.coordinator.offsets_restart import GROUPS, PARTITIONS, broker_at, run


async def test_restart_after_cleaning_replays_one_record_per_key(tmp_path: Path) -> None:
    m = await run(f"file://{tmp_path}", 20_000, segment_bytes=16 * 1024)
    assert m.log_bytes_after < m.log_bytes_before / 3
    keys = GROUPS * PARTITIONS
    active_max = 16 * 1024 // 40 * 50  # at most a 16 KiB active segment per partition
    assert m.records_after <= keys + active_max
    assert m.records_after < m.commits / 5


async def test_internal_topics_are_compacted(tmp_path: Path) -> None:
    tp = TopicPartition("in", 0)
    async with broker_at(f"file://{tmp_path}") as broker:
        await broker.groups.commit_offsets("g", "", None, -1, [CommitRequest(tp, 5, -1, None)])
        topic = broker.topics.get(OFFSETS_TOPIC)
        assert topic is not None
        assert topic.settings["cleanup.policy"] == "compact"
        assert all(p.config.compact and not p.config.delete for p in topic.partitions)


async def test_internal_topics_of_an_older_data_dir_become_compacted(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    async with open_store(url) as store:  # as the broker created them before the cleaner
        old = {"retention.ms": "-1", "retention.bytes": "-1", "segment.bytes": "104857600"}
        await store.create_topic(TopicMeta(OFFSETS_TOPIC, uuid.uuid4(), 2, old))
    async with broker_at(url) as broker:
        topic = broker.topics.get(OFFSETS_TOPIC)
        assert topic is not None
        assert topic.meta.configs == {**old, "cleanup.policy": "compact"}
        assert all(p.config.compact and not p.config.delete for p in topic.partitions)
    async with open_store(url) as store:
        assert dict(store.topics()[0].configs)["cleanup.policy"] == "compact"
