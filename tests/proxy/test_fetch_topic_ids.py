"""Fetch v13-18 (topic ids, KIP-516; the newer leader fields) and fetch sessions (KIP-227) over
a real socket, with frames written by kio."""

from __future__ import annotations

import datetime
import importlib
import uuid
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode

from proxy.server import Server
from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_broker_requests import batch, create, produce

MS = datetime.timedelta(milliseconds=1)
E = ErrorCode


def topic_id(server: Server, name: str) -> uuid.UUID:
    assert server.broker is not None
    topic = server.broker.topics.get(name)
    assert topic is not None
    return topic.topic_id


def request(
    version: int,
    topics: list[tuple[uuid.UUID | str, list[tuple[int, int]]]],
    *,
    session: tuple[int, int] = (0, -1),
    forget: list[tuple[uuid.UUID | str, list[int]]] = (),  # type: ignore[assignment]
    wait_ms: int = 0,
    min_bytes: int = 0,
    replica_id: int = -1,
    leader_epoch: int = -1,
    last_epoch: int = -1,
    isolation: int = 0,
) -> Any:
    """A Fetch of ``version``: (topic id or name, [(partition, offset)]) each."""
    m = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    key = "topic_id" if version >= 13 else "topic"
    extra: dict[str, Any] = {}
    if version >= 15:
        extra["replica_state"] = m.ReplicaState(replica_id=replica_id)
    else:
        extra["replica_id"] = replica_id
    if version >= 7:
        extra["session_id"], extra["session_epoch"] = session
        extra["forgotten_topics_data"] = tuple(
            m.ForgottenTopic(**{key: t}, partitions=tuple(ps)) for t, ps in forget
        )
    if version >= 11:
        extra["rack_id"] = ""
    epoch: dict[str, int] = {"current_leader_epoch": leader_epoch} if version >= 9 else {}
    if version >= 12:
        epoch["last_fetched_epoch"] = last_epoch
    return m.FetchRequest(
        max_wait=wait_ms * MS,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=isolation,
        topics=tuple(
            m.FetchTopic(
                **{key: t},
                partitions=tuple(
                    m.FetchPartition(
                        partition=p, fetch_offset=o, partition_max_bytes=1 << 20, **epoch
                    )
                    for p, o in parts
                ),
            )
            for t, parts in topics
        ),
        **extra,
    )


def parts(resp: Any, version: int = 18) -> list[tuple[Any, int, ErrorCode, int, int]]:
    """(topic id or name, partition, error, high watermark, record bytes) of each partition."""
    key = "topic_id" if version >= 13 else "topic"
    return [
        (getattr(t, key), p.partition_index, p.error_code, p.high_watermark, len(p.records or b""))
        for t in resp.responses
        for p in t.partitions
    ]


async def setup(c: RawClient, server: Server, name: str, partitions: int = 2) -> uuid.UUID:
    assert await create(c, name, partitions) == E.none
    return topic_id(server, name)


@pytest.mark.parametrize("version", range(13, 19))
async def test_fetch_by_topic_id_returns_the_batch_keyed_by_id(version: int) -> None:
    async with running_broker() as (server, port), connect(port) as c:
        tid = await setup(c, server, "ids")
        data = batch([b"a", b"b"])
        await produce(c, "ids", data)
        resp = await c.request(request(version, [(tid, [(0, 0), (1, 0)])]))
        assert resp.error_code == E.none and resp.session_id == 0
        [topic] = resp.responses
        assert topic.topic_id == tid
        p0, p1 = topic.partitions
        assert (p0.error_code, p0.high_watermark, p0.log_start_offset) == (E.none, 2, 0)
        assert bytes(p0.records)[16:] == data[16:]  # base offset and leader epoch set, as sent
        assert (p1.high_watermark, len(p1.records)) == (0, 0)


async def test_an_unknown_topic_id_is_answered_after_the_others_and_does_not_end_a_long_poll() -> (
    None
):
    """Kafka's handleFetchRequest: a partition whose topic id resolves to no name is
    UNKNOWN_TOPIC_ID (high watermark -1), answered with the erroneous partitions after those
    read, and only the partitions read take part in the long poll."""
    ghost = uuid.uuid4()
    async with running_broker() as (server, port), connect(port) as c, connect(port) as w:
        tid = await setup(c, server, "known", 1)
        got: list[Any] = []

        async def poll() -> None:
            got.append(
                await c.request(
                    request(18, [(ghost, [(0, 0)]), (tid, [(0, 0)])], wait_ms=60_000, min_bytes=1)
                )
            )

        with trio.fail_after(30):
            async with trio.open_nursery() as n:
                n.start_soon(poll)
                await trio.testing.wait_all_tasks_blocked()
                assert not got
                await produce(w, "known", batch([b"x"]))
        [(t1, _, e1, hw1, n1), (t2, _, e2, hw2, n2)] = parts(got[0])
        assert (t1, e1, hw1) == (tid, E.none, 1) and n1 > 0
        assert (t2, e2, hw2, n2) == (ghost, E.unknown_topic_id, -1, 0)


async def test_only_unknown_topic_ids_are_answered_at_once() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        with trio.fail_after(30):
            ask = request(17, [(uuid.uuid4(), [(0, 0)])], wait_ms=600_000, min_bytes=1)
            resp = await c.request(ask)
        assert [p[2] for p in parts(resp)] == [E.unknown_topic_id]


async def test_an_incremental_session_by_topic_id() -> None:
    async with running_broker() as (server, port), connect(port) as c, connect(port) as w:
        a = await setup(c, server, "sa", 2)
        b = await setup(c, server, "sb", 1)
        full = await c.request(request(18, [(a, [(0, 0), (1, 0)]), (b, [(0, 0)])], session=(0, 0)))
        sid = full.session_id
        assert sid != 0 and full.error_code == E.none
        assert [(p[0], p[1]) for p in parts(full)] == [(a, 0), (a, 1), (b, 0)]
        # nothing changed: an incremental answer names no partition
        quiet = await c.request(request(18, [], session=(sid, 1)))
        assert (quiet.error_code, quiet.session_id, quiet.responses) == (E.none, sid, ())
        await produce(w, "sa", batch([b"new"]), partition=1)
        news = await c.request(request(18, [], session=(sid, 2)))
        assert [(p[0], p[1], p[3]) for p in parts(news)] == [(a, 1, 1)]
        assert parts(news)[0][4] > 0
        # move a-1 past its record, forget b-0: nothing new to say
        moved = await c.request(request(18, [(a, [(1, 1)])], session=(sid, 3), forget=[(b, [0])]))
        assert moved.responses == ()
        assert server.broker is not None
        session = server.broker.fetch_sessions.get(sid)
        assert session is not None and len(session.partitions) == 2
        # the wrong epoch, an unknown session, a version that names topics
        stale = await c.request(request(18, [], session=(sid, 3)))
        assert (stale.error_code, stale.session_id, stale.responses) == (
            E.invalid_fetch_session_epoch,
            0,
            (),
        )
        gone = await c.request(request(18, [], session=(sid + 1, 1)))
        assert gone.error_code == E.fetch_session_id_not_found
        by_name = await c.request(request(12, [], session=(sid, 4)))
        assert (by_name.error_code, by_name.responses) == (E.fetch_session_topic_id_error, ())
        # epoch -1 closes it
        closed = await c.request(request(18, [(a, [(0, 0)])], session=(sid, -1)))
        assert closed.session_id == 0 and server.broker.fetch_sessions.get(sid) is None


async def test_an_incremental_session_by_name_below_v13() -> None:
    """What kafka-python (Fetch v12, sessions on by default) does."""
    async with running_broker() as (server, port), connect(port) as c:
        await setup(c, server, "named", 1)
        ask = request(12, [("named", [(0, 0)]), ("nope", [(0, 0)])], session=(0, 0))
        full = await c.request(ask)
        assert [(p[0], p[2]) for p in parts(full, 12)] == [
            ("named", E.none),
            ("nope", E.unknown_topic_or_partition),
        ]
        await produce(c, "named", batch([b"v"]))
        inc = await c.request(request(12, [], session=(full.session_id, 1)))
        # the unknown partition stays in error, so it is always answered
        assert [(p[0], p[2], p[3]) for p in parts(inc, 12)] == [
            ("named", E.none, 1),
            ("nope", E.unknown_topic_or_partition, -1),
        ]


async def test_no_session_slots_means_sessionless_answers() -> None:
    async with (
        running_broker(**{"max.incremental.fetch.session.cache.slots": "0"}) as (
            server,
            port,
        ),
        connect(port) as c,
    ):
        tid = await setup(c, server, "noslots", 1)
        resp = await c.request(request(18, [(tid, [(0, 0)])], session=(0, 0)))
        assert resp.session_id == 0 and len(parts(resp)) == 1


@pytest.mark.parametrize("version", [15, 16, 18])
async def test_a_follower_fetch_is_not_leader_or_follower_with_the_leader_from_v16(
    version: int,
) -> None:
    """KIP-951: from v16 a NOT_LEADER_OR_FOLLOWER answer names the current leader and its
    endpoint (here this node, leader epoch 0)."""
    async with running_broker() as (server, port), connect(port) as c:
        tid = await setup(c, server, "rep", 1)
        resp = await c.request(request(version, [(tid, [(0, 0)])], replica_id=5))
        [p] = resp.responses[0].partitions
        assert (p.error_code, p.high_watermark) == (E.not_leader_or_follower, -1)
        assert server.broker is not None
        node = server.broker.node_id
        if version >= 16:
            assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (node, 0)
            [ep] = resp.node_endpoints
            assert (ep.node_id, ep.host, ep.port) == (node, "127.0.0.1", port)
        else:
            assert p.current_leader.leader_id == -1


@pytest.mark.parametrize(
    ("epoch", "code"), [(-2, E.fenced_leader_epoch), (1, E.unknown_leader_epoch), (0, E.none)]
)
async def test_the_current_leader_epoch_is_fenced(epoch: int, code: ErrorCode) -> None:
    async with running_broker() as (server, port), connect(port) as c:
        tid = await setup(c, server, "ep", 1)
        resp = await c.request(request(18, [(tid, [(0, 0)])], leader_epoch=epoch))
        [p] = resp.responses[0].partitions
        assert p.error_code == code
        hinted = code is E.fenced_leader_epoch
        assert (p.current_leader.leader_id >= 0) is hinted
        assert bool(resp.node_endpoints) is hinted


@pytest.mark.parametrize("version", [4, 7, 12, 13, 18])
def test_the_error_reply_names_partitions_only_below_v13(version: int) -> None:
    """Kafka's FetchRequest.getErrorResponse: the top-level code (v7+) with the request's
    session id; below v13 every partition named carries the code too."""
    from proxy.registry import entry

    h = entry(1)
    assert h.as_sent
    topic: uuid.UUID | str = uuid.uuid4() if version >= 13 else "t"
    req = request(version, [(topic, [(0, 0), (1, 0)])], session=(0, -1))
    resp = h.write(h.error_reply(h.read(req), E.unknown_server_error), req, version)
    assert int(resp.__version__) == version
    if version >= 7:
        assert (resp.error_code, resp.session_id) == (E.unknown_server_error, 0)
    if version >= 13:
        assert resp.responses == ()
    else:
        assert [(p[0], p[1], p[2], p[3]) for p in parts(resp, version)] == [
            ("t", 0, E.unknown_server_error, -1),
            ("t", 1, E.unknown_server_error, -1),
        ]


@pytest.mark.parametrize("version", [12, 18])
async def test_offset_out_of_range_is_answered_without_partition_state(version: int) -> None:
    """Kafka's ``handleOffsetOutOfRangeError`` (no tiered storage) answers the exception's
    LogReadResult: high watermark, LSO and log start -1, aborted transactions null."""
    async with running_broker() as (server, port), connect(port) as c:
        tid = await setup(c, server, "oor", 1)
        await produce(c, "oor", batch([b"x"]))
        key: uuid.UUID | str = tid if version >= 13 else "oor"
        resp = await c.request(request(version, [(key, [(0, 5)])]))
        p = resp.responses[0].partitions[0]
        assert p.error_code == E.offset_out_of_range
        assert (p.high_watermark, p.last_stable_offset, p.log_start_offset) == (-1, -1, -1)
        assert p.aborted_transactions is None


async def test_a_consumers_unknown_topic_ids_are_answered_before_its_other_refusals() -> None:
    """Kafka's handleFetchRequest finds a consumer's unknown topic ids in a pass of their own
    (``foreachPartition``), before the pass that checks authorization and the partitions."""
    ghost = uuid.uuid4()
    async with running_broker() as (server, port), connect(port) as c:
        tid = await setup(c, server, "few", 1)
        resp = await c.request(request(18, [(tid, [(7, 0), (0, 0)]), (ghost, [(0, 0)])]))
        assert [(p[0], p[1], p[2]) for p in parts(resp)] == [
            (tid, 0, E.none),
            (ghost, 0, E.unknown_topic_id),
            (tid, 7, E.unknown_topic_or_partition),
        ]


@pytest.mark.parametrize("version", [12, 18])
async def test_a_last_fetched_epoch_that_ends_before_the_fetch_offset_is_a_diverging_epoch(
    version: int,
) -> None:
    """Kafka's ``Partition.readRecords`` (v12+): the last fetched epoch's end offset (epoch 0:
    the log end offset) below the fetch offset is answered at once with the diverging epoch,
    no records and no error; an epoch the cache does not know is OFFSET_OUT_OF_RANGE."""
    async with running_broker() as (server, port), connect(port) as c:
        tid = await setup(c, server, "div", 1)
        await produce(c, "div", batch([b"x", b"y"]))
        key: uuid.UUID | str = tid if version >= 13 else "div"
        with trio.fail_after(30):  # not the long poll's 600 s
            ask = request(version, [(key, [(0, 5)])], last_epoch=0, wait_ms=600_000, min_bytes=1)
            resp = await c.request(ask)
        p = resp.responses[0].partitions[0]
        assert (p.error_code, p.high_watermark, len(p.records or b"")) == (E.none, 2, 0)
        assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (0, 2)
        fine = await c.request(request(version, [(key, [(0, 1)])], last_epoch=0))
        p = fine.responses[0].partitions[0]
        assert p.error_code == E.none and len(p.records) > 0 and p.diverging_epoch.epoch == -1
        ahead = await c.request(request(version, [(key, [(0, 1)])], last_epoch=3))
        p = ahead.responses[0].partitions[0]
        assert (p.error_code, p.high_watermark) == (E.offset_out_of_range, -1)


async def test_a_diverging_partition_is_answered_by_every_incremental_fetch() -> None:
    """Kafka's ``maybeUpdateResponseData``: a diverging epoch is always answered."""
    async with running_broker() as (server, port), connect(port) as c:
        tid = await setup(c, server, "divs", 1)
        await produce(c, "divs", batch([b"x"]))
        full = await c.request(request(18, [(tid, [(0, 4)])], session=(0, 0), last_epoch=0))
        sid = full.session_id
        for epoch in (1, 2):
            inc = await c.request(request(18, [], session=(sid, epoch)))
            [topic] = inc.responses
            [p] = topic.partitions
            assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (0, 1)


@pytest.mark.parametrize("version", [12, 18])
async def test_an_unknown_isolation_level_is_an_unknown_server_error_once_a_partition_is_read(
    version: int,
) -> None:
    """Kafka's ``FetchIsolation.of`` (``IsolationLevel.forId`` throws) is reached only when a
    partition is to be read: the request's error reply, UNKNOWN_SERVER_ERROR."""
    async with running_broker() as (server, port), connect(port) as c:
        tid = await setup(c, server, "iso", 1)
        key: uuid.UUID | str = tid if version >= 13 else "iso"
        resp = await c.request(request(version, [(key, [(0, 0)])], isolation=2))
        assert resp.error_code == E.unknown_server_error
        ghost: uuid.UUID | str = uuid.uuid4() if version >= 13 else "ghost"
        none_read = await c.request(request(version, [(ghost, [(0, 0)])], isolation=2))
        assert none_read.error_code == E.none
