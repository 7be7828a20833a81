"""The forwarding proxy in process: a real kafkad broker (or a misbehaving fake upstream) on
loopback, ``ForwardProxy`` in front of it, and the raw test client (tests/proxy/harness.py)."""

from __future__ import annotations

import datetime
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.metadata.v12 import request as md
from kio.static.primitive import i16

from proxy.forward.record import Kind, read
from proxy.forward.replay import timeline
from proxy.forward.server import ForwardProxy, ProxyConfig
from tests.proxy.harness import RawClient, connect, decode_response, encode_request, running_broker
from tests.proxy.test_broker_requests import batch, create, fetch_request, produce
from wire.codec import encode_response
from wire.headers import RequestHeader

LIMIT_S = 10  # every wait on the proxy has this deadline: a hang fails, never blocks the run


@asynccontextmanager
async def running_proxy(port: int, **settings: Any) -> AsyncIterator[tuple[ForwardProxy, int]]:
    cfg = ProxyConfig(upstreams=(("127.0.0.1", port),), listen_port=0, **settings)
    proxy = ForwardProxy(cfg)
    async with trio.open_nursery() as nursery:
        _host, bound = await nursery.start(proxy.run)
        yield proxy, bound
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def broker_and_proxy(**settings: Any) -> AsyncIterator[tuple[ForwardProxy, int, int]]:
    async with (
        running_broker() as (_server, upstream),
        running_proxy(upstream, **settings) as (
            proxy,
            port,
        ),
    ):
        yield proxy, port, upstream


def metadata_request() -> Any:
    return md.MetadataRequest(
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def raw(req: Any, cid: int, client_id: str = "test") -> bytes:
    return encode_request(req, cid, client_id)


async def closed(client: RawClient) -> bool:
    """Whether the proxy closes ``client``'s connection (within LIMIT_S)."""
    with trio.fail_after(LIMIT_S):
        try:
            return await client.read_frame() is None
        except trio.BrokenResourceError:
            return True


async def test_brokers_are_handed_out_at_proxy_ports_that_forward() -> None:
    async with broker_and_proxy() as (proxy, port, upstream), connect(port) as client:
        meta = await client.request(metadata_request())
        (broker,) = meta.brokers
        assert broker.host == "127.0.0.1" and broker.port not in (port, upstream)
        assert proxy.local == {("127.0.0.1", upstream): ("127.0.0.1", broker.port)}
        assert proxy.nodes == {("127.0.0.1", upstream): broker.node_id}
        async with connect(broker.port) as direct:
            assert await create(direct, "t") == ErrorCode.none
            data = batch([b"a", b"b"])
            assert (await produce(direct, "t", data)).error_code == ErrorCode.none
            fetched = await direct.request(fetch_request("t", 0))
            records = fetched.responses[0].partitions[0].records
            assert records[61:] == data[61:]  # the batch as stored, base offset aside


async def test_local_errors_and_forwarded_answers_keep_request_order() -> None:
    faults = "find_coordinator[victim]:error=not_coordinator"
    async with broker_and_proxy(fault_injection=faults) as (_p, port, _u), connect(port) as c:
        fc = FindCoordinatorRequest(key_type=0, coordinator_keys=("g",))
        await c.send_raw(
            raw(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 1)
            + raw(fc, 2, client_id="victim")
            + raw(metadata_request(), 3)
            + raw(fc, 4, client_id="bystander")
        )
        frames = [await c.read_frame() for _ in range(4)]
        ids = [struct.unpack_from(">i", f or b"")[0] for f in frames]
        assert ids == [1, 2, 3, 4]
        _cid, hit = decode_response(10, 4, frames[1] or b"")
        _cid, miss = decode_response(10, 4, frames[3] or b"")
        assert hit.coordinators[0].error_code == ErrorCode.not_coordinator
        assert miss.coordinators[0].error_code == ErrorCode.none


async def test_drop_closes_before_forwarding() -> None:
    async with (
        broker_and_proxy(fault_injection="create_topics:drop") as (_p, port, up),
        connect(port) as client,
    ):
        await client.send_raw(raw(metadata_request(), 1))
        assert await client.read_frame() is not None
        await client.send_raw(encode_request(_create_request("never"), 2))
        assert await closed(client)
        async with connect(up) as direct:
            meta = await direct.request(metadata_request())
            assert "never" not in {t.name for t in meta.topics}


async def test_drop_after_forwards_then_closes_without_the_answer() -> None:
    async with (
        broker_and_proxy(fault_injection="create_topics:drop_after") as (_p, port, up),
        connect(port) as client,
    ):
        await client.send_raw(encode_request(_create_request("made"), 1))
        assert await closed(client)
        async with connect(up) as direct:
            meta = await direct.request(metadata_request())
            assert "made" in {t.name for t in meta.topics}


async def test_delay_holds_the_request() -> None:
    async with (
        broker_and_proxy(fault_injection="metadata:delay=300") as (_p, port, _u),
        connect(port) as client,
    ):
        start = trio.current_time()
        await client.request(metadata_request())
        assert trio.current_time() - start >= 0.3


async def test_partition_cuts_a_matching_client_off_its_broker() -> None:
    spec = "partition broker=1 for=60000 client=cut-*"
    async with (
        broker_and_proxy(fault_injection=spec) as (_p, port, _u),
        connect(port) as cut,
        connect(port) as other,
    ):
        for client, name in ((cut, "cut-1"), (other, "other")):
            await client.send_raw(raw(metadata_request(), 1, name))  # node unknown yet
            assert await client.read_frame() is not None
        await cut.send_raw(raw(metadata_request(), 2, "cut-1"))
        assert await closed(cut)
        await other.send_raw(raw(metadata_request(), 2, "other"))
        assert await other.read_frame() is not None


async def test_partition_window_closes_open_connections_when_it_opens() -> None:
    spec = "partition broker=1 for=60000 after=1500"
    async with broker_and_proxy(fault_injection=spec) as (_p, port, _u), connect(port) as c:
        await c.request(metadata_request())  # before the window: answered, node learnt
        assert await closed(c)  # the timer closes it at 1.5 s


async def _fake_upstream(
    nursery: trio.Nursery, behave: Callable[[trio.SocketStream], Awaitable[None]]
) -> int:
    listeners = await nursery.start(trio.serve_tcp, behave, 0)
    return int(listeners[0].socket.getsockname()[1])


async def _read_request(stream: trio.SocketStream) -> bytes:
    buf = b""
    while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
        buf += await stream.receive_some(65536)
    return buf[4:]


async def test_upstream_misbehaviour_closes_the_client_never_hangs() -> None:
    async def closes(stream: trio.SocketStream) -> None:
        await _read_request(stream)
        await stream.aclose()

    async def silent(stream: trio.SocketStream) -> None:
        await _read_request(stream)
        await trio.sleep_forever()

    async def wrong_id(stream: trio.SocketStream) -> None:
        frame = await _read_request(stream)
        (cid,) = struct.unpack_from(">i", frame, 4)
        await stream.send_all(struct.pack(">ii", 4, cid + 1))

    async def garbage(stream: trio.SocketStream) -> None:
        await _read_request(stream)
        await stream.send_all(b"\xff\xff\xff\xff")

    async with trio.open_nursery() as nursery:
        for behave in (closes, silent, wrong_id, garbage):
            up = await _fake_upstream(nursery, behave)
            async with (
                running_proxy(up, upstream_timeout_s=0.5) as (_p, port),
                connect(port) as client,
            ):
                await client.send_raw(raw(metadata_request(), 1))
                assert await closed(client), behave.__name__
        nursery.cancel_scope.cancel()


async def test_an_upstream_closing_while_nothing_is_owed_closes_the_client_at_once() -> None:
    async def answers_then_closes(stream: trio.SocketStream) -> None:
        frame = await _read_request(stream)
        await stream.send_all(struct.pack(">i", 6) + frame[4:8] + b"\x00\x00")
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        up = await _fake_upstream(nursery, answers_then_closes)
        async with running_proxy(up) as (_p, port), connect(port) as client:
            versions = ApiVersionsRequest(client_software_name="t", client_software_version="1")
            await client.send_raw(raw(versions, 7))
            assert await client.read_frame() == struct.pack(">i", 7) + b"\x00\x00"
            assert await closed(client)  # without sending anything more
        nursery.cancel_scope.cancel()


async def test_an_answer_nothing_asked_for_closes_the_client_at_once() -> None:
    """An upstream that answers an acks=0 Produce (no answer is owed) and then closes: the
    client is closed then, not left waiting until its next request finds the stray answer."""

    async def answers_acks0_then_closes(stream: trio.SocketStream) -> None:
        frame = await _read_request(stream)
        await stream.send_all(struct.pack(">i", 6) + frame[4:8] + b"\x00\x00")
        await stream.aclose()

    from tests.proxy.test_broker_requests import MS, pr

    acks0 = pr.ProduceRequest(
        transactional_id=None,
        acks=0,
        timeout=1000 * MS,
        topic_data=(
            pr.TopicProduceData(
                name="t", partition_data=(pr.PartitionProduceData(index=0, records=batch([b"x"])),)
            ),
        ),
    )
    async with trio.open_nursery() as nursery:
        up = await _fake_upstream(nursery, answers_acks0_then_closes)
        async with running_proxy(up) as (_p, port), connect(port) as client:
            await client.send_raw(raw(acks0, 5))
            assert await closed(client)
        nursery.cancel_scope.cancel()


async def test_a_broker_address_that_cannot_be_resolved_closes_only_that_connection() -> None:
    """An upstream may advertise a host no resolver takes (a label over 63 characters makes
    the IDNA codec raise UnicodeError, not OSError): a client sent there is closed, and the
    proxy goes on serving everyone else."""
    from proxy.forward.rewrite import Endpoint

    bad = Endpoint(2, "x" * 64 + ".example", 9092)
    async with broker_and_proxy() as (proxy, port, _u):
        (_host, handed_out) = (await proxy.local_addresses([bad]))[(2, bad.host, bad.port)]
        async with connect(handed_out) as client:
            assert await closed(client)
        async with connect(port) as good:
            assert (await good.request(metadata_request())).brokers


async def test_refused_upstream_and_malformed_client_frames_close_that_connection() -> None:
    with trio.socket.socket() as s:  # a port nobody listens on
        await s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    async with running_proxy(dead) as (_p, port), connect(port) as client:
        assert await closed(client)
    async with broker_and_proxy() as (_p, port, _u), connect(port) as bad:
        await bad.send_raw(b"\xff\xff\xff\xff")
        assert await closed(bad)
        async with connect(port) as bad:
            await bad.send_raw(struct.pack(">i", 3) + b"abc")  # shorter than a header
            assert await closed(bad)
        async with connect(port) as good:
            await good.request(metadata_request())


async def test_recording_holds_both_directions_and_replays(tmp_path: Path) -> None:
    spec = "find_coordinator[faulty]:error=coordinator_load_in_progress"
    async with (
        broker_and_proxy(record_dir=tmp_path, fault_injection=spec) as (_p, port, _u),
        connect(port) as client,
    ):
        await client.request(metadata_request())
        fc = FindCoordinatorRequest(key_type=0, coordinator_keys=("g",))
        await client.send_raw(raw(fc, 9, "faulty"))
        assert await client.read_frame() is not None
    (path,) = list(tmp_path.glob("*.kdrec"))  # noqa: ASYNC240  (the proxy has stopped)
    rec = read(path)
    assert [e.kind for e in rec.entries] == [
        Kind.REQUEST,
        Kind.RESPONSE,
        Kind.REWRITTEN,
        Kind.REQUEST,
        Kind.NOTE,
        Kind.LOCAL,
        Kind.NOTE,
    ]
    assert not rec.truncated
    lines = list(timeline(rec, path.name))
    text = "\n".join(lines)
    assert "-> Metadata v12 corr=1 client=test" in text
    assert "<- Metadata v12 corr=1" in text and " ms ok" in text
    assert "handed out 1=127.0.0.1:" in text
    assert "-> FindCoordinator v4 corr=9 client=faulty  coordinator_keys=g" in text
    assert "<= FindCoordinator v4 corr=9 (answered by the proxy)" in text
    assert "errors: COORDINATOR_LOAD_IN_PROGRESS" in text
    assert lines[-1].endswith("closed: client closed")
    path.write_bytes(path.read_bytes()[:-3])  # cut inside the last entry
    assert read(path).truncated and len(read(path).entries) == len(rec.entries) - 1


def _create_request(name: str) -> Any:
    from kio.schema.create_topics.v5 import request as ct

    from tests.proxy.test_broker_requests import MS

    return ct.CreateTopicsRequest(
        topics=(
            ct.CreatableTopic(
                name=name, num_partitions=1, replication_factor=-1, assignments=(), configs=()
            ),
        ),
        timeout=1000 * MS,
        validate_only=False,
    )


async def test_a_pipelined_burst_is_one_write_each_way() -> None:
    """A client's 20 requests in one write reach the upstream in one write, and the 20
    answers the upstream sends in one write reach the client in one write (each send is a
    syscall and a wake-up of the other side: the proxy's latency is mostly those)."""
    chunks: list[int] = []

    async def echo_in_bulk(stream: trio.SocketStream) -> None:
        data = await stream.receive_some(65536)
        frames = []
        pos = 0
        while pos < len(data):
            (size,) = struct.unpack_from(">i", data, pos)
            frames.append(data[pos + 4 : pos + 4 + size])
            pos += 4 + size
        chunks.append(len(frames))
        await stream.send_all(b"".join(struct.pack(">i", 6) + f[4:8] + b"\x00\x00" for f in frames))
        await trio.sleep_forever()

    versions = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    async with trio.open_nursery() as nursery:
        up = await _fake_upstream(nursery, echo_in_bulk)
        async with running_proxy(up) as (_p, port), connect(port) as client:
            await client.send_raw(b"".join(raw(versions, cid) for cid in range(20)))
            with trio.fail_after(LIMIT_S):
                data = await client.stream.receive_some(65536)
            assert chunks == [20]
            assert data == b"".join(struct.pack(">ii", 6, cid) + b"\x00\x00" for cid in range(20))
        nursery.cancel_scope.cancel()


async def test_a_rewritten_metadata_answer_is_reused_with_each_correlation_id() -> None:
    async with broker_and_proxy() as (proxy, port, _u), connect(port) as client:
        first = await client.request(metadata_request())
        assert len(proxy.rewritten) == 1
        second = await client.request(metadata_request())  # the harness checks its id
        assert len(proxy.rewritten) == 1
        assert second.brokers == first.brokers and second.brokers[0].port != _u


# -- broker churn and new leaders -------------------------------------------------------------


async def _scripted_upstream(
    nursery: trio.Nursery, answer: Callable[[int, int, int], bytes]
) -> int:
    """A fake upstream answering each request with ``answer(api_key, version, cid)``."""

    async def serve(stream: trio.SocketStream) -> None:
        while True:
            try:
                frame = await _read_request(stream)
            except trio.BrokenResourceError:
                return
            api_key, version, cid = struct.unpack_from(">hhi", frame)
            await stream.send_all(answer(api_key, version, cid))

    return await _fake_upstream(nursery, serve)


async def _refused(port: int) -> bool:
    try:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
    except OSError:
        return True
    await stream.aclose()
    return False


async def test_broker_churn_releases_listeners_and_reuses_their_ports() -> None:
    """A broker that leaves the upstream's Metadata loses its listener at once for new
    connections, while a connection already open through it carries on; a broker back at the
    same endpoint gets its old port; an upstream restarted on ever new ports leaks none."""
    from tests.proxy.forward.test_rewrite import metadata

    brokers: list[tuple[int, str, int]] = []

    def answer(api_key: int, version: int, cid: int) -> bytes:
        assert api_key == 3
        return encode_response(RequestHeader(3, version, cid, None), metadata(*brokers))

    async with trio.open_nursery() as nursery:
        up = await _scripted_upstream(nursery, answer)
        async with running_proxy(up) as (proxy, port), connect(port) as client:

            async def handed_out() -> dict[int, int]:
                meta = await client.request(metadata_request())
                return {b.node_id: b.port for b in meta.brokers}

            brokers[:] = [(1, "127.0.0.1", up), (2, "127.0.0.1", up)]
            first = await handed_out()
            async with connect(first[2]) as through_2:
                await through_2.request(metadata_request())  # answered through broker 2
                brokers[:] = [(1, "127.0.0.1", up)]
                assert await handed_out() == {1: first[1]}
                assert await _refused(first[2])  # new connections: refused at once
                assert (await through_2.request(metadata_request())).brokers  # open one: kept
            brokers[:] = [(1, "127.0.0.1", up), (2, "127.0.0.1", up)]
            assert await handed_out() == first  # broker 2 is back: its old port
            assert not await _refused(first[2])

            for restart in range(40):  # broker 2 restarted on a new port each time
                brokers[:] = [(1, "127.0.0.1", up), (2, "127.0.0.1", 30000 + restart)]
                now = await handed_out()
                assert len(proxy.listeners) == 2 and now[1] == first[1]
            brokers[:] = [(3, "127.0.0.1", up)]  # a new node set altogether
            assert list(await handed_out()) == [3]
            assert [k.node_id for k in proxy.listeners] == [3]
            assert await _refused(first[1]) and await _refused(now[2])
        nursery.cancel_scope.cancel()


async def test_a_new_leader_on_an_unseen_endpoint_gets_a_listener_before_the_answer() -> None:
    """A Produce answer naming a leader (KIP-951) on a host:port no Metadata has shown: the
    proxy opens a listener for it and hands that out, in the same answer."""
    from kio.schema.produce.v10 import request as p10req
    from kio.schema.produce.v10 import response as p10

    from tests.proxy.forward.test_hints import _produce

    async with trio.open_nursery() as nursery:
        ans = _produce(p10, 10, leaders=True)  # leader 7 at new-host:9

        def answer(api_key: int, version: int, cid: int) -> bytes:
            out = struct.pack(">i", cid) + ans[4:]  # the answer with this correlation id
            return struct.pack(">i", len(out)) + out

        up = await _scripted_upstream(nursery, answer)
        async with running_proxy(up) as (proxy, port), connect(port) as client:
            req = p10req.ProduceRequest(
                transactional_id=None,
                acks=i16(1),
                timeout=p10req.ProduceRequest.__dataclass_fields__["timeout"].type.parse(
                    datetime.timedelta(seconds=1)
                ),
                topic_data=(),
            )
            got = await client.request(req)
            (leader,) = got.node_endpoints
            assert (leader.node_id, leader.host) == (7, "127.0.0.1")
            assert proxy.local == {("new-host", 9): ("127.0.0.1", leader.port)}
            assert not await _refused(leader.port)  # listening before the answer went out
        nursery.cancel_scope.cancel()


async def test_every_endpoint_answer_kafkad_serves_is_rewritten_through_the_proxy() -> None:
    """Metadata, FindCoordinator, DescribeCluster and DescribeQuorum from a real kafkad hand
    out the one proxy port of its broker (Produce/Fetch: the new-leader tests)."""
    from kio.schema.describe_cluster.v1.request import DescribeClusterRequest

    from tests.proxy.test_describe_quorum import quorum_request

    async with broker_and_proxy() as (_proxy, port, upstream), connect(port) as client:
        (broker,) = (await client.request(metadata_request())).brokers
        assert broker.port not in (port, upstream)
        fc = await client.request(FindCoordinatorRequest(key_type=0, coordinator_keys=("g",)))
        assert [(c.host, c.port) for c in fc.coordinators] == [("127.0.0.1", broker.port)]
        dc = await client.request(
            DescribeClusterRequest(include_cluster_authorized_operations=False)
        )
        assert [(b.host, b.port) for b in dc.brokers] == [("127.0.0.1", broker.port)]
        dq = await client.request(quorum_request(2))
        assert [(x.host, x.port) for n in dq.nodes for x in n.listeners] == [
            ("127.0.0.1", broker.port)
        ]


async def test_a_fetch_answer_naming_an_unseen_leader_is_rewritten() -> None:
    from kio.schema.fetch.v16 import response as f16

    from tests.proxy.forward.test_hints import _fetch

    ans = _fetch(f16, 16, leaders=True)  # records, aborted transactions, leader 7 at new-host:9

    def answer(api_key: int, version: int, cid: int) -> bytes:
        assert (api_key, version) == (1, 16)
        out = struct.pack(">i", cid) + ans[4:]
        return struct.pack(">i", len(out)) + out

    async with trio.open_nursery() as nursery:
        up = await _scripted_upstream(nursery, answer)
        async with running_proxy(up) as (proxy, port), connect(port) as client:
            await client.send_raw(_fetch_v16_request())
            frame = await client.read_frame()
            _cid, got = decode_response(1, 16, frame or b"")
            (leader,) = got.node_endpoints
            assert (leader.node_id, leader.host) == (7, "127.0.0.1")
            assert proxy.local == {("new-host", 9): ("127.0.0.1", leader.port)}
            assert _cid == 5  # and the records pass unchanged:
            assert [p.records for t in got.responses for p in t.partitions][:3] == [
                b"",
                None,
                b"\x00" * 600,
            ]
        nursery.cancel_scope.cancel()


def _fetch_v16_request() -> bytes:
    from kio.schema.fetch.v16 import request as r16

    req = r16.FetchRequest(
        replica_state=r16.ReplicaState(),
        max_wait=r16.FetchRequest.__dataclass_fields__["max_wait"].type.parse(
            datetime.timedelta(0)
        ),
        min_bytes=r16.FetchRequest.__dataclass_fields__["min_bytes"].type(1),
        topics=(),
        forgotten_topics_data=(),
        rack_id="",
    )
    return encode_request(req, 5, "test")


async def test_a_broker_that_leaves_twice_is_released_twice() -> None:
    """The rewrite cache must not hide a departure: Metadata without broker 2, with it, and
    the very same answer without it again (a flapping broker) releases its listener again."""
    from tests.proxy.forward.test_rewrite import metadata

    brokers: list[tuple[int, str, int]] = []

    def answer(api_key: int, version: int, cid: int) -> bytes:
        return encode_response(RequestHeader(3, version, cid, None), metadata(*brokers))

    async with trio.open_nursery() as nursery:
        up = await _scripted_upstream(nursery, answer)
        async with running_proxy(up) as (proxy, port), connect(port) as client:

            async def handed_out() -> dict[int, int]:
                meta = await client.request(metadata_request())
                return {b.node_id: b.port for b in meta.brokers}

            both, one = [(1, "127.0.0.1", up), (2, "127.0.0.1", up)], [(1, "127.0.0.1", up)]
            brokers[:] = both
            first = await handed_out()
            for _ in range(2):
                brokers[:] = one
                assert await handed_out() == {1: first[1]}
                assert [k.node_id for k in proxy.listeners] == [1]
                assert await _refused(first[2])
                brokers[:] = both
                assert await handed_out() == first
                assert not await _refused(first[2])
        nursery.cancel_scope.cancel()
