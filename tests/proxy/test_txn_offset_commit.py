"""TxnOffsetCommit as Kafka 4.x answers it (issue 21): a deleted group's pending transactional
offsets stay deleted across compaction and a restart, and the commit's checks run in Kafka's
order (transaction verification first, group checks after, a simple group only when accepted)
with Kafka's error codes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from kio.schema.delete_groups.v2 import request as dg
from kio.schema.errors import ErrorCode
from kio.schema.offset_delete.v0 import request as od

from coordinator.group.offsets_log import OFFSETS_TOPIC
from coordinator.group.records import decode_key
from proxy.broker import Broker
from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_broker_requests import create
from tests.proxy.test_transactions import (
    P1,
    allow_offsets,
    fetch_offset,
    group_marker,
    install,
    plain_commit,
    txn_broker,
    txn_code,
    txn_commit,
)
from wire.batch import ATTR_CONTROL, iter_batches
from wire.record_scan import key_values

E = ErrorCode

COMPACTING = {
    "offsets.topic.num.partitions": "1",
    "offsets.topic.segment.bytes": str(16 * 1024),
    "log.cleaner.enable": "false",  # the test runs the passes itself
    "log.cleaner.delete.retention.ms": "0",
    "log.cleaner.min.cleanable.ratio": "0",
}


async def delete_group(c: RawClient, group: str) -> ErrorCode:
    resp = await c.request(dg.DeleteGroupsRequest(groups_names=(group,)))
    code: ErrorCode = resp.results[0].error_code
    return code


async def clean_everything(b: Broker) -> None:
    """Cleaning passes until none is worth running (tombstones go in the second one)."""
    for _ in range(4):
        plans = b.cleaner.plans(b.topics, b.now_ms())
        for p, pl in plans:
            await b.cleaner.clean_partition(p, pl, b.now_ms())


async def offsets_records_of(b: Broker, group: str) -> int:
    """Records left about ``group`` in ``__consumer_offsets``."""
    p = b.topics.get(OFFSETS_TOPIC).partitions[0]  # type: ignore[union-attr]
    data = await p.read(p.log_start_offset, 1 << 30)
    return sum(
        1
        for pos, h in iter_batches(data)
        if not h.attributes & ATTR_CONTROL
        for _, k, _ in key_values(data[pos : pos + h.total_size])
        if k is not None and decode_key(k).group == group
    )


def listed(b: Broker) -> set[str]:
    groups = b.groups.list_groups()
    assert not isinstance(groups, ErrorCode)
    return {g.group_id for g in groups}


async def test_deleted_group_pending_offsets_stay_deleted_after_compaction_and_restart(
    tmp_path: Path,
) -> None:
    url = f"file://{tmp_path / 'data'}"
    with trio.fail_after(60):
        async with running_broker(url, **COMPACTING) as (server, port), connect(port) as c:
            assert await create(c, "in") == E.none
            b = server.broker
            allow_offsets(b, install(b), "g")
            assert await txn_code(c, txn_commit("g", 42)) is E.none
            assert await delete_group(c, "g") is E.none
            await group_marker(b, "g", P1, commit=True)
            assert await fetch_offset(c, "g", stable=True) == (-1, E.none)
            assert "g" not in listed(b)
            for _ in range(2):  # 2nd: the tombstones' delete horizon has passed
                for i in range(400):  # roll the offsets partition well past the deletion
                    await plain_commit(c, "pad", i)
                await clean_everything(b)
        async with running_broker(url, **COMPACTING) as (server, port), connect(port) as c:
            b = server.broker
            await b.groups.loaded.wait()
            assert await fetch_offset(c, "g", stable=True) == (-1, E.none)
            assert "g" not in listed(b)
            assert "pad" in listed(b)
            assert await offsets_records_of(b, "g") == 0


def txn_commit_v4(group: str, generation: int, pid: int = P1) -> Any:
    member = "m" if generation >= 0 else ""
    return txn_commit(group, 1, pid=pid, generation=generation, member=member, v4=True)


async def test_transaction_checked_before_the_group_and_refusals_create_nothing() -> None:
    with trio.fail_after(10):
        async with txn_broker() as (b, c, v):
            # AddOffsetsToTxn missing: refused before any group check, nothing created
            assert await txn_code(c, txn_commit("simple", 1)) is E.invalid_txn_state
            assert await txn_code(c, txn_commit_v4("simple", -1)) is E.transaction_abortable
            assert "simple" not in listed(b)
            # an unknown group with a generation: v3 INVALID_TXN_STATE, v4 TRANSACTION_ABORTABLE
            assert await txn_code(c, txn_commit("ghost", 1, generation=2)) is E.invalid_txn_state
            assert await txn_code(c, txn_commit_v4("ghost", 2)) is E.transaction_abortable
            assert "ghost" not in listed(b)
            # once in the transaction: the group checks, and a simple group when accepted
            allow_offsets(b, v, "ghost")
            assert await txn_code(c, txn_commit_v4("ghost", 2)) is E.illegal_generation
            assert "ghost" not in listed(b)
            assert await txn_code(c, txn_commit_v4("ghost", -1)) is E.none
            assert "ghost" in listed(b)


async def test_zombie_producer_is_fenced_not_told_illegal_generation() -> None:
    with trio.fail_after(10):
        async with txn_broker() as (b, c, v):
            allow_offsets(b, v, "g")
            assert await txn_code(c, txn_commit("g", 1)) is E.none  # group "g" exists now
            # the transaction coordinator bumped the epoch: the zombie's stale generation and
            # member do not matter, it must stop (fatal), not abort and retry
            v.answer = E.producer_fenced
            zombie = txn_commit("g", 2, epoch=0, pid=P1 + 1, generation=7, member="old")
            assert await txn_code(c, zombie) is E.invalid_producer_epoch
            assert await txn_code(c, txn_commit_v4("g", 7, pid=P1 + 1)) is E.invalid_producer_epoch
            assert await txn_code(c, txn_commit_v4("nogroup", 7, pid=P1 + 1)) is (
                E.invalid_producer_epoch
            )


async def test_transaction_check_errors_come_back_unchanged() -> None:
    with trio.fail_after(10):
        async with txn_broker() as (b, c, v):
            for code, answer in [
                (E.concurrent_transactions, E.concurrent_transactions),
                (E.coordinator_load_in_progress, E.coordinator_load_in_progress),
                (E.not_coordinator, E.not_coordinator),
                (E.invalid_producer_id_mapping, E.invalid_producer_id_mapping),
                (E.network_exception, E.coordinator_load_in_progress),
            ]:
                v.answer = code
                assert await txn_code(c, txn_commit("g", 1, generation=3)) is answer, code
                assert await txn_code(c, txn_commit_v4("g", -1)) is answer, code
            assert "g" not in listed(b)


async def test_group_with_only_pending_offsets_exists_after_a_restart(tmp_path: Path) -> None:
    """Kafka's replay of a transactional offset record creates the simple group: after a
    restart the group is listed and DeleteGroups tombstones its pending offsets, so the
    transaction's COMMIT marker brings nothing back (review of issue 21.1: the group was
    missing after the restart, DeleteGroups answered GROUP_ID_NOT_FOUND and the offsets came
    back with the marker)."""
    url = f"file://{tmp_path / 'data'}"
    with trio.fail_after(60):
        async with running_broker(url) as (server, port), connect(port) as c:
            assert await create(c, "in") == E.none
            allow_offsets(server.broker, install(server.broker), "g")
            assert await txn_code(c, txn_commit("g", 42)) is E.none
            assert "g" in listed(server.broker)
        async with running_broker(url) as (server, port), connect(port) as c:
            b = server.broker
            await b.groups.loaded.wait()
            assert "g" in listed(b)
            assert await fetch_offset(c, "g", stable=True) == (-1, E.unstable_offset_commit)
            assert await delete_group(c, "g") is E.none
            await group_marker(b, "g", P1, commit=True)
            assert await fetch_offset(c, "g", stable=True) == (-1, E.none)


async def test_offset_delete_of_a_partition_with_only_a_pending_offset() -> None:
    """OffsetDelete tombstones a partition that has only a pending transactional offset, as
    Kafka's deleteOffsets does (committed or pending), so the transaction's COMMIT marker
    does not bring the deleted offset back (review: only committed offsets got a tombstone)."""
    with trio.fail_after(10):
        async with running_broker() as (server, port), connect(port) as c:
            assert await create(c, "in") == E.none
            allow_offsets(server.broker, install(server.broker), "g")
            assert await txn_code(c, txn_commit("g", 42)) is E.none
            resp = await c.request(
                od.OffsetDeleteRequest(
                    group_id="g",
                    topics=(
                        od.OffsetDeleteRequestTopic(
                            name="in",
                            partitions=(od.OffsetDeleteRequestPartition(partition_index=0),),
                        ),
                    ),
                )
            )
            assert resp.error_code is E.none
            assert resp.topics[0].partitions[0].error_code is E.none
            await group_marker(server.broker, "g", P1, commit=True)
            assert await fetch_offset(c, "g", stable=True) == (-1, E.none)
