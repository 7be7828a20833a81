"""WriteTxnMarkers (key 27) v1-2 over the raw protocol: the admin abort of a hanging
transaction (KIP-664) moves the LSO on, per-partition error codes, several markers in one
request; v2's transaction version (a TV2 marker must carry an epoch above the producer's)."""

from __future__ import annotations

from typing import Any

import trio
from kio.schema.errors import ErrorCode
from kio.schema.write_txn_markers.v1 import request as wtm
from kio.schema.write_txn_markers.v2 import request as wtm2

from storage.api import TopicPartition
from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_broker_requests import create
from tests.proxy.test_transactions import P1, P2, delivered, fetch, install, plain, produce, tbatch

E = ErrorCode


def marker(pid: int, epoch: int, commit: bool, coord_epoch: int, **topics: list[int]) -> Any:
    return wtm.WritableTxnMarker(
        producer_id=pid,
        producer_epoch=epoch,
        transaction_result=commit,
        coordinator_epoch=coord_epoch,
        topics=tuple(
            wtm.WritableTxnMarkerTopic(name=name, partition_indexes=tuple(parts))
            for name, parts in topics.items()
        ),
    )


async def write(c: RawClient, *markers: Any) -> list[tuple[int, str, int, ErrorCode]]:
    resp = await c.request(wtm.WriteTxnMarkersRequest(markers=markers))
    return [
        (m.producer_id, t.name, p.partition_index, p.error_code)
        for m in resp.markers
        for t in m.topics
        for p in t.partitions
    ]


async def test_admin_abort_of_a_hanging_transaction_moves_the_lso() -> None:
    with trio.fail_after(10):
        async with running_broker() as (server, port), connect(port) as c:
            assert await create(c, "h") == E.none
            install(server.broker).add(P1, 0, TopicPartition("h", 0))
            assert (await produce(c, "h", plain(), txn=None)).base_offset == 0
            assert (await produce(c, "h", tbatch(P1, 0, 2))).base_offset == 1
            assert (await produce(c, "h", plain(), txn=None)).base_offset == 3
            rc = await fetch(c, "h", 0, committed=True)
            assert (rc.high_watermark, rc.last_stable_offset) == (4, 1)  # hanging at 1
            # the admin abort: the coordinator epoch DescribeProducers reports (none yet: 0)
            assert await write(c, marker(P1, 0, False, 0, h=[0, 7], nope=[0])) == [
                (P1, "h", 0, E.none),
                (P1, "h", 7, E.unknown_topic_or_partition),
                (P1, "nope", 0, E.unknown_topic_or_partition),
            ]
            rc = await fetch(c, "h", 0, committed=True)
            assert (rc.high_watermark, rc.last_stable_offset) == (5, 5)
            assert [(a.producer_id, a.first_offset) for a in rc.aborted_transactions] == [(P1, 1)]
            assert delivered(rc) == [0, 3]
            # a second abort for the same producer is legal and changes nothing visible
            assert await write(c, marker(P1, 0, False, 0, h=[0])) == [(P1, "h", 0, E.none)]
            assert delivered(await fetch(c, "h", 0, committed=True)) == [0, 3]


async def test_per_partition_errors_and_several_markers() -> None:
    with trio.fail_after(10):
        async with running_broker() as (server, port), connect(port) as c:
            assert await create(c, "m", 2) == E.none
            v = install(server.broker)
            v.add(P1, 3, TopicPartition("m", 0))
            v.add(P2, 0, TopicPartition("m", 0))
            assert (await produce(c, "m", tbatch(P1, 0, epoch=3))).base_offset == 0
            assert (await produce(c, "m", tbatch(P2, 0))).base_offset == 1
            assert await write(
                c,
                marker(P1, 2, False, 0, m=[0]),  # an epoch below the producer's
                marker(P2, 0, True, 5, m=[0, 1]),  # commits; partition 1 had nothing open
            ) == [
                (P1, "m", 0, E.invalid_producer_epoch),
                (P2, "m", 0, E.none),
                (P2, "m", 1, E.none),
            ]
            # P2's coordinator epoch is now 5: an older coordinator is fenced
            assert await write(c, marker(P2, 0, False, 4, m=[0])) == [
                (P2, "m", 0, E.transaction_coordinator_fenced)
            ]
            rc = await fetch(c, "m", 0, committed=True)
            assert rc.last_stable_offset == 0  # P1 still open at 0
            assert await write(c, marker(P1, 3, True, 0, m=[0])) == [(P1, "m", 0, E.none)]
            rc = await fetch(c, "m", 0, committed=True)
            assert (rc.high_watermark, rc.last_stable_offset) == (4, 4)
            assert delivered(rc) == [0, 1]


def marker_v2(pid: int, epoch: int, commit: bool, version: int, **topics: list[int]) -> Any:
    return wtm2.WritableTxnMarker(
        producer_id=pid,
        producer_epoch=epoch,
        transaction_result=commit,
        coordinator_epoch=0,
        topics=tuple(
            wtm2.WritableTxnMarkerTopic(name=name, partition_indexes=tuple(parts))
            for name, parts in topics.items()
        ),
        transaction_version=version,
    )


async def test_v2_a_tv2_marker_needs_an_epoch_above_the_producers() -> None:
    # Kafka's ProducerAppendInfo.checkProducerEpoch: TV2 markers are written at the bumped
    # epoch, so one at the producer's own epoch is a late or repeated marker; TV0/TV1 (and
    # every v1 marker) may carry it
    with trio.fail_after(10):
        async with running_broker() as (server, port), connect(port) as c:
            assert await create(c, "a") == E.none
            assert await create(c, "b") == E.none
            v = install(server.broker)
            v.add(P1, 3, TopicPartition("a", 0))
            v.add(P2, 3, TopicPartition("b", 0))
            assert (await produce(c, "a", tbatch(P1, 0, epoch=3))).base_offset == 0
            assert (await produce(c, "b", tbatch(P2, 0, epoch=3))).base_offset == 0

            async def write2(*markers: Any) -> list[tuple[int, str, int, ErrorCode]]:
                resp = await c.request(wtm2.WriteTxnMarkersRequest(markers=markers))
                return [
                    (m.producer_id, t.name, p.partition_index, p.error_code)
                    for m in resp.markers
                    for t in m.topics
                    for p in t.partitions
                ]

            assert await write2(
                marker_v2(P1, 3, False, 2, a=[0]),  # TV2 at the producer's epoch: refused
                marker_v2(P2, 3, False, 1, b=[0]),  # TV1 at it: written
            ) == [(P1, "a", 0, E.invalid_producer_epoch), (P2, "b", 0, E.none)]
            assert (await fetch(c, "a", 0, committed=True)).last_stable_offset == 0
            assert (await fetch(c, "b", 0, committed=True)).last_stable_offset == 2
            assert await write2(marker_v2(P1, 4, False, 2, a=[0])) == [(P1, "a", 0, E.none)]
            rc = await fetch(c, "a", 0, committed=True)
            assert (rc.high_watermark, rc.last_stable_offset) == (2, 2)
            # the producer's epoch is now 4 and nothing is open: the same TV2 marker again is a
            # retry of one already written and is written again (Kafka 4.2, KAFKA-19999)
            assert await write2(marker_v2(P1, 4, False, 2, a=[0])) == [(P1, "a", 0, E.none)]
            rc = await fetch(c, "a", 0, committed=True)
            assert (rc.high_watermark, rc.last_stable_offset) == (3, 3)
            # ... but not while a transaction at that epoch is open
            v.add(P1, 4, TopicPartition("a", 0))
            assert (await produce(c, "a", tbatch(P1, 0, epoch=4))).base_offset == 3
            assert await write2(marker_v2(P1, 4, False, 2, a=[0])) == [
                (P1, "a", 0, E.invalid_producer_epoch)
            ]
