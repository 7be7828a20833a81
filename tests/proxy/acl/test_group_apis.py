"""The consumer-group APIs with an authorizer: GROUP READ / DESCRIBE / DELETE and topic READ /
DESCRIBE where Kafka 4's KafkaApis asks for them, each refusal with its error code."""

from __future__ import annotations

from kio.schema.delete_groups.v2 import request as dg
from kio.schema.describe_groups.v6 import request as dsg
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3 import request as fc3
from kio.schema.find_coordinator.v6 import request as fc
from kio.schema.heartbeat.v4 import request as hb
from kio.schema.join_group.v9 import request as jg
from kio.schema.leave_group.v5 import request as lg
from kio.schema.list_groups.v5 import request as lsg
from kio.schema.offset_commit.v9 import request as oc
from kio.schema.offset_delete.v0 import request as od
from kio.schema.offset_fetch.v8 import request as of
from kio.schema.sync_group.v5 import request as sg

from proxy.acl.checks import GROUP_OPERATIONS
from tests.proxy.acl.harness import MS, Op, Type, codes, create, secured

E = ErrorCode


def commit(group: str, *topics: str) -> object:
    return oc.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=tuple(
            oc.OffsetCommitRequestTopic(
                name=t,
                partitions=(
                    oc.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=0, committed_metadata=""
                    ),
                ),
            )
            for t in topics
        ),
    )


async def test_offset_commit_needs_group_read_then_topic_read() -> None:
    async with secured() as (c, grants, _):
        await create(c, "mine", "theirs")
        grants.open = False
        resp = await c.request(commit("g", "mine"))
        assert codes(resp.topics) == {("mine", 0): E.group_authorization_failed}
        grants.grant(Op.READ, Type.GROUP, "g")
        grants.grant(Op.READ, Type.TOPIC, "mine")
        resp = await c.request(commit("g", "mine", "theirs", "missing"))
        assert codes(resp.topics) == {
            ("mine", 0): E.none,
            ("theirs", 0): E.topic_authorization_failed,
            ("missing", 0): E.topic_authorization_failed,
        }


async def test_offset_fetch_needs_group_describe_and_hides_or_refuses_topics() -> None:
    async with secured() as (c, grants, _):
        await create(c, "mine", "theirs")
        await c.request(commit("g", "mine", "theirs"))
        grants.open = False
        grants.grant(Op.DESCRIBE, Type.TOPIC, "mine")
        every = of.OffsetFetchRequest(
            groups=(of.OffsetFetchRequestGroup(group_id="g", topics=None),)
        )
        resp = await c.request(every)
        assert resp.groups[0].error_code == E.group_authorization_failed
        grants.grant(Op.DESCRIBE, Type.GROUP, "g")
        resp = await c.request(every)
        assert [t.name for t in resp.groups[0].topics] == ["mine"]
        some = of.OffsetFetchRequest(
            groups=(
                of.OffsetFetchRequestGroup(
                    group_id="g",
                    topics=tuple(
                        of.OffsetFetchRequestTopics(name=t, partition_indexes=(0,))
                        for t in ("theirs", "mine")
                    ),
                ),
            )
        )
        group = (await c.request(some)).groups[0]
        assert [t.name for t in group.topics] == ["mine", "theirs"]
        refused = group.topics[1].partitions[0]
        assert (refused.error_code, refused.committed_offset) == (E.topic_authorization_failed, -1)


async def test_join_sync_heartbeat_leave_need_group_read() -> None:
    requests = [
        jg.JoinGroupRequest(
            group_id="g",
            session_timeout=10_000 * MS,
            rebalance_timeout=10_000 * MS,
            member_id="",
            protocol_type="consumer",
            protocols=(jg.JoinGroupRequestProtocol(name="range", metadata=b""),),
        ),
        sg.SyncGroupRequest(
            group_id="g",
            generation_id=1,
            member_id="m",
            protocol_type="consumer",
            protocol_name="range",
            assignments=(),
        ),
        hb.HeartbeatRequest(group_id="g", generation_id=1, member_id="m"),
        lg.LeaveGroupRequest(group_id="g", members=(lg.MemberIdentity(member_id="m"),)),
    ]
    async with secured() as (c, grants, _):
        grants.open = False
        grants.grant(Op.DESCRIBE, Type.GROUP, "g")  # not enough
        for r in requests:
            assert (await c.request(r)).error_code == E.group_authorization_failed, r
        join = await c.request(requests[0])
        assert (join.generation_id, join.member_id, join.members) == (-1, "", ())


async def test_sync_group_v5_without_protocol_is_inconsistent_before_authorization() -> None:
    """v5 makes protocol type and name mandatory: Kafka's handleSyncGroupRequest refuses a null
    one INCONSISTENT_GROUP_PROTOCOL before it asks the authorizer."""
    async with secured() as (c, grants, _):
        grants.open = False
        for protocol_type, protocol_name in ((None, "range"), ("consumer", None)):
            resp = await c.request(
                sg.SyncGroupRequest(
                    group_id="g",
                    generation_id=1,
                    member_id="m",
                    protocol_type=protocol_type,
                    protocol_name=protocol_name,
                    assignments=(),
                )
            )
            assert resp.error_code == E.inconsistent_group_protocol
            assert (resp.protocol_type, resp.protocol_name, resp.assignment) == (None, None, b"")


async def test_describe_groups_refuses_first_and_fills_operations() -> None:
    async with secured() as (c, grants, _):
        grants.open = False
        grants.grant(Op.DESCRIBE, Type.GROUP, "seen")
        resp = await c.request(
            dsg.DescribeGroupsRequest(groups=("seen", "hidden"), include_authorized_operations=True)
        )
        assert [(g.group_id, g.error_code) for g in resp.groups] == [
            ("hidden", E.group_authorization_failed),
            ("seen", E.group_id_not_found),
        ]
        grants.open = True
        await create(c, "t")
        await c.request(commit("seen", "t"))
        resp = await c.request(
            dsg.DescribeGroupsRequest(groups=("seen",), include_authorized_operations=True)
        )
        assert resp.groups[0].authorized_operations == GROUP_OPERATIONS


async def test_list_groups_shows_describable_groups_unless_cluster_describe() -> None:
    async with secured() as (c, grants, _):
        await create(c, "t")
        await c.request(commit("seen", "t"))
        await c.request(commit("hidden", "t"))
        grants.open = False
        grants.grant(Op.DESCRIBE, Type.GROUP, "seen")
        resp = await c.request(lsg.ListGroupsRequest())
        assert [g.group_id for g in resp.groups] == ["seen"]
        grants.grant(Op.DESCRIBE, Type.CLUSTER)
        resp = await c.request(lsg.ListGroupsRequest())
        assert [g.group_id for g in resp.groups] == ["hidden", "seen"]


async def test_delete_groups_needs_group_delete_and_answers_refusals_last() -> None:
    async with secured() as (c, grants, _):
        grants.open = False
        grants.grant(Op.DELETE, Type.GROUP, "mine")
        resp = await c.request(dg.DeleteGroupsRequest(groups_names=("theirs", "mine", "theirs")))
        assert [(r.group_id, r.error_code) for r in resp.results] == [
            ("mine", E.group_id_not_found),
            ("theirs", E.group_authorization_failed),
        ]


async def test_offset_delete_needs_group_delete_then_topic_read() -> None:
    def req(*topics: str) -> object:
        return od.OffsetDeleteRequest(
            group_id="g",
            topics=tuple(
                od.OffsetDeleteRequestTopic(
                    name=t, partitions=(od.OffsetDeleteRequestPartition(partition_index=0),)
                )
                for t in topics
            ),
        )

    async with secured() as (c, grants, _):
        await create(c, "mine", "theirs")
        await c.request(commit("g", "mine", "theirs"))
        grants.open = False
        grants.grant(Op.READ, Type.TOPIC, "mine")
        resp = await c.request(req("mine"))
        assert (resp.error_code, resp.topics) == (E.group_authorization_failed, ())
        grants.grant(Op.DELETE, Type.GROUP, "g")
        resp = await c.request(req("mine", "theirs"))
        assert resp.error_code == E.none
        assert codes(resp.topics) == {
            ("mine", 0): E.none,
            ("theirs", 0): E.topic_authorization_failed,
        }


async def test_find_coordinator_for_share_keys_needs_cluster_action() -> None:
    """Kafka's getCoordinator asks CLUSTER_ACTION for a SHARE key (v6) and fails the whole
    request without it; with it, kafkad (no share groups) answers INVALID_REQUEST."""
    req = fc.FindCoordinatorRequest(key_type=2, coordinator_keys=("g:t:0", "g:t:1"))
    async with secured() as (c, grants, _):
        grants.open = False
        resp = await c.request(req)
        assert [k.error_code for k in resp.coordinators] == [E.cluster_authorization_failed] * 2
        grants.grant(Op.CLUSTER_ACTION, Type.CLUSTER)
        resp = await c.request(req)
        assert [k.error_code for k in resp.coordinators] == [E.invalid_request] * 2


async def test_find_coordinator_needs_describe_on_the_key() -> None:
    async with secured() as (c, grants, _):
        grants.open = False
        grants.grant(Op.DESCRIBE, Type.GROUP, "g")
        grants.grant(Op.DESCRIBE, Type.TRANSACTIONAL_ID, "tx")
        groups = await c.request(fc.FindCoordinatorRequest(key_type=0, coordinator_keys=("g", "x")))
        assert [k.error_code for k in groups.coordinators] == [
            E.none,
            E.group_authorization_failed,
        ]
        assert groups.coordinators[1].error_message is None
        txns = await c.request(fc.FindCoordinatorRequest(key_type=1, coordinator_keys=("tx", "x")))
        assert [k.error_code for k in txns.coordinators] == [
            E.none,
            E.transactional_id_authorization_failed,
        ]
        old = await c.request(fc3.FindCoordinatorRequest(key="x", key_type=1))
        assert old.error_code == E.transactional_id_authorization_failed
        assert old.error_message == "Transactional Id authorization failed."
        assert (old.node_id, old.host, old.port) == (-1, "", -1)
