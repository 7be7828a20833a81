"""An in-process broker (memory store) with its coordinators running, and helpers to produce
transactional batches and complete transactions through the real coordinator."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import trio
from kio.schema.errors import ErrorCode

import proxy.handlers  # noqa: F401  (Broker's metrics name every served API: test_views alone)
from proxy.broker import Broker
from proxy.config import load_config
from storage.backends import open_store
from storage.partition import Partition
from storage.topics import Topic
from wire.records import Record, build_batch, read_batch_header

NOW = 1_700_000_000_000


def make_config(**overrides: str):  # type: ignore[no-untyped-def]
    return load_config(
        listen="127.0.0.1:0",
        advertise=None,
        data_dir="memory://",
        config_file=None,
        overrides=overrides,
        environ={},
    )


@dataclass
class Txn:
    """A transactional producer driven through the coordinator's own API."""

    broker: Broker
    tid: str
    producer_id: int = -1
    epoch: int = -1
    seq: int = 0

    async def init(self, timeout_ms: int = 60_000) -> Txn:
        r = await self.broker.txns.init_producer_id(self.tid, timeout_ms)
        assert r.error is ErrorCode.none, r
        self.producer_id, self.epoch, self.seq = r.producer_id, r.producer_epoch, 0
        return self

    async def send(self, p: Partition, *values: bytes, ts: int = NOW) -> int:
        code = await self.broker.txns.add_partitions(
            self.tid, self.producer_id, self.epoch, [(p.tp.topic, p.tp.partition)]
        )
        assert code is ErrorCode.none, code
        data = build_batch(
            [Record(i, 0, b"k", v) for i, v in enumerate(values)],
            base_timestamp=ts,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=self.seq,
            transactional=True,
        )
        self.seq += len(values)
        got = await p.append(data, read_batch_header(data), ts)
        assert isinstance(got, tuple), got
        return got[0]

    async def end(self, commit: bool) -> None:
        code = await self.broker.txns.end_txn(self.tid, self.producer_id, self.epoch, commit)
        assert code is ErrorCode.none, code
        await self.broker.txns.settle(self.tid)


async def plain(p: Partition, *values: bytes, ts: int = NOW) -> int:
    data = build_batch([Record(i, 0, None, v) for i, v in enumerate(values)], base_timestamp=ts)
    got = await p.append(data, read_batch_header(data), ts)
    assert isinstance(got, tuple), got
    return got[0]


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    async with open_store("memory://") as store:
        b = Broker(make_config(), store)
        await b.start()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(b.txns.run)
            nursery.start_soon(b.groups.run)
            await b.txns.loaded.wait()
            await b.groups.loaded.wait()
            yield b
            nursery.cancel_scope.cancel()


async def topic(b: Broker, name: str, partitions: int = 1, **configs: str) -> list[Partition]:
    t = await b.topics.create(name, partitions, dict(configs))
    assert isinstance(t, Topic), t
    return list(t.partitions)
