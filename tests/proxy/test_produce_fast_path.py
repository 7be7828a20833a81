"""The dispatcher's Produce fast path (the registry's ``encode`` hook, wire/produce_response.py)
sends the bytes the generic path (version conversion, then kio's writer) sends, for the same
requests at every served version: appends, a batch refused with a record error (v8+), an unknown
topic and partition. Two fresh brokers get the same requests, one with the hook and one with
the generic path in its place (the handler's ``ProduceAnswer`` made kio's by ``as_kio``)."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.produce.v3 import request as pr3
from kio.schema.produce.v9 import request as pr9

from proxy.dispatch import Dispatcher
from proxy.registry import REGISTRY, entry
from tests.proxy.harness import connect, encode_request, running_broker
from tests.proxy.test_broker_requests import batch, create
from wire.codec import RequestHeader, encode_response, request_class, response_class
from wire.produce_response import ProduceAnswer, as_kio
from wire.records import Record, build_batch
from wire.versions import convert

SERVED = range(3, 12)


def _produce(version: int, topics: list[tuple[str, list[tuple[int, bytes]]]]) -> Any:
    mod: Any = pr9 if version >= 9 else pr3
    req = mod.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=tuple(
            mod.TopicProduceData(
                name=name,
                partition_data=tuple(
                    mod.PartitionProduceData(index=i, records=records) for i, records in parts
                ),
            )
            for name, parts in topics
        ),
    )
    return convert(req, request_class(0, version))


def _keyless(now_ms: int) -> bytes:
    """Two records, the second without a key: refused on a compacted topic (record error 1)."""
    records = [
        Record(offset_delta=i, timestamp_delta=0, key=key, value=b"v", headers=[])
        for i, key in enumerate((b"k", None))
    ]
    return build_batch(records, base_timestamp=now_ms)


def _requests(now_ms: int) -> list[Any]:
    out = []
    for v in SERVED:
        out.append(_produce(v, [("fast", [(0, batch([b"a", b"b"], ts=now_ms))])]))
        out.append(
            _produce(
                v,
                [
                    ("fast", [(1, batch([b"c"], ts=now_ms)), (7, batch([b"d"], ts=now_ms))]),
                    ("nope", [(0, batch([b"e"], ts=now_ms))]),
                    ("compacted", [(0, _keyless(now_ms))]),
                ],
            )
        )
    return out


async def _answers(requests: list[Any]) -> list[bytes | None]:
    async with running_broker() as (server, port):
        assert server.broker is not None
        async with connect(port) as c:
            assert await create(c, "fast", 2) == ErrorCode.none
            assert await create(c, "compacted", cleanup_policy="compact") == ErrorCode.none
        d = Dispatcher(server.broker)
        return [await d.handle(encode_request(r, i)[4:]) for i, r in enumerate(requests)]


async def test_the_fast_path_sends_the_generic_paths_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    now_ms = int(datetime.datetime.now(datetime.UTC).timestamp() * 1000)
    requests = _requests(now_ms)
    fast = await _answers(requests)
    produce = entry(0)
    assert produce.encode is not None

    def generic_path(answer: Any, correlation_id: int, version: int) -> bytes:
        resp = answer if not isinstance(answer, ProduceAnswer) else as_kio(answer, version)
        old = convert(resp, response_class(0, version))
        return encode_response(RequestHeader(0, version, correlation_id, None), old)

    monkeypatch.setitem(REGISTRY, 0, dataclasses.replace(produce, encode=generic_path))
    generic = await _answers(requests)
    assert all(f is not None for f in fast)
    for i, (f, g) in enumerate(zip(fast, generic, strict=True)):
        assert f == g, f"request {i} (produce v{requests[i].__version__})"
