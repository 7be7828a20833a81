"""The dispatcher's failure path: a handler bug costs one request, answered in the API's own
response shape with UNKNOWN_SERVER_ERROR, and the connection stays usable."""

from __future__ import annotations

import dataclasses
import datetime

import pytest
from kio.index import load_response_schema
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import request as md
from kio.schema.produce.v9 import request as pr

from proxy.registry import REGISTRY, advertised, entry, served
from tests.proxy.harness import connect, running_broker
from wire.codec import RequestHeader, encode_response
from wire.versions import error_response

PAIRS = [(k, v) for k, (lo, hi) in served().items() for v in range(lo, hi + 1)]


@pytest.mark.parametrize(("api_key", "version"), PAIRS)
def test_error_response_encodes_for_every_served_version(api_key: int, version: int) -> None:
    cls = load_response_schema(api_key, version)
    resp = error_response(cls, ErrorCode.unknown_server_error)
    frame = encode_response(RequestHeader(api_key, version, 42, "t"), resp)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert int.from_bytes(frame[4:8], "big") == 42


def test_advertised_covers_served() -> None:
    for key, (lo, hi) in served().items():
        alo, ahi = advertised()[key]
        assert alo <= lo and ahi == hi


async def test_a_failing_handler_costs_one_request(monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(ctx: object, req: object) -> object:
        raise RuntimeError("a bug")

    original = entry(3)
    monkeypatch.setitem(REGISTRY, 3, dataclasses.replace(original, fn=broken))
    async with running_broker() as (_, port), connect(port) as c:
        resp = await c.request(
            md.MetadataRequest(
                topics=(md.MetadataRequestTopic(topic_id=None, name="x"),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        assert resp.brokers == ()  # as Kafka's getErrorResponse: each topic with the error
        assert [(t.name, t.error_code) for t in resp.topics] == [
            ("x", ErrorCode.unknown_server_error)
        ]
        again = await c.request(ApiVersionsRequest())
        assert again.error_code == ErrorCode.none


async def test_a_failing_produce_handler_reports_the_error_per_partition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As Kafka's getErrorResponse: every partition the request named carries the error."""

    async def broken(ctx: object, req: object) -> object:
        raise RuntimeError("a bug")

    original = entry(0)
    monkeypatch.setitem(REGISTRY, 0, dataclasses.replace(original, fn=broken))
    async with running_broker() as (_, port), connect(port) as c:
        resp = await c.request(
            pr.ProduceRequest(
                transactional_id=None,
                acks=1,
                timeout=datetime.timedelta(seconds=1),
                topic_data=(
                    pr.TopicProduceData(
                        name="a",
                        partition_data=(
                            pr.PartitionProduceData(index=0, records=b""),
                            pr.PartitionProduceData(index=3, records=b""),
                        ),
                    ),
                ),
            )
        )
        [topic] = resp.responses
        assert topic.name == "a"
        assert [(p.index, p.error_code, p.base_offset) for p in topic.partition_responses] == [
            (0, ErrorCode.unknown_server_error, -1),
            (3, ErrorCode.unknown_server_error, -1),
        ]


async def test_a_fetch_below_v7_is_answered_and_counted() -> None:
    """Fetch v4-6 responses have no top-level error code; counting their errors for /metrics
    once killed the broker."""
    from kio.schema.fetch.v4 import request as f4

    async with running_broker() as (server, port), connect(port) as c:
        resp = await c.request(
            f4.FetchRequest(
                replica_id=-1,
                max_wait=datetime.timedelta(0),
                min_bytes=0,
                max_bytes=1000,
                isolation_level=0,
                topics=(
                    f4.FetchTopic(
                        topic="nope",
                        partitions=(
                            f4.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=99),
                        ),
                    ),
                ),
            )
        )
        [topic] = resp.responses
        assert topic.partitions[0].error_code == ErrorCode.unknown_topic_or_partition
        assert (await c.request(ApiVersionsRequest())).error_code == ErrorCode.none
        assert server.broker is not None
        fetch_stats = server.broker.metrics.requests.by_key[1]
        assert fetch_stats is not None
        assert fetch_stats.errors == {ErrorCode.unknown_topic_or_partition: 1}


async def test_a_bug_outside_the_handlers_costs_one_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An exception the dispatcher does not turn into an error reply closes that connection,
    logged; the broker and its other connections carry on."""
    import proxy.dispatch

    real = proxy.dispatch.encode_response

    def broken(header: RequestHeader, body: object) -> bytes:
        if header.api_key == 3:
            raise RuntimeError("a bug")
        return real(header, body)

    monkeypatch.setattr(proxy.dispatch, "encode_response", broken)
    async with running_broker() as (_, port), connect(port) as other:
        async with connect(port) as c:
            with pytest.raises(AssertionError, match="broker closed the connection"):
                await c.request(
                    md.MetadataRequest(
                        topics=None,
                        allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False,
                    )
                )
        assert (await other.request(ApiVersionsRequest())).error_code == ErrorCode.none
