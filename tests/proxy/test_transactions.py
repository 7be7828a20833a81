"""Transactions over the wire, partition side and group side: transactional Produce with a test
verifier on the broker (the transaction coordinator is another part), markers written through
``Broker.write_txn_marker``, Fetch read_committed / read_uncommitted, ListOffsets,
TxnOffsetCommit and OffsetFetch RequireStable, and the offsets rebuilt after a restart."""

from __future__ import annotations

import datetime
import importlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v7 import request as lo
from kio.schema.offset_commit.v8 import request as oc
from kio.schema.offset_fetch.v7 import request as of
from kio.schema.produce.v9 import request as pr
from kio.schema.produce.v11 import request as pr11
from kio.schema.txn_offset_commit.v0 import request as toc0
from kio.schema.txn_offset_commit.v3 import request as toc
from kio.schema.txn_offset_commit.v4 import request as toc4

from coordinator.placement import partition_for
from proxy.broker import Broker
from storage.api import TopicPartition
from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_broker_requests import create
from tests.storage.test_transactions import client_deliver
from wire.records import Record, build_batch

E = ErrorCode
MS = datetime.timedelta(milliseconds=1)
TS = 1_700_000_000_000
TXN = "txn-1"
P1, P2 = 1000, 2000


class Verifier:
    """A stand-in for the transaction coordinator's verify_partition."""

    def __init__(self) -> None:
        self.allowed: set[tuple[str, int, int, TopicPartition]] = set()
        self.answer = E.transaction_abortable

    def add(self, pid: int, epoch: int, tp: TopicPartition, txn: str = TXN) -> None:
        self.allowed.add((txn, pid, epoch, tp))

    def __call__(self, txn: str, pid: int, epoch: int, tp: TopicPartition) -> ErrorCode:
        return E.none if (txn, pid, epoch, tp) in self.allowed else self.answer


def install(broker: Broker) -> Verifier:
    v = Verifier()
    broker.txn_verifier = v
    return v


@asynccontextmanager
async def txn_broker(topic: str = "in") -> AsyncIterator[tuple[Broker, RawClient, Verifier]]:
    """A running broker with ``topic`` created and a test verifier installed."""
    async with running_broker() as (server, port), connect(port) as c:
        assert await create(c, topic) == E.none
        yield server.broker, c, install(server.broker)


def tbatch(pid: int, seq: int, n: int = 1, *, epoch: int = 0, ts: int = TS) -> bytes:
    return build_batch(
        [Record(i, 0, None, b"%d-%d" % (pid, seq + i)) for i in range(n)],
        base_timestamp=ts,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )


def plain(ts: int = TS) -> bytes:
    return build_batch([Record(0, 0, None, b"plain")], base_timestamp=ts)


async def produce(
    c: RawClient, topic: str, data: bytes, txn: str | None = TXN, version: int = 9
) -> Any:
    m = pr if version == 9 else pr11
    resp = await c.request(
        m.ProduceRequest(
            transactional_id=txn,
            acks=-1,
            timeout=1000 * MS,
            topic_data=(
                m.TopicProduceData(
                    name=topic,
                    partition_data=(m.PartitionProduceData(index=0, records=data),),
                ),
            ),
        )
    )
    return resp.responses[0].partition_responses[0]


async def fetch(
    c: RawClient,
    topic: str,
    offset: int,
    committed: bool,
    wait_ms: int = 0,
    version: int = 12,
    topic_id: uuid.UUID | None = None,
) -> Any:
    """One partition's answer to a Fetch of ``version`` (v13+: by ``topic_id``)."""
    m = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    named = {"topic_id": topic_id} if version >= 13 else {"topic": topic}
    resp = await c.request(
        m.FetchRequest(
            max_wait=wait_ms * MS,
            min_bytes=1,
            max_bytes=50 * 1024 * 1024,
            isolation_level=1 if committed else 0,
            session_id=0,
            session_epoch=-1,
            topics=(
                m.FetchTopic(
                    **named,
                    partitions=(
                        m.FetchPartition(
                            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
    )
    return resp.responses[0].partitions[0]


def delivered(part: Any) -> list[int]:
    aborted = part.aborted_transactions
    pairs = None if aborted is None else [(a.producer_id, a.first_offset) for a in aborted]
    return client_deliver(part.records or b"", pairs)


async def list_offset(c: RawClient, topic: str, ts: int, committed: bool) -> tuple[int, int]:
    resp = await c.request(
        lo.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=1 if committed else 0,
            topics=(
                lo.ListOffsetsTopic(
                    name=topic,
                    partitions=(
                        lo.ListOffsetsPartition(
                            partition_index=0, current_leader_epoch=-1, timestamp=ts
                        ),
                    ),
                ),
            ),
        )
    )
    p = resp.topics[0].partitions[0]
    assert p.error_code is E.none
    return p.offset, p.timestamp


async def marker(broker: Broker, topic: str, pid: int, commit: bool, epoch: int = 0) -> None:
    code = await broker.write_txn_marker(TopicPartition(topic, 0), pid, epoch, commit, 0)
    assert code is E.none


# -- Produce, Fetch, ListOffsets -------------------------------------------------------------------


async def test_produce_verification_errors() -> None:
    with trio.fail_after(10):
        async with running_broker() as (server, port), connect(port) as c:
            assert await create(c, "v") == E.none
            v = install(server.broker)
            tp = TopicPartition("v", 0)
            # not in the transaction: INVALID_TXN_STATE below v11, TRANSACTION_ABORTABLE from v11
            assert (await produce(c, "v", tbatch(P1, 0))).error_code is E.invalid_txn_state
            r = await produce(c, "v", tbatch(P1, 0), version=11)
            assert r.error_code is E.transaction_abortable
            v.answer = E.producer_fenced
            assert (await produce(c, "v", tbatch(P1, 0))).error_code is E.invalid_producer_epoch
            v.answer = E.concurrent_transactions
            assert (await produce(c, "v", tbatch(P1, 0))).error_code is E.not_enough_replicas
            assert server.broker.topics.partition("v", 0).high_watermark == 0  # type: ignore[union-attr]
            v.add(P1, 0, tp)
            assert (await produce(c, "v", tbatch(P1, 0))).base_offset == 0
            v.allowed.clear()  # later batches of the open transaction need no verification
            assert (await produce(c, "v", tbatch(P1, 1))).base_offset == 1
            # wrong transactional id on the wire: verification is per (txn id, pid, epoch, tp)
            r = await produce(c, "v", tbatch(P2, 0), txn="other")
            assert r.error_code is E.not_enough_replicas  # v.answer is still retriable
            # a marker with an older coordinator epoch, an unknown partition
            b = server.broker
            assert await b.write_txn_marker(tp, P1, 0, True, 0) is E.none
            assert await b.write_txn_marker(tp, P1, 0, True, -1) is (
                E.transaction_coordinator_fenced
            )
            assert await b.write_txn_marker(TopicPartition("nope", 0), P1, 0, True, 0) is (
                E.unknown_topic_or_partition
            )


@pytest.mark.parametrize("version", [12, 18])
async def test_worked_example_over_the_wire(version: int) -> None:
    """Spec §5.8, with Fetch (by name and by topic id) and ListOffsets at both isolation
    levels."""
    with trio.fail_after(10):
        async with running_broker() as (server, port), connect(port) as c:
            assert await create(c, "w") == E.none
            b = server.broker
            v = install(b)
            tp = TopicPartition("w", 0)
            topic = b.topics.get("w")
            assert topic is not None
            by = {"version": version, "topic_id": topic.topic_id}
            v.add(P1, 0, tp)
            v.add(P2, 0, tp)
            assert (await produce(c, "w", plain(TS), txn=None)).base_offset == 0
            assert (await produce(c, "w", tbatch(P1, 0, ts=TS + 1))).base_offset == 1
            assert (await produce(c, "w", tbatch(P1, 1, ts=TS + 2))).base_offset == 2
            assert (await produce(c, "w", tbatch(P2, 0, ts=TS + 3))).base_offset == 3
            await marker(b, "w", P1, commit=False)
            assert (await produce(c, "w", plain(TS + 5), txn=None)).base_offset == 5

            rc = await fetch(c, "w", 0, committed=True, **by)
            assert (rc.high_watermark, rc.last_stable_offset) == (6, 3)
            assert [(a.producer_id, a.first_offset) for a in rc.aborted_transactions] == [(P1, 1)]
            assert delivered(rc) == [0]
            ru = await fetch(c, "w", 0, committed=False, **by)
            assert ru.aborted_transactions is None and ru.last_stable_offset == 3
            assert delivered(ru) == [0, 1, 2, 3, 5]
            # nothing at or above the LSO at read_committed: an empty answer at 3
            at3 = await fetch(c, "w", 3, committed=True, **by)
            assert (at3.records or b"") == b"" and tuple(at3.aborted_transactions) == ()

            assert await list_offset(c, "w", -1, committed=True) == (3, -1)
            assert await list_offset(c, "w", -1, committed=False) == (6, -1)
            assert await list_offset(c, "w", -2, committed=True) == (0, -1)
            # timestamp lookups landing at or above the LSO find nothing at read_committed
            assert await list_offset(c, "w", TS + 1, committed=True) == (1, TS + 1)
            assert await list_offset(c, "w", TS + 3, committed=True) == (-1, -1)
            assert await list_offset(c, "w", TS + 3, committed=False) == (3, TS + 3)
            assert await list_offset(c, "w", -3, committed=True) == (-1, -1)

            await marker(b, "w", P2, commit=True)
            rc = await fetch(c, "w", 3, committed=True, **by)
            assert (rc.high_watermark, rc.last_stable_offset) == (7, 7)
            assert [(a.producer_id, a.first_offset) for a in rc.aborted_transactions] == [(P1, 1)]
            assert delivered(rc) == [3, 5]
            assert await list_offset(c, "w", -1, committed=True) == (7, -1)


@pytest.mark.parametrize("version", [12, 18])
async def test_read_committed_long_poll_wakes_on_the_marker(version: int) -> None:
    with trio.fail_after(20):
        async with running_broker() as (server, port), connect(port) as c:
            assert await create(c, "lp") == E.none
            b = server.broker
            v = install(b)
            v.add(P1, 0, TopicPartition("lp", 0))
            assert (await produce(c, "lp", tbatch(P1, 0, 3))).base_offset == 0
            got: list[Any] = []

            async def poll() -> None:
                topic = b.topics.get("lp")
                assert topic is not None
                got.append(
                    await fetch(
                        c,
                        "lp",
                        0,
                        committed=True,
                        wait_ms=15_000,
                        version=version,
                        topic_id=topic.topic_id,
                    )
                )

            async with trio.open_nursery() as nursery:
                nursery.start_soon(poll)
                await trio.testing.wait_all_tasks_blocked()
                async with connect(port) as c2:  # an append does not move the LSO
                    assert (await produce(c2, "lp", plain(), txn=None)).base_offset == 3
                await trio.testing.wait_all_tasks_blocked()
                assert not got
                await marker(b, "lp", P1, commit=True)
            assert delivered(got[0]) == [0, 1, 2, 3]


# -- TxnOffsetCommit and OffsetFetch ---------------------------------------------------------------


def txn_commit(
    group: str,
    offset: int,
    *,
    pid: int = P1,
    epoch: int = 0,
    generation: int = -1,
    member: str = "",
    topic: str = "in",
    partition: int = 0,
    v4: bool = False,
) -> Any:
    """A TxnOffsetCommit v3 (v4 with ``v4``) of one offset."""
    schema = toc4 if v4 else toc
    return schema.TxnOffsetCommitRequest(
        transactional_id=TXN,
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=generation,
        member_id=member,
        group_instance_id=None,
        topics=(
            schema.TxnOffsetCommitRequestTopic(
                name=topic,
                partitions=(
                    schema.TxnOffsetCommitRequestPartition(
                        partition_index=partition,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata="m",
                    ),
                ),
            ),
        ),
    )


async def txn_code(c: RawClient, req: Any) -> ErrorCode:
    resp = await c.request(req)
    code: ErrorCode = resp.topics[0].partitions[0].error_code
    return code


async def fetch_offset(
    c: RawClient, group: str, stable: bool, all_partitions: bool = False
) -> tuple[int, ErrorCode] | None:
    topics = (
        None if all_partitions else (of.OffsetFetchRequestTopic(name="in", partition_indexes=(0,)),)
    )
    resp = await c.request(
        of.OffsetFetchRequest(group_id=group, topics=topics, require_stable=stable)
    )
    assert resp.error_code is E.none
    if not resp.topics:
        return None
    p = resp.topics[0].partitions[0]
    return p.committed_offset, p.error_code


def commit_request(group: str, topic: str, offsets: dict[int, int]) -> Any:
    """An OffsetCommit v8 of a simple consumer (generation -1)."""
    return oc.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            oc.OffsetCommitRequestTopic(
                name=topic,
                partitions=tuple(
                    oc.OffsetCommitRequestPartition(
                        partition_index=p,
                        committed_offset=o,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                    for p, o in offsets.items()
                ),
            ),
        ),
    )


async def plain_commit(c: RawClient, group: str, offset: int) -> None:
    resp = await c.request(commit_request(group, "in", {0: offset}))
    assert resp.topics[0].partitions[0].error_code is E.none


def offsets_tp(broker: Broker, group: str) -> TopicPartition:
    topic = broker.topics.get("__consumer_offsets")
    n = broker.groups.num_partitions if topic is None else len(topic.partitions)
    return TopicPartition("__consumer_offsets", partition_for(group, n))


async def group_marker(broker: Broker, group: str, pid: int, commit: bool, epoch: int = 0) -> None:
    code = await broker.write_txn_marker(offsets_tp(broker, group), pid, epoch, commit, 0)
    assert code is E.none


def allow_offsets(broker: Broker, v: Verifier, group: str, pid: int = P1) -> None:
    v.add(pid, 0, offsets_tp(broker, group))


async def test_txn_offset_commit_pending_until_the_marker() -> None:
    with trio.fail_after(10):
        async with running_broker() as (server, port), connect(port) as c:
            assert await create(c, "in") == E.none
            b = server.broker
            # a transactional id the coordinator does not know fails verification
            assert await txn_code(c, txn_commit("g", 5)) is E.invalid_producer_id_mapping
            v = install(b)
            # not in the transaction (creates __consumer_offsets on the way)
            assert await txn_code(c, txn_commit("g", 5)) is E.invalid_txn_state
            allow_offsets(b, v, "g")
            assert await txn_code(c, txn_commit("g", 5)) is E.none
            assert await fetch_offset(c, "g", stable=True) == (-1, E.unstable_offset_commit)
            assert await fetch_offset(c, "g", stable=False) == (-1, E.none)
            assert await fetch_offset(c, "g", stable=True, all_partitions=True) is None
            await group_marker(b, "g", P1, commit=True)
            assert await fetch_offset(c, "g", stable=True) == (5, E.none)

            # a later plain OffsetCommit wins over an older pending offset (spec §5.5)
            assert await txn_code(c, txn_commit("g", 7)) is E.none
            assert await fetch_offset(c, "g", stable=True, all_partitions=True) == (
                -1,
                E.unstable_offset_commit,
            )
            await plain_commit(c, "g", 9)
            await group_marker(b, "g", P1, commit=True)
            assert await fetch_offset(c, "g", stable=True) == (9, E.none)
            # abort drops the pending offsets
            assert await txn_code(c, txn_commit("g", 11)) is E.none
            await group_marker(b, "g", P1, commit=False)
            assert await fetch_offset(c, "g", stable=True) == (9, E.none)
            # a marker on another offsets partition leaves the pending offsets alone
            allow_offsets(b, v, "h")
            assert await txn_code(c, txn_commit("h", 3)) is E.none
            other = offsets_tp(b, "h")
            if other != offsets_tp(b, "g"):
                await group_marker(b, "g", P1, commit=True)
                assert await fetch_offset(c, "h", stable=True) == (-1, E.unstable_offset_commit)
            await group_marker(b, "h", P1, commit=True)
            assert await fetch_offset(c, "h", stable=True) == (3, E.none)
            # a stale epoch (the marker moved the producer to epoch 1)
            await group_marker(b, "h", P1, commit=False, epoch=1)
            assert await txn_code(c, txn_commit("h", 4)) is E.invalid_producer_epoch


async def test_txn_offset_commit_kip447_fencing() -> None:
    with trio.fail_after(10):
        async with running_broker() as (server, port), connect(port) as c:
            assert await create(c, "in") == E.none
            b = server.broker
            v = install(b)
            # the transaction is checked before the group (test_txn_offset_commit.py)
            assert await txn_code(c, txn_commit("new", 1, generation=3)) is E.invalid_txn_state
            allow_offsets(b, v, "new")
            assert await txn_code(c, txn_commit("new", 1, generation=3)) is E.illegal_generation
            assert await txn_code(c, txn_commit("", 1)) is E.invalid_group_id
            allow_offsets(b, v, "g")
            assert await txn_code(c, txn_commit("g", 1)) is E.none  # a simple group
            # generation -1 on an Empty group is accepted whatever the member (Kafka does too)
            assert await txn_code(c, txn_commit("g", 1, member="ghost")) is E.none
            assert await txn_code(c, txn_commit("g", 1, generation=2, member="ghost")) is (
                E.unknown_member_id
            )
            unknown = txn_commit("g", 1, topic="nope")
            assert await txn_code(c, unknown) is E.unknown_topic_or_partition
            # v0: no group metadata, no member checks; errors in v0 terms
            v.answer = E.transaction_abortable
            req0 = toc0.TxnOffsetCommitRequest(
                transactional_id=TXN,
                group_id="g2",
                producer_id=P2,
                producer_epoch=0,
                topics=(
                    toc0.TxnOffsetCommitRequestTopic(
                        name="in",
                        partitions=(
                            toc0.TxnOffsetCommitRequestPartition(
                                partition_index=0, committed_offset=4, committed_metadata=None
                            ),
                        ),
                    ),
                ),
            )
            assert await txn_code(c, req0) is E.invalid_txn_state
            allow_offsets(b, v, "g2", P2)
            assert await txn_code(c, req0) is E.none


async def test_transactional_offsets_survive_a_restart(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'data'}"

    def state(b: Broker) -> tuple[Any, Any]:
        o = b.groups.offsets
        return (
            {g: dict(v) for g, v in o.committed.items()},
            {p: {g: dict(x) for g, x in by.items()} for p, by in o.pending.items() if by},
        )

    with trio.fail_after(30):
        async with running_broker(url) as (server, port), connect(port) as c:
            assert await create(c, "in") == E.none
            b = server.broker
            v = install(b)
            allow_offsets(b, v, "g")
            allow_offsets(b, v, "g", P2)
            assert await txn_code(c, txn_commit("g", 5)) is E.none
            await group_marker(b, "g", P1, commit=True)
            assert await txn_code(c, txn_commit("g", 6)) is E.none
            await plain_commit(c, "g", 8)
            await group_marker(b, "g", P1, commit=True)  # plain 8 wins
            assert await txn_code(c, txn_commit("g", 10, pid=P2)) is E.none  # left open
            live = state(b)
            assert live[0]["g"][TopicPartition("in", 0)].offset == 8
            assert set(live[1]) == {P2}
        async with running_broker(url) as (server, port), connect(port) as c:
            b = server.broker
            with trio.fail_after(10):
                await b.groups.loaded.wait()
            assert state(b) == live
            assert await fetch_offset(c, "g", stable=True) == (-1, E.unstable_offset_commit)
            await group_marker(b, "g", P2, commit=True)
            assert await fetch_offset(c, "g", stable=True) == (10, E.none)
            # and the offsets partition's own LSO is right after the restart
            otp = offsets_tp(b, "g")
            part = b.topics.partition(otp.topic, otp.partition)
            assert part is not None and part.last_stable_offset == part.high_watermark


async def test_txn_write_may_wait() -> None:
    """Which partitions the coordinator completes a transaction on inside the EndTxn request:
    only those whose writes wait for nothing but this process's disk writes."""
    with trio.fail_after(10):
        async with running_broker() as (server, port), connect(port) as c:
            assert await create(c, "plain", 2) == E.none
            assert await create(c, "synced", 1, **{"flush.messages": "1"}) == E.none
            b = server.broker
            assert not b.txn_write_may_wait("plain")
            assert not b.txn_write_may_wait("nope")  # answered at once
            assert b.txn_write_may_wait("synced")  # waits for its fsync
            assert b.txn_write_may_wait("__consumer_offsets")
