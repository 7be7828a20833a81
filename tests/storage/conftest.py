"""Shared helpers for the storage tests: a tiny v2 batch builder, a settable clock, fixtures.

The builder is local on purpose (``wire`` is being extended at the same time); it makes valid
batches (CRC-32C over attributes..end) with small uncompressed records.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import crc32c
import pytest

from storage.api import LogConfig, PartitionLog, Store, TopicMeta, TopicPartition
from storage.backends import open_store

_HEADER = struct.Struct(">qiiBIhiqqqhii")


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _record(offset_delta: int, ts_delta: int, value: bytes) -> bytes:
    body = (
        b"\x00"
        + _varint(ts_delta)
        + _varint(offset_delta)
        + _varint(-1)
        + _varint(len(value))
        + value
        + _varint(0)
    )
    return _varint(len(body)) + body


def make_batch(
    base: int,
    count: int = 1,
    *,
    timestamp: int = 1_000,
    max_timestamp: int | None = None,
    value_size: int = 16,
    fill: int = 0x61,
) -> bytes:
    """A valid v2 batch of ``count`` records with offsets base..base+count-1. Records have
    ``timestamp``, the last one ``max_timestamp`` (default: ``timestamp + count - 1``)."""
    top = timestamp + count - 1 if max_timestamp is None else max_timestamp
    value = bytes([fill]) * value_size
    records = b"".join(
        _record(i, top - timestamp if i == count - 1 else 0, value) for i in range(count)
    )
    length = _HEADER.size - 12 + len(records)
    header = bytearray(
        _HEADER.pack(base, length, 0, 2, 0, 0, count - 1, timestamp, top, -1, -1, -1, count)
    )
    body = header + records
    struct.pack_into(">I", body, 17, crc32c.crc32c(bytes(body[21:])))
    return bytes(body)


def batch_max_ts(batch: bytes) -> int:
    return int(struct.unpack_from(">q", batch, 35)[0])


def batch_last(batch: bytes) -> int:
    base, delta = struct.unpack_from(">q", batch, 0)[0], struct.unpack_from(">i", batch, 23)[0]
    return int(base + delta)


async def append(log: PartitionLog, count: int = 1, **kw: int) -> bytes:
    """Build and append the next batch; returns its bytes."""
    base = log.log_end_offset
    batch = make_batch(base, count, **kw)
    await log.append(base, base + count - 1, batch_max_ts(batch), batch)
    return batch


class Clock:
    """A settable millisecond clock for segment ages (no sleeping)."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


BACKENDS = {"memory": "memory://", "file": "file://{tmp}"}
TP0 = TopicPartition("t", 0)


@pytest.fixture(params=list(BACKENDS.values()), ids=list(BACKENDS))
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(request.param).format(tmp=tmp_path / "data")


@pytest.fixture
def file_url(tmp_path: Path) -> str:
    return f"file://{tmp_path / 'data'}"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def store(url: str, clock: Clock) -> AsyncIterator[Store]:
    async with open_store(url, clock=clock) as s:
        yield s


async def new_log(store: Store, config: LogConfig | None = None, topic: str = "t") -> PartitionLog:
    if topic not in {m.name for m in store.topics()}:
        await store.create_topic(TopicMeta(topic, uuid.uuid4(), 1))
    return await store.open_partition(TopicPartition(topic, 0), config or LogConfig())


@pytest.fixture
async def log(store: Store) -> PartitionLog:
    return await new_log(store)
