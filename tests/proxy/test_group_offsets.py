"""Committed offsets against the topics they name, over the wire (issue 23): a partition that
does not exist is refused, and deleting a topic deletes the offsets committed (or pending) for
it, also after a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from kio.schema.delete_topics.v5.request import DeleteTopicsRequest
from kio.schema.errors import ErrorCode

from proxy.broker import Broker
from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_broker_requests import create
from tests.proxy.test_transactions import (
    MS,
    P1,
    allow_offsets,
    commit_request,
    fetch_offset,
    group_marker,
    install,
    txn_code,
    txn_commit,
)

E = ErrorCode


async def commit(c: RawClient, group: str, topic: str, offsets: dict[int, int]) -> dict[int, Any]:
    resp = await c.request(commit_request(group, topic, offsets))
    return {p.partition_index: p.error_code for p in resp.topics[0].partitions}


async def test_commit_to_a_partition_that_does_not_exist() -> None:
    with trio.fail_after(10):
        async with running_broker() as (server, port), connect(port) as c:
            assert await create(c, "in", partitions=2) == E.none
            got = await commit(c, "g", "in", {0: 5, 1: 6, 2: 7, -1: 8})
            assert got == {
                0: E.none,
                1: E.none,
                2: E.unknown_topic_or_partition,
                -1: (E.unknown_topic_or_partition),
            }
            _, fetched = server.broker.groups.fetch_offsets("g", None, False)
            assert sorted(f.tp.partition for f in fetched) == [0, 1]
            far = txn_commit("g", 1, topic="in", partition=9)
            assert await txn_code(c, far) is E.unknown_topic_or_partition


async def delete_topic(c: RawClient, name: str) -> None:
    resp = await c.request(DeleteTopicsRequest(topic_names=(name,), timeout=1000 * MS))
    assert resp.responses[0].error_code is E.none


async def test_deleting_a_topic_deletes_its_offsets(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'data'}"
    with trio.fail_after(30):
        async with running_broker(url) as (server, port), connect(port) as c:
            b = server.broker
            assert await create(c, "in", partitions=2) == E.none
            assert await create(c, "other") == E.none
            assert await commit(c, "g", "in", {0: 5, 1: 6}) == {0: E.none, 1: E.none}
            assert await commit(c, "g", "other", {0: 7}) == {0: E.none}
            allow_offsets(b, install(b), "h")
            assert await txn_code(c, txn_commit("h", 9)) is E.none  # pending on in-0
            await delete_topic(c, "in")
            assert await create(c, "in", partitions=2) == E.none
            assert offsets(b, "g") == {("other", 0): 7}
            assert await fetch_offset(c, "h", stable=True) == (-1, E.none)
            await group_marker(b, "h", P1, commit=True)  # the pending offset was dropped
            assert await fetch_offset(c, "h", stable=True) == (-1, E.none)
        async with running_broker(url) as (server, port), connect(port) as c:
            await server.broker.groups.loaded.wait()
            assert offsets(server.broker, "g") == {("other", 0): 7}
            assert await fetch_offset(c, "h", stable=True) == (-1, E.none)


def offsets(b: Broker, group: str) -> dict[tuple[str, int], int]:
    code, fetched = b.groups.fetch_offsets(group, None, False)
    assert code is E.none
    return {(f.tp.topic, f.tp.partition): f.offset for f in fetched}
