"""Idempotent produce over the wire: InitProducerId, replayed/skipped/stale batches, restarts,
DescribeProducers, expiration, and the pitfalls of spec eos.md §6.2."""

from __future__ import annotations

import datetime
import importlib
from pathlib import Path
from typing import Any

import pytest
import trio
from kio.schema.describe_producers.v0 import request as dp
from kio.schema.errors import ErrorCode

from coordinator.producer_ids import ProducerIdManager
from storage.backends import open_store
from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_broker_requests import create, produce
from wire.records import Record, build_batch

MS = datetime.timedelta(milliseconds=1)
TS = 1_700_000_000_000
E = ErrorCode
# Kafka's internal topic config for tests: segment.bytes must be at least 1 MiB
SMALL_SEGMENTS = {"internal_segment_bytes": "400"}


def ibatch(pid: int, epoch: int, seq: int, n: int = 1, *, txn: bool = False, tag: int = 0) -> bytes:
    records = [
        Record(
            offset_delta=i, timestamp_delta=i, key=None, value=b"%d-%d" % (tag, seq + i), headers=[]
        )
        for i in range(n)
    ]
    return build_batch(
        records,
        base_timestamp=TS,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=txn,
    )


def init_request(version: int, txn_id: str | None = None, pid: int = -1, epoch: int = -1) -> Any:
    mod = importlib.import_module(f"kio.schema.init_producer_id.v{version}.request")
    kw: dict[str, Any] = {"transactional_id": txn_id, "transaction_timeout": 60_000 * MS}
    if version >= 3:
        kw.update(producer_id=pid, producer_epoch=epoch)
    return mod.InitProducerIdRequest(**kw)


async def init_pid(client: RawClient, version: int = 4) -> int:
    resp = await client.request(init_request(version))
    assert (resp.error_code, resp.producer_epoch) == (E.none, 0)
    return int(resp.producer_id)


async def describe(client: RawClient, topic: str, partition: int = 0) -> Any:
    resp = await client.request(
        dp.DescribeProducersRequest(
            topics=(dp.TopicRequest(name=topic, partition_indexes=(partition,)),)
        )
    )
    return resp.topics[0].partitions[0]


# -- InitProducerId --------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(6))
async def test_init_producer_id_every_version(version: int) -> None:
    with trio.fail_after(10):
        async with running_broker() as (_, port), connect(port) as c:
            ids = [await init_pid(c, version) for _ in range(3)]
            assert len(set(ids)) == 3 and all(i >= 0 for i in ids)


async def test_init_producer_id_errors_and_the_bump_path() -> None:
    with trio.fail_after(10):
        async with running_broker() as (_, port), connect(port) as c:
            for pid, epoch in ((5, -1), (-1, 0)):
                resp = await c.request(init_request(4, pid=pid, epoch=epoch))
                assert resp.error_code == E.invalid_request
            assert (await c.request(init_request(4, txn_id=""))).error_code == E.invalid_request
            resp = await c.request(init_request(0, txn_id="t1"))  # the txn coordinator's
            assert resp.error_code == E.none and resp.producer_epoch == 0
            first = await init_pid(c)
            # KIP-360 bump of an idempotent producer: Kafka answers a fresh id at epoch 0
            bumped = await c.request(init_request(4, pid=first, epoch=0))
            assert bumped.error_code == E.none and bumped.producer_epoch == 0
            assert bumped.producer_id not in (first, -1)


async def test_producer_ids_never_repeat_across_restarts(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'data'}"
    seen: list[int] = []
    for _ in range(3):
        async with open_store(url) as store:
            ids = ProducerIdManager(store, block_size=10)
            await ids.load()
            seen += [await ids.generate_producer_id() for _ in range(4)]
            # no clean shutdown step exists: a crash here loses the rest of the block only
    assert len(set(seen)) == len(seen) == 12
    assert seen == sorted(seen)
    async with running_broker(url) as (_, port), connect(port) as c:
        assert await init_pid(c) > max(seen)


# -- produce ---------------------------------------------------------------------------------


async def test_replay_skip_and_stale_epoch() -> None:
    with trio.fail_after(10):
        async with running_broker() as (_, port), connect(port) as c:
            assert await create(c, "idem") == E.none
            pid = await init_pid(c)
            assert (await produce(c, "idem", b"".join([]) or ibatch(-1, -1, -1))).base_offset == 0
            r0 = await produce(c, "idem", ibatch(pid, 0, 0, 3))
            r1 = await produce(c, "idem", ibatch(pid, 0, 3, 2))
            assert (r0.error_code, r0.base_offset, r1.base_offset) == (E.none, 1, 4)
            # replay: success with the original offset, nothing appended (no "spurious zero")
            again = await produce(c, "idem", ibatch(pid, 0, 0, 3))
            assert (again.error_code, again.base_offset) == (E.none, 1)
            # skip a sequence
            skip = await produce(c, "idem", ibatch(pid, 0, 6, 1))
            assert (skip.error_code, skip.base_offset) == (E.out_of_order_sequence_number, -1)
            nxt = await produce(c, "idem", ibatch(pid, 0, 5, 1))
            assert (nxt.error_code, nxt.base_offset) == (E.none, 6)
            # epoch bump (Java's local bump after OOOS, redpanda#22687): must start at 0
            assert (await produce(c, "idem", ibatch(pid, 1, 6))).error_code == (
                E.out_of_order_sequence_number
            )
            assert (await produce(c, "idem", ibatch(pid, 1, 0))).base_offset == 7
            # stale epoch
            stale = await produce(c, "idem", ibatch(pid, 0, 6, 1))
            assert stale.error_code == E.invalid_producer_epoch
            # an unknown producer is accepted at any sequence (KIP-360)
            assert (await produce(c, "idem", ibatch(pid + 100, 0, 42))).base_offset == 8
            state = await describe(c, "idem")
            got = {
                p.producer_id: (p.producer_epoch, p.last_sequence) for p in state.active_producers
            }
            assert got == {pid: (1, 0), pid + 100: (0, 42)}
            assert all(p.current_txn_start_offset == -1 for p in state.active_producers)


async def test_five_batch_window_and_transactional_refusal() -> None:
    with trio.fail_after(10):
        async with running_broker() as (_, port), connect(port) as c:
            assert await create(c, "win") == E.none
            pid = await init_pid(c)
            for seq in range(6):
                assert (await produce(c, "win", ibatch(pid, 0, seq))).base_offset == seq
            assert (await produce(c, "win", ibatch(pid, 0, 1))).base_offset == 1
            evicted = await produce(c, "win", ibatch(pid, 0, 0))
            assert evicted.error_code == E.out_of_order_sequence_number
            # without a transactional id in the request (Kafka: handleProduceRequest)
            txn = await produce(c, "win", ibatch(pid, 0, 6, txn=True))
            assert txn.error_code == E.transactional_id_authorization_failed
            # with one the coordinator does not know: KIP-890 verification refuses it
            txn = await produce(c, "win", ibatch(pid, 0, 6, txn=True), txn_id="t")
            assert txn.error_code == E.invalid_producer_id_mapping


async def test_describe_producers_unknown_partition() -> None:
    with trio.fail_after(10):
        async with running_broker() as (_, port), connect(port) as c:
            assert (await describe(c, "nope")).error_code == E.unknown_topic_or_partition


async def test_expired_producer_is_forgotten() -> None:
    with trio.fail_after(10):
        async with running_broker() as (server, port), connect(port) as c:
            assert await create(c, "exp") == E.none
            pid = await init_pid(c)
            await produce(c, "exp", ibatch(pid, 0, 0))
            assert server.broker is not None
            assert server.broker.topics.remove_expired_producers(TS + 10, 100) == 0
            assert server.broker.topics.remove_expired_producers(TS + 100, 100) == 1
            assert (await describe(c, "exp")).active_producers == ()
            # forgotten: the next batch is accepted whatever its sequence
            assert (await produce(c, "exp", ibatch(pid, 0, 7))).error_code == E.none


# -- durability ------------------------------------------------------------------------------


@pytest.mark.parametrize("lose_snapshots", [False, True], ids=["snapshot", "replay"])
async def test_dedupe_window_survives_a_restart(tmp_path: Path, lose_snapshots: bool) -> None:
    data = tmp_path / "data"
    url = f"file://{data}"
    with trio.fail_after(20):
        async with running_broker(url) as (_, port), connect(port) as c:
            assert await create(c, "dur", **SMALL_SEGMENTS) == E.none
            pid = await init_pid(c)
            offsets = [
                (await produce(c, "dur", ibatch(pid, 0, s * 2, 2))).base_offset for s in range(8)
            ]
            assert offsets == list(range(0, 16, 2))
        snapshots = sorted((data / "dur-0").glob("*.snapshot"))
        assert snapshots, "a roll and the clean shutdown both write a snapshot"
        assert snapshots[-1].name == f"{16:020d}.snapshot"
        if lose_snapshots:  # as after a crash before any snapshot: rebuilt from the log alone
            for s in snapshots:
                s.unlink()
        async with running_broker(url) as (_, port), connect(port) as c:
            for s in range(3, 8):  # the last 5 batches are still known, at their offsets
                r = await produce(c, "dur", ibatch(pid, 0, s * 2, 2))
                assert (r.error_code, r.base_offset) == (E.none, s * 2)
            assert (await produce(c, "dur", ibatch(pid, 0, 4, 2))).error_code == (
                E.out_of_order_sequence_number
            )
            assert (await produce(c, "dur", ibatch(pid, 0, 16, 1))).base_offset == 16
            assert await init_pid(c) > pid


async def test_corrupt_or_future_snapshots_are_skipped(tmp_path: Path) -> None:
    data = tmp_path / "data"
    url = f"file://{data}"
    with trio.fail_after(20):
        async with running_broker(url) as (_, port), connect(port) as c:
            assert await create(c, "bad") == E.none
            pid = await init_pid(c)
            for s in range(3):
                await produce(c, "bad", ibatch(pid, 0, s))
        part = data / "bad-0"
        (part / f"{3:020d}.snapshot").write_bytes(b"garbage")
        (part / f"{99:020d}.snapshot").write_bytes(b"beyond the log end")
        async with running_broker(url) as (_, port), connect(port) as c:
            assert (await produce(c, "bad", ibatch(pid, 0, 2))).base_offset == 2
            assert (await produce(c, "bad", ibatch(pid, 0, 3))).base_offset == 3
        assert not (part / f"{99:020d}.snapshot").exists()
