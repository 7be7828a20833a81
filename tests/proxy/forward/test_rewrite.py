"""Broker addresses in responses (proxy/forward/rewrite.py), and the frame helpers the
forwarding connection reads (proxy/forward/frames.py): pure, no sockets."""

from __future__ import annotations

import datetime
import struct
from typing import Any

from kio.schema.api_versions.v3 import response as av
from kio.schema.describe_cluster.v1 import response as dc
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4 import response as fc
from kio.schema.metadata.v12 import response as md
from kio.schema.produce.v3 import request as produce_v3
from kio.schema.produce.v9 import request as produce_v9
from kio.schema.produce.v10 import response as pr
from kio.schema.types import BrokerId
from kio.static.primitive import i16, i32, i32Timedelta

from proxy.forward import rewrite
from proxy.forward.frames import error_answer, kio_range, produce_acks
from tests.proxy.harness import decode_response, encode_request
from wire.codec import encode_response
from wire.headers import RequestHeader, read_fixed_header

NO_TIME = i32Timedelta.parse(datetime.timedelta(0))


def frame_of(api_key: int, version: int, body: Any) -> bytes:
    """A response frame without its size prefix, as the upstream would send it."""
    return encode_response(RequestHeader(api_key, version, 42, None), body)[4:]


def metadata(*brokers: tuple[int, str, int]) -> md.MetadataResponse:
    return md.MetadataResponse(
        throttle_time=NO_TIME,
        brokers=tuple(
            md.MetadataResponseBroker(node_id=BrokerId(n), host=h, port=i32(p), rack=None)
            for n, h, p in brokers
        ),
        cluster_id="c",
        controller_id=BrokerId(1),
        topics=(),
    )


def test_metadata_brokers_found_and_replaced_with_their_node_ids() -> None:
    frame = frame_of(3, 12, metadata((1, "k1", 9092), (2, "k2", 9092), (3, "k3", 9093)))
    decoded = rewrite.decode(3, 12, frame)
    assert [(e.node_id, e.host, e.port) for e in decoded.endpoints] == [
        (1, "k1", 9092),
        (2, "k2", 9092),
        (3, "k3", 9093),
    ]
    local = {(1, "k1", 9092): ("127.0.0.1", 1), (2, "k2", 9092): ("127.0.0.1", 2)}
    out = rewrite.rewrite(decoded, {**local, (3, "k3", 9093): ("127.0.0.1", 3)})
    assert struct.unpack(">i", out[:4])[0] == len(out) - 4
    cid, body = decode_response(3, 12, out[4:])
    assert cid == 42
    assert [(b.node_id, b.host, b.port) for b in body.brokers] == [
        (1, "127.0.0.1", 1),
        (2, "127.0.0.1", 2),
        (3, "127.0.0.1", 3),
    ]
    assert body.cluster_id == "c" and body.controller_id == 1


def test_find_coordinator_v4_keys_rewritten_and_an_error_entry_left_alone() -> None:
    ok = fc.Coordinator(
        key="g",
        node_id=BrokerId(2),
        host="k2",
        port=i32(9092),
        error_code=ErrorCode.none,
        error_message=None,
    )
    bad = fc.Coordinator(
        key="h",
        node_id=BrokerId(-1),
        host="",
        port=i32(-1),
        error_code=ErrorCode.coordinator_not_available,
        error_message=None,
    )
    body = fc.FindCoordinatorResponse(throttle_time=NO_TIME, coordinators=(ok, bad))
    decoded = rewrite.decode(10, 4, frame_of(10, 4, body))
    assert [(e.node_id, e.host) for e in decoded.endpoints] == [(2, "k2")]
    _cid, out = decode_response(10, 4, rewrite.rewrite(decoded, {(2, "k2", 9092): ("p", 7)})[4:])
    assert [(c.host, c.port, c.error_code) for c in out.coordinators] == [
        ("p", 7, ErrorCode.none),
        ("", -1, ErrorCode.coordinator_not_available),
    ]


def test_describe_cluster_uses_broker_id() -> None:
    body = dc.DescribeClusterResponse(
        throttle_time=NO_TIME,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=1,
        cluster_id="c",
        controller_id=BrokerId(5),
        brokers=(
            dc.DescribeClusterBroker(broker_id=BrokerId(5), host="k5", port=i32(1), rack=None),
        ),
        cluster_authorized_operations=0,
    )
    decoded = rewrite.decode(60, 1, frame_of(60, 1, body))
    assert [(e.node_id, e.host, e.port) for e in decoded.endpoints] == [(5, "k5", 1)]


def test_produce_v10_node_endpoints_and_which_versions_carry_them() -> None:
    body = pr.ProduceResponse(
        responses=(),
        throttle_time=NO_TIME,
        node_endpoints=(pr.NodeEndpoint(node_id=BrokerId(3), host="k3", port=i32(9), rack=None),),
    )
    decoded = rewrite.decode(0, 10, frame_of(0, 10, body))
    assert [(e.node_id, e.host) for e in decoded.endpoints] == [(3, "k3")]
    assert rewrite.carries_endpoints(0, 10) and not rewrite.carries_endpoints(0, 9)
    assert rewrite.carries_endpoints(1, 16) and not rewrite.carries_endpoints(1, 15)
    assert not rewrite.carries_endpoints(89, 0)  # StreamsGroupDescribe: the app's endpoints


def test_api_versions_capped_at_what_kio_decodes() -> None:
    top = kio_range(3)[1]  # type: ignore[index]
    body = av.ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=(
            av.ApiVersion(api_key=i16(3), min_version=i16(0), max_version=i16(top + 5)),
            av.ApiVersion(api_key=i16(0), min_version=i16(3), max_version=i16(11)),
        ),
        throttle_time=NO_TIME,
        supported_features=(),
        finalized_features_epoch=-1,
        finalized_features=(),
        zk_migration_ready=False,
    )
    frame = frame_of(18, 3, body)
    out = rewrite.cap_api_versions(3, frame)
    assert out is not None
    _cid, got = decode_response(18, 3, out[4:])
    assert [(k.api_key, k.max_version) for k in got.api_keys] == [(3, top), (0, 11)]
    assert rewrite.cap_api_versions(3, frame_of(18, 3, got)) is None  # nothing to cap


def _produce(module: Any, acks: int, tid: str | None) -> bytes:
    req = module.ProduceRequest(
        transactional_id=tid,
        acks=i16(acks),
        timeout=module.ProduceRequest.__dataclass_fields__["timeout"].type.parse(
            datetime.timedelta(seconds=1)
        ),
        topic_data=(),
    )
    return encode_request(req, 9)[4:]


def test_produce_acks_read_from_the_frame() -> None:
    for module in (produce_v3, produce_v9):
        for acks, tid in ((0, None), (-1, "txn-1"), (1, "")):
            frame = _produce(module, acks, tid)
            header, end = read_fixed_header(frame)
            assert produce_acks(frame, header, end) == acks


def test_error_answer_in_the_api_shape() -> None:
    frame = _produce(produce_v9, -1, None)
    out = error_answer(frame, ErrorCode.not_leader_or_follower)
    assert out is not None
    cid, body = decode_response(0, 9, out[4:])
    assert cid == 9 and body.responses == ()
    assert error_answer(b"\x00\x00", ErrorCode.none) is None


def test_error_answer_when_kafkad_does_not_serve_the_version() -> None:
    from kio.schema.find_coordinator.v0 import request as fc0

    frame = encode_request(fc0.FindCoordinatorRequest(key="g"), 3)[4:]
    out = error_answer(frame, ErrorCode.not_coordinator)
    assert out is not None
    _cid, body = decode_response(10, 0, out[4:])
    assert body.error_code == ErrorCode.not_coordinator
