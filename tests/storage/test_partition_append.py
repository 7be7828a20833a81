"""``Partition.append`` writes the client's batch with only its base offset and partition leader
epoch changed (and, on a LogAppendTime topic, what ``set_max_timestamp`` re-signs): the bytes
in the log equal the general rewrite's (copy, ``set_base_offset``, ``set_partition_leader_epoch``,
``set_max_timestamp``) for random batches."""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import pytest

from storage.api import LogConfig, TopicMeta
from storage.backends import open_store
from storage.partition import LEADER_EPOCH, Partition
from tests.storage.test_transactions import TP
from wire.records import (
    Record,
    build_batch,
    iter_batches,
    read_batch_header,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)

NOW = 1_700_000_000_000


def rewritten(data: bytes, base: int, log_append_time: bool) -> bytes:
    """The general path: every field the broker changes, written into a copy."""
    buf = bytearray(data)
    set_base_offset(buf, 0, base)
    set_partition_leader_epoch(buf, 0, LEADER_EPOCH)
    if log_append_time:
        set_max_timestamp(buf, NOW, log_append_time=True)
    return bytes(buf)


def random_batch(rng: random.Random, pid: int) -> bytes:
    """Without a producer id, or with ``pid`` (a new producer: any sequence is accepted)."""
    n = rng.randrange(1, 6)
    pid = rng.choice([-1, -1, pid])
    return build_batch(
        [
            Record(i, rng.randrange(0, 1000), rng.randbytes(rng.randrange(0, 9)) or None, b"v")
            for i in range(n)
        ],
        base_offset=rng.choice([0, 7, 2**40]),  # what the client sent: overwritten
        base_timestamp=rng.randrange(-1, 2**41),
        compression=rng.choice([0, 0, 1]),
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=rng.randrange(0, 2**31) if pid >= 0 else -1,
        partition_leader_epoch=rng.choice([-1, 0, 5, 2**31 - 1]),
        log_append_time=rng.random() < 0.2,
    )


@pytest.mark.parametrize("log_append_time", [False, True], ids=["CreateTime", "LogAppendTime"])
async def test_the_bytes_written_equal_the_general_rewrite(
    tmp_path: Path, log_append_time: bool
) -> None:
    rng = random.Random(7 + log_append_time)
    async with open_store(f"file://{tmp_path / 'data'}") as store:
        await store.create_topic(TopicMeta("t", uuid.uuid4(), 1))
        cfg = LogConfig()
        log = await store.open_partition(TP, cfg)
        p = Partition(TP, uuid.uuid4(), log, cfg, log_append_time=log_append_time)
        expected = []
        for i in range(400):
            data = random_batch(rng, pid=1000 + i)
            base = p.log.log_end_offset
            got = await p.append(data, read_batch_header(data), NOW)
            assert got == (base, NOW if log_append_time else -1)
            expected.append(rewritten(data, base, log_append_time))
        stored = await p.read(0, 10**8)
        assert [stored[pos : pos + h.total_size] for pos, h in iter_batches(stored)] == expected
