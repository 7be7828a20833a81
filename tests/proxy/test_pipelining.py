"""Pipelined requests on one connection (issue 26.2): a reply that is ready is sent before a
later request parks (Kafka answers each request when it is done), and replies that are ready
together still leave in one write (perf-notes rule 2)."""

from __future__ import annotations

import datetime
from typing import Any

import trio
import trio.testing
from kio.schema.add_offsets_to_txn.v3 import request as ao
from kio.schema.errors import ErrorCode
from kio.schema.join_group.v9 import request as jg
from kio.schema.metadata.v12 import request as md
from kio.schema.produce.v11 import request as pr

from proxy.connection import Connection, NetConfig, serve_connection
from proxy.dispatch import Dispatcher
from tests.proxy.harness import RawClient, connect, decode_response, encode_request, running_broker
from tests.proxy.test_broker_requests import batch, create, fetch_request, produce

MS = datetime.timedelta(milliseconds=1)
METADATA = md.MetadataRequest(
    topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


async def first_reply_while_parked(c: RawClient, parking: Any) -> list[tuple[int, Any]]:
    """Send Metadata (corr 1) and ``parking`` (corr 2) in one write; return the replies that
    arrived once every task is blocked (the parking request waiting)."""
    got: list[tuple[int, Any]] = []

    async def read_one() -> None:
        frame = await c.read_frame()
        assert frame is not None
        got.append(decode_response(3, 12, frame))

    async with trio.open_nursery() as n:
        n.start_soon(read_one)
        await c.send_raw(encode_request(METADATA, 1) + encode_request(parking, 2))
        await trio.testing.wait_all_tasks_blocked()
        arrived = list(got)
        n.cancel_scope.cancel()
    return arrived


async def test_reply_is_not_held_behind_a_long_poll_fetch() -> None:
    async with running_broker() as (_, port), connect(port) as c, connect(port) as writer:
        assert await create(writer, "lp") == ErrorCode.none
        arrived = await first_reply_while_parked(c, fetch_request("lp", 0, wait_ms=60_000))
        assert [cid for cid, _ in arrived] == [1]  # the fetch still waits
        await produce(writer, "lp", batch([b"wake"]))
        frame = await c.read_frame()
        assert frame is not None
        cid, fetched = decode_response(1, 12, frame)
        assert cid == 2 and fetched.responses[0].partitions[0].high_watermark == 1


async def test_reply_is_not_held_behind_a_parked_join_group() -> None:
    overrides = {"group.initial.rebalance.delay.ms": "60000"}
    async with running_broker(**overrides) as (_, port), connect(port) as c:
        join = jg.JoinGroupRequest(
            group_id="g",
            session_timeout=10_000 * MS,
            rebalance_timeout=60_000 * MS,
            member_id="",
            group_instance_id="static-1",  # static: no MEMBER_ID_REQUIRED round trip
            protocol_type="consumer",
            protocols=(jg.JoinGroupRequestProtocol(name="range", metadata=b""),),
            reason=None,
        )
        arrived = await first_reply_while_parked(c, join)
        assert [cid for cid, _ in arrived] == [1]  # JoinGroup waits for the initial delay


class CountingStream(trio.abc.Stream):
    """A memory stream that records each ``send_all``."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.writes: list[bytes] = []

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_ready_replies_still_leave_in_one_write() -> None:
    async with running_broker() as (server, _):
        assert server.broker is not None
        client_end, server_end = trio.testing.memory_stream_pair()
        counted = CountingStream(server_end)
        stopping = trio.Event()
        async with trio.open_nursery() as n:
            n.start_soon(
                serve_connection,
                Connection(counted, "memory"),
                Dispatcher(server.broker),
                NetConfig(),
                stopping,
            )
            await client_end.send_all(b"".join(encode_request(METADATA, i) for i in range(20)))
            await trio.testing.wait_all_tasks_blocked()
            assert len(counted.writes) == 1
            c = RawClient(client_end)  # type: ignore[arg-type]
            cids = []
            for _ in range(20):
                frame = await c.read_frame()
                assert frame is not None
                cids.append(decode_response(3, 12, frame)[0])
            assert cids == list(range(20))
            n.cancel_scope.cancel()


async def test_replies_before_a_bad_frame_are_sent_before_closing() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        garbage = b"\x00\x00\x00\x0a\x03\xe7\x00\x00\x00\x00\x00\x01\x00\x00"  # api key 999
        await c.send_raw(encode_request(METADATA, 1) + garbage)
        frame = await c.read_frame()
        assert frame is not None and decode_response(3, 12, frame)[0] == 1
        assert await c.read_frame() is None  # then the connection is closed


async def test_every_settling_txn_api_may_park() -> None:
    """InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn all wait in
    ``TxnCoordinator.settle`` (AddOffsetsToTxn through ``add_partitions``) for up to the
    completion wait, so the replies gathered before them must be sent first."""
    async with running_broker() as (server, _):
        assert server.broker is not None
        d = Dispatcher(server.broker)
        add_offsets = ao.AddOffsetsToTxnRequest(
            transactional_id="t", producer_id=1, producer_epoch=0, group_id="g"
        )
        assert d.may_park(25, add_offsets)


async def test_a_produce_waits_for_fsync_by_its_topics_flush_messages() -> None:
    """A Produce (acks != 0) may wait for the fsync that covers it wherever the topic's own
    ``flush.messages`` is finite (issue 23.12), not only when the broker default is 1."""
    async with running_broker() as (server, port):
        assert server.broker is not None
        async with connect(port) as c:
            assert await create(c, "plain") == ErrorCode.none
            assert await create(c, "durable", flush_messages="1") == ErrorCode.none
            assert await create(c, "every100", flush_messages="100") == ErrorCode.none
        d = Dispatcher(server.broker)

        def request(topic: str, acks: int) -> pr.ProduceRequest:
            return pr.ProduceRequest(
                transactional_id=None,
                acks=acks,
                timeout=datetime.timedelta(seconds=1),
                topic_data=(pr.TopicProduceData(name=topic, partition_data=()),),
            )

        assert not d.may_park(0, request("plain", -1))
        assert d.may_park(0, request("durable", -1))
        assert d.may_park(0, request("every100", 1))
        assert not d.may_park(0, request("durable", 0))  # acks=0 waits for nothing
        assert not d.may_park(0, request("no-such-topic", -1))
        # the answer follows a config change (it is kept per settings mapping)
        topics = server.broker.topics
        assert await topics.alter_configs("plain", {"flush.messages": "1"}) is None
        assert d.may_park(0, request("plain", -1))
        assert await topics.alter_configs("durable", {}) is None
        assert not d.may_park(0, request("durable", -1))
        # and a topic deleted and created again under its name
        assert await topics.delete("every100") is None
        async with connect(port) as c:
            assert await create(c, "every100") == ErrorCode.none
        assert not d.may_park(0, request("every100", 1))
