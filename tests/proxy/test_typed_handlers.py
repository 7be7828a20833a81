"""Typed handlers: each takes the newest request class it serves and returns the newest
response class; every field only older versions have is mapped by the handler's own
upgrade/downgrade hooks, so no version loses a field on the way."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from proxy.handlers.metadata import CLUSTER_OPERATIONS
from proxy.registry import entry, served
from wire.codec import request_class, response_class
from wire.values import NO_THROTTLE
from wire.versions import convert, removed_fields

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
    h = entry(api_key)
    if h.as_sent:  # the handler reads and answers each version's own classes (Fetch)
        return
    lost = set(removed_fields(request_class(api_key, version), h.request))
    if lost - READ_ELSEWHERE.get(api_key, set()):
        assert h.upgrade is not None, f"api {api_key} v{version}: request fields lost"
    if removed_fields(response_class(api_key, version), h.response):
        assert h.downgrade is not None, f"api {api_key} v{version}: response fields lost"


def _round_trip(api_key: int, version: int, old_req: Any, answer: Any) -> Any:
    """``old_req`` as its handler sees it, and ``answer`` (built from that) as the client
    of ``version`` gets it."""
    h = entry(api_key)
    req = h.read(old_req)
    assert type(req) is h.request
    return req, h.write(answer(req), old_req, version)


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
    from kio.schema.metadata.v13 import response as md13

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
        lambda _req: md13.MetadataResponse(
            throttle_time=NO_THROTTLE,
            brokers=(md13.MetadataResponseBroker(node_id=1, host="h", port=9, rack=None),),
            topics=(),
            error_code=ErrorCode.none,
        ),
    )
    assert resp.cluster_authorized_operations == expected


def test_every_module_registers_what_the_table_says() -> None:
    from proxy.handlers import MODULES, load_all
    from proxy.registry import REGISTRY

    load_all()
    assert sorted(REGISTRY) == sorted(MODULES)
    for key, (_, name, (low, high), min_served) in MODULES.items():
        h = REGISTRY[key]
        assert (h.fn.__name__, h.min_version, h.max_version, h.min_served) == (
            name,
            low,
            high,
            min_served,
        )


def test_starting_the_server_loads_no_handler_module() -> None:
    """Handlers load on their API's first request: start-up does not pay for their classes."""
    import subprocess
    import sys

    code = (
        "import sys, proxy.server, proxy.cli; "
        "loaded = [m for m in sys.modules if m.startswith('proxy.handlers.')]; "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("version", range(0, 6))
def test_init_producer_id_error_reply_has_no_producer_id_and_no_epoch(version: int) -> None:
    """Kafka's ``InitProducerIdRequest.getErrorResponse``: producer id -1 and epoch -1 (not an
    epoch 0 a client could take for a real one)."""
    from kio.schema.init_producer_id.v0 import request as ipi0

    h = entry(22)
    v0 = ipi0.InitProducerIdRequest(transactional_id=None, transaction_timeout=60000)
    old = convert(v0, request_class(22, version))
    resp = h.write(h.error_reply(h.read(old), ErrorCode.not_coordinator), old, version)
    assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (
        ErrorCode.not_coordinator,
        -1,
        -1,
    )


def test_list_partition_reassignments_error_reply_echoes_the_partitions_asked_for() -> None:
    """Kafka's ``ListPartitionReassignmentsRequest.getErrorResponse``: the code at the top level
    and every named partition echoed (with empty replica lists)."""
    from kio.schema.list_partition_reassignments.v0 import request as lpr0

    req = lpr0.ListPartitionReassignmentsRequest(
        timeout=60000,
        topics=(lpr0.ListPartitionReassignmentsTopics(name="t", partition_indexes=(0, 2)),),
    )
    resp = entry(46).error_reply(req, ErrorCode.not_controller)
    assert resp.error_code == ErrorCode.not_controller
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in resp.topics] == [
        ("t", [0, 2])
    ]
    assert all(p.replicas == () for t in resp.topics for p in t.partitions)


def test_describe_groups_error_reply_has_an_unknown_state() -> None:
    """Kafka's ``DescribeGroupsResponse.groupError``: state "" (UNKNOWN_STATE), not Dead."""
    from kio.schema.describe_groups.v5 import request as dg5

    req = dg5.DescribeGroupsRequest(groups=("g",), include_authorized_operations=False)
    (group,) = entry(15).error_reply(req, ErrorCode.not_coordinator).groups
    assert (group.group_id, group.error_code, group.group_state, group.protocol_type) == (
        "g",
        ErrorCode.not_coordinator,
        "",
        "",
    )


async def test_describe_groups_while_the_coordinator_shuts_down_answers_an_unknown_state() -> None:
    """The handler's own error path answers like the error reply; a missing group stays Dead."""
    from kio.schema.describe_groups.v0 import request as dg0

    from tests.proxy.harness import connect, running_broker

    async with running_broker() as (server, port), connect(port) as client:
        (missing,) = (await client.request(dg0.DescribeGroupsRequest(groups=("g",)))).groups
        assert (missing.error_code, missing.group_state) == (ErrorCode.none, "Dead")
        server.broker.groups.begin_shutdown()
        (group,) = (await client.request(dg0.DescribeGroupsRequest(groups=("g",)))).groups
        assert (group.error_code, group.group_state) == (ErrorCode.not_coordinator, "")


def test_metadata_error_reply_names_a_topic_asked_for_by_id_with_an_empty_name() -> None:
    """Kafka's ``MetadataRequest.getErrorResponse`` turns a null name into "" (v12 included)."""
    import uuid

    from kio.schema.metadata.v13 import request as m13

    topic_id = uuid.uuid4()
    req = m13.MetadataRequest(
        topics=(m13.MetadataRequestTopic(topic_id=topic_id, name=None),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    (topic,) = entry(3).error_reply(req, ErrorCode.unknown_server_error).topics
    assert (topic.name, topic.topic_id, topic.error_code) == (
        "",
        topic_id,
        ErrorCode.unknown_server_error,
    )


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


def test_alter_partition_reassignments_error_reply_leaves_the_flag_at_its_default() -> None:
    """Kafka's ``AlterPartitionReassignmentsRequest.getErrorResponse`` never sets
    AllowReplicationFactorChange, so an error reply carries the schema default, true, whatever
    the request asked (only an answer echoes the request's flag)."""
    from kio.schema.alter_partition_reassignments.v1 import request as apr1

    req = apr1.AlterPartitionReassignmentsRequest(
        timeout=60000,
        allow_replication_factor_change=False,
        topics=(
            apr1.ReassignableTopic(
                name="t", partitions=(apr1.ReassignablePartition(partition_index=0, replicas=()),)
            ),
        ),
    )
    resp = entry(45).error_reply(req, ErrorCode.not_controller)
    assert resp.allow_replication_factor_change is True
    assert resp.error_code == ErrorCode.not_controller
    assert [(t.name, [p.error_code for p in t.partitions]) for t in resp.responses] == [
        ("t", [ErrorCode.not_controller])
    ]


def test_alter_replica_log_dirs_error_reply_echoes_each_dir_entry() -> None:
    """Kafka's ``AlterReplicaLogDirsRequest.getErrorResponse``: one topic result per (dir, topic)
    entry of the request, its partitions as listed, nothing merged or dropped."""
    from kio.schema.alter_replica_log_dirs.v2 import request as arld2

    req = arld2.AlterReplicaLogDirsRequest(
        dirs=(
            arld2.AlterReplicaLogDir(
                path="/a", topics=(arld2.AlterReplicaLogDirTopic(name="t", partitions=(0, 1)),)
            ),
            arld2.AlterReplicaLogDir(
                path="/b",
                topics=(
                    arld2.AlterReplicaLogDirTopic(name="t", partitions=(1,)),
                    arld2.AlterReplicaLogDirTopic(name="u", partitions=(0,)),
                ),
            ),
        )
    )
    resp = entry(34).error_reply(req, ErrorCode.cluster_authorization_failed)
    got = [
        (t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions])
        for t in resp.results
    ]
    e = ErrorCode.cluster_authorization_failed
    assert got == [("t", [(0, e), (1, e)]), ("t", [(1, e)]), ("u", [(0, e)])]
