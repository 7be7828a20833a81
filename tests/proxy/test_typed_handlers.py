"""Typed handlers: each takes the newest request class it serves and returns the newest
response class; every field only older versions have is mapped by the handler's own
upgrade/downgrade hooks, so no version loses a field on the way."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from proxy.handlers.metadata import CLUSTER_OPERATIONS
from proxy.registry import REGISTRY, served
from wire.codec import request_class, response_class
from wire.values import NO_THROTTLE
from wire.versions import removed_fields

PAIRS = [(k, v) for k, (lo, hi) in served().items() for v in range(lo, hi)]
# Old-version request fields the newest request has no place for, and who reads them instead.
READ_ELSEWHERE = {
    3: {"include_cluster_authorized_operations"},  # Metadata v8-10: its downgrade hook
    8: {"retention_time"},  # OffsetCommit v2-4: not used (offsets expire by the broker's config)
}


@pytest.mark.parametrize(("api_key", "version"), PAIRS)
def test_fields_only_old_versions_have_are_mapped_by_the_handler(
    api_key: int, version: int
) -> None:
    entry = REGISTRY[api_key]
    lost = set(removed_fields(request_class(api_key, version), entry.request))
    if lost - READ_ELSEWHERE.get(api_key, set()):
        assert entry.upgrade is not None, f"api {api_key} v{version}: request fields lost"
    if removed_fields(response_class(api_key, version), entry.response):
        assert entry.downgrade is not None, f"api {api_key} v{version}: response fields lost"


def _round_trip(api_key: int, version: int, old_req: Any, answer: Any) -> Any:
    """``old_req`` as its handler sees it, and ``answer`` (built from that) as the client
    of ``version`` gets it."""
    entry = REGISTRY[api_key]
    req = entry.read(old_req)
    assert type(req) is entry.request
    return req, entry.write(answer(req), old_req, version)


def test_find_coordinator_v3_asks_for_one_key_and_gets_it_at_the_top_level() -> None:
    from kio.schema.find_coordinator.v3 import request as fc3
    from kio.schema.find_coordinator.v4 import response as fc4

    def answer(req: Any) -> Any:
        assert req.coordinator_keys == ("g",) and req.key_type == 1
        coordinator = fc4.Coordinator(
            key="g", node_id=7, host="h", port=9, error_code=ErrorCode.none, error_message=None
        )
        return fc4.FindCoordinatorResponse(throttle_time=NO_THROTTLE, coordinators=(coordinator,))

    _, resp = _round_trip(10, 3, fc3.FindCoordinatorRequest(key="g", key_type=1), answer)
    assert (resp.node_id, resp.host, resp.port, resp.error_code) == (7, "h", 9, ErrorCode.none)


def test_leave_group_v2_names_one_member_and_gets_its_code() -> None:
    from kio.schema.leave_group.v2 import request as lg2
    from kio.schema.leave_group.v5 import response as lg5

    def answer(req: Any) -> Any:
        assert [m.member_id for m in req.members] == ["m-1"]
        member = lg5.MemberResponse(
            member_id="m-1", group_instance_id=None, error_code=ErrorCode.unknown_member_id
        )
        return lg5.LeaveGroupResponse(
            throttle_time=NO_THROTTLE, error_code=ErrorCode.none, members=(member,)
        )

    _, resp = _round_trip(13, 2, lg2.LeaveGroupRequest(group_id="g", member_id="m-1"), answer)
    assert resp.error_code == ErrorCode.unknown_member_id


@pytest.mark.parametrize(("wanted", "expected"), [(True, CLUSTER_OPERATIONS), (False, -(2**31))])
def test_metadata_v10_gets_the_cluster_operations_it_asked_for(wanted: bool, expected: int) -> None:
    from kio.schema.metadata.v10 import request as md10
    from kio.schema.metadata.v12 import response as md12

    old = md10.MetadataRequest(
        topics=None,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=wanted,
        include_topic_authorized_operations=False,
    )
    _, resp = _round_trip(
        3,
        10,
        old,
        lambda _req: md12.MetadataResponse(
            throttle_time=NO_THROTTLE,
            brokers=(md12.MetadataResponseBroker(node_id=1, host="h", port=9, rack=None),),
            topics=(),
        ),
    )
    assert resp.cluster_authorized_operations == expected


@pytest.mark.parametrize("version", [10, 11])
async def test_metadata_v10_v11_asking_by_id_or_without_a_name_is_an_invalid_request(
    version: int,
) -> None:
    """Kafka's handleTopicMetadataRequest refuses a null name or a topic id below v12 with
    InvalidRequestException: the error reply, every topic INVALID_REQUEST. The pre-typed broker
    died on a null name here."""
    import importlib
    import uuid

    from tests.proxy.harness import connect, running_broker

    mod = importlib.import_module(f"kio.schema.metadata.v{version}.request")
    some_id = uuid.UUID(int=7)
    asks = [
        (
            mod.MetadataRequestTopic(topic_id=None, name=None),
            mod.MetadataRequestTopic(topic_id=None, name="x"),
        ),
        (mod.MetadataRequestTopic(topic_id=some_id, name="y"),),
    ]
    async with running_broker() as (_, port), connect(port) as c:
        for topics in asks:
            resp = await c.request(
                mod.MetadataRequest(
                    topics=topics,
                    allow_auto_topic_creation=True,
                    include_topic_authorized_operations=False,
                    **({"include_cluster_authorized_operations": False} if version < 11 else {}),
                )
            )
            assert [(t.name, t.error_code) for t in resp.topics] == [
                (t.name or "", ErrorCode.invalid_request) for t in topics
            ]
