"""ConsumerGroupHeartbeat / ConsumerGroupDescribe and the KIP-848 parts of the group APIs,
raw requests against an in-process broker: each error path with Kafka's code and message."""

from __future__ import annotations

import datetime
from dataclasses import replace

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.consumer_group_describe.v0 import request as cgd0
from kio.schema.consumer_group_describe.v1 import request as cgd
from kio.schema.consumer_group_heartbeat.v0 import request as hb0
from kio.schema.consumer_group_heartbeat.v1 import request as hb
from kio.schema.delete_topics.v5.request import DeleteTopicsRequest
from kio.schema.describe_groups.v6.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.offset_commit.v9 import request as oc
from kio.schema.offset_fetch.v9 import request as of

from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_broker_requests import create

MS = datetime.timedelta(milliseconds=1)
ONE = {"offsets.topic.num.partitions": "1"}
E = ErrorCode


def join(
    group: str, member: str, topics: tuple[str, ...] = ("t",), **kw: object
) -> hb.ConsumerGroupHeartbeatRequest:
    return hb.ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id=member,
        member_epoch=kw.pop("member_epoch", 0),  # type: ignore[arg-type]
        rebalance_timeout=kw.pop("rebalance_timeout", 30000 * MS),  # type: ignore[arg-type]
        subscribed_topic_names=topics,
        topic_partitions=kw.pop("topic_partitions", ()),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


async def beat(
    c: RawClient, req: hb.ConsumerGroupHeartbeatRequest
) -> tuple[ErrorCode, str | None, int]:
    r = await c.request(req)
    return r.error_code, r.error_message, r.member_epoch


async def test_join_describe_list_and_errors() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t", 4) is E.none
        r = await c.request(join("g", "m1"))
        assert (r.error_code, r.member_id, r.member_epoch) == (E.none, "m1", 1)
        assert r.heartbeat_interval == 5000 * MS
        assert r.assignment is not None
        [tp] = r.assignment.topic_partitions
        assert tp.partitions == (0, 1, 2, 3)
        # INVALID_REQUEST paths, with Kafka's messages
        assert await beat(c, join("g", "")) == (E.invalid_request, "MemberId can't be empty.", 0)
        assert await beat(c, join("", "m1")) == (E.invalid_request, "GroupId can't be empty.", 0)
        assert await beat(c, join("g", "m1", topic_partitions=None)) == (
            E.invalid_request,
            "TopicPartitions must be empty when (re-)joining.",
            0,
        )
        assert await beat(c, join("g", "m1", member_epoch=-3)) == (
            E.invalid_request,
            "MemberEpoch is invalid.",
            0,
        )
        assert await beat(c, join("g", "m2", server_assignor="sticky")) == (
            E.unsupported_assignor,
            "ServerAssignor sticky is not supported. Supported assignors: uniform, range.",
            0,
        )
        assert (await beat(c, join("g", "m2", subscribed_topic_regex="t(")))[0] is (
            E.invalid_regular_expression
        )
        assert (await beat(c, join("g", "m1", member_epoch=7)))[0] is E.fenced_member_epoch
        assert await beat(c, join("nope", "m1", member_epoch=3)) == (
            E.group_id_not_found,
            "Consumer group nope not found.",
            0,
        )
        # a leave looks the group up with Kafka's consumerGroup(): its own message
        assert await beat(c, join("nope", "m1", member_epoch=-1)) == (
            E.group_id_not_found,
            "Group nope not found.",
            0,
        )
        # v0: the coordinator names a joining member
        r0 = await c.request(
            hb0.ConsumerGroupHeartbeatRequest(
                group_id="g0",
                member_id="",
                member_epoch=0,
                rebalance_timeout=1000 * MS,
                subscribed_topic_names=("t",),
                topic_partitions=(),
            )
        )
        assert r0.error_code is E.none and len(r0.member_id or "") == 22
        # ConsumerGroupDescribe
        d = await c.request(
            cgd.ConsumerGroupDescribeRequest(
                group_ids=("g", "none"), include_authorized_operations=False
            )
        )
        g, missing = d.groups
        assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch) == (
            E.none,
            "Stable",
            1,
            1,
        )
        assert g.assignor_name == "uniform"
        [m] = g.members
        assert (m.member_id, m.member_epoch, m.member_type, m.subscribed_topic_names) == (
            "m1",
            1,
            1,
            ("t",),
        )
        assert m.assignment.topic_partitions[0].topic_name == "t"
        assert (missing.error_code, missing.error_message) == (
            E.group_id_not_found,
            "Group none not found.",
        )
        # the rest as Kafka's DescribedGroup defaults leave it
        assert (missing.group_state, missing.group_epoch, missing.assignment_epoch) == ("", 0, 0)
        d = await c.request(
            cgd.ConsumerGroupDescribeRequest(group_ids=("",), include_authorized_operations=False)
        )
        assert (d.groups[0].group_id, d.groups[0].error_code) == ("", E.invalid_group_id)
        d0 = await c.request(
            cgd0.ConsumerGroupDescribeRequest(group_ids=("g",), include_authorized_operations=False)
        )
        assert d0.groups[0].members[0].member_id == "m1"
        # ListGroups: the type filter; DescribeGroups: not a classic group
        lg = await c.request(ListGroupsRequest(states_filter=(), types_filter=("consumer",)))
        assert sorted(
            (x.group_id, x.group_type, x.protocol_type, x.group_state) for x in lg.groups
        ) == [
            ("g", "consumer", "consumer", "Stable"),
            ("g0", "consumer", "consumer", "Stable"),
        ]
        lg = await c.request(ListGroupsRequest(states_filter=(), types_filter=("classic",)))
        assert lg.groups == ()
        dg = await c.request(
            DescribeGroupsRequest(groups=("g",), include_authorized_operations=False)
        )
        assert (dg.groups[0].error_code, dg.groups[0].error_message) == (
            E.group_id_not_found,
            "Group g is not a classic group.",
        )
        # leave
        r = await c.request(join("g", "m1", member_epoch=-1, topic_partitions=None))
        assert (r.error_code, r.member_epoch) == (E.none, -1)
        r = await c.request(join("g", "m1", member_epoch=-1, topic_partitions=None))
        assert r.error_code is E.unknown_member_id


def commit_request(group: str, member: str, epoch: int) -> oc.OffsetCommitRequest:
    """Commit offset 5 of t-0 for ``group`` as ``member`` at ``epoch``."""
    return oc.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=epoch,
        member_id=member,
        group_instance_id=None,
        topics=(
            oc.OffsetCommitRequestTopic(
                name="t",
                partitions=(
                    oc.OffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=5,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    ),
                ),
            ),
        ),
    )


async def test_offsets_with_member_epochs() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t", 1) is E.none
        assert (await c.request(join("g", "m1"))).member_epoch == 1

        async def commit(member: str, epoch: int) -> ErrorCode:
            r = await c.request(commit_request("g", member, epoch))
            return ErrorCode(r.topics[0].partitions[0].error_code)

        assert await commit("m1", 1) is E.none
        assert await commit("m1", 2) is E.stale_member_epoch
        assert await commit("zz", 1) is E.unknown_member_id

        async def fetch(member: str | None, epoch: int) -> ErrorCode:
            r = await c.request(
                of.OffsetFetchRequest(
                    groups=(
                        of.OffsetFetchRequestGroup(
                            group_id="g", member_id=member, member_epoch=epoch, topics=None
                        ),
                    ),
                    require_stable=True,
                )
            )
            return ErrorCode(r.groups[0].error_code)

        assert await fetch("m1", 1) is E.none
        assert await fetch(None, -1) is E.none
        assert await fetch("m1", 0) is E.stale_member_epoch
        assert await fetch("zz", 1) is E.unknown_member_id


async def test_a_heartbeat_past_joining_to_a_classic_group_is_not_a_consumer_group() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t", 1) is E.none
        r = await c.request(commit_request("s", "", -1))
        assert r.topics[0].partitions[0].error_code is E.none  # a simple (classic) group
        # Kafka's getOrMaybeCreateConsumerGroup / consumerGroup: the group exists, as classic
        for epoch in (3, -1):
            assert await beat(c, join("s", "m1", member_epoch=epoch)) == (
                E.group_id_not_found,
                "Group s is not a consumer group.",
                0,
            )


async def test_describe_leaves_out_deleted_topics() -> None:
    """Kafka's ConsumerGroupMember.topicPartitionsFromMap: a topic the metadata no longer has
    is left out of the described assignments (not named "")."""
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t", 2) is E.none
        assert await create(c, "u", 2) is E.none
        assert (await c.request(join("g", "m1", topics=("t", "u")))).error_code is E.none
        r = await c.request(DeleteTopicsRequest(topic_names=("t",), timeout=1000 * MS))
        assert r.responses[0].error_code is E.none
        d = await c.request(
            cgd.ConsumerGroupDescribeRequest(group_ids=("g",), include_authorized_operations=False)
        )
        [m] = d.groups[0].members
        for a in (m.assignment, m.target_assignment):
            assert [(tp.topic_name, tp.partitions) for tp in a.topic_partitions] == [("u", (0, 1))]


async def test_consumer_protocol_off() -> None:
    settings = {"group.coordinator.rebalance.protocols": "classic"}
    async with running_broker(**settings) as (_, port), connect(port) as c:
        v = await c.request(
            ApiVersionsRequest(client_software_name="t", client_software_version="1")
        )
        keys = {k.api_key for k in v.api_keys}
        assert 68 not in keys and 69 not in keys
        assert v.supported_features == ()  # v3: a minimum of 0 is left out (KAFKA-17492)
        assert [f.name for f in v.finalized_features] == ["transaction.version"]
        r = await c.request(join("g", "m1"))
        assert r.error_code is E.unsupported_version


async def test_a_restart_keeps_every_members_assignment_and_epoch(tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = f"file://{tmp_path}"
    async with running_broker(data, **ONE) as (_, port), connect(port) as c:
        assert await create(c, "t", 4) is E.none
        a = await c.request(join("g", "a", instance_id="ia"))
        b = await c.request(join("g", "b"))
        assert (a.member_epoch, b.member_epoch) == (1, 2)
        owned_a = a.assignment.topic_partitions  # type: ignore[union-attr]
        # a revokes what b gets; then b is given its half
        r = await c.request(join("g", "a", member_epoch=1, topic_partitions=owned_a))
        keep = r.assignment.topic_partitions  # type: ignore[union-attr]
        r = await c.request(join("g", "a", member_epoch=1, topic_partitions=keep))
        assert r.member_epoch == 2
        r = await c.request(join("g", "b", member_epoch=2, topic_partitions=()))
        got_b = r.assignment.topic_partitions  # type: ignore[union-attr]
        before = await c.request(
            cgd.ConsumerGroupDescribeRequest(group_ids=("g",), include_authorized_operations=False)
        )
    async with running_broker(data, **ONE) as (_, port), connect(port) as c:
        after = await c.request(
            cgd.ConsumerGroupDescribeRequest(group_ids=("g",), include_authorized_operations=False)
        )
        assert after == before
        # both carry on at their epochs with what they own: nothing moves
        r = await c.request(join("g", "a", member_epoch=2, topic_partitions=keep, instance_id="ia"))
        assert (r.error_code, r.member_epoch) == (E.none, 2)
        r = await c.request(join("g", "b", member_epoch=2, topic_partitions=got_b))
        assert (r.error_code, r.member_epoch) == (E.none, 2)
        # a leaves: its tombstones survive a second restart
        r = await c.request(
            join("g", "a", member_epoch=-1, topic_partitions=None, instance_id="ia")
        )
        assert r.error_code is E.none
    async with running_broker(data, **ONE) as (_, port), connect(port) as c:
        d = await c.request(
            cgd.ConsumerGroupDescribeRequest(group_ids=("g",), include_authorized_operations=False)
        )
        assert [m.member_id for m in d.groups[0].members] == ["b"]
        assert d.groups[0].group_epoch == 3


class _Deny:
    """An authorizer refusing what it is given: (operation, resource type, name) triples."""

    def __init__(self, *denied: tuple[object, object, str]) -> None:
        self.denied = set(denied)

    def authorize(self, principal, host, operation, resource_type, name) -> bool:  # type: ignore[no-untyped-def]
        return (operation, resource_type, name) not in self.denied


async def test_authorization() -> None:
    from proxy.acl.model import AclOperation as Op
    from proxy.acl.model import ResourceType as Res

    async with running_broker() as (server, port), connect(port) as c:
        assert await create(c, "t", 2) is E.none
        assert await create(c, "secret", 2) is E.none
        assert (await c.request(join("open", "m1", ("t", "secret")))).error_code is E.none
        assert server.broker is not None
        server.broker.authorizer = _Deny(
            (Op.READ, Res.GROUP, "g"),
            (Op.DESCRIBE, Res.GROUP, "g"),
            (Op.DESCRIBE, Res.TOPIC, "secret"),
        )
        assert (await c.request(join("g", "m1"))).error_code is E.group_authorization_failed
        r = await c.request(join("g2", "m1", ("t", "secret")))
        assert r.error_code is E.topic_authorization_failed
        d = await c.request(
            cgd.ConsumerGroupDescribeRequest(
                group_ids=("open", "g"), include_authorized_operations=False
            )
        )
        assert [(x.error_code, x.error_message, x.members) for x in d.groups] == [
            (E.group_authorization_failed, None, ()),
            (
                E.topic_authorization_failed,
                "The group has described topic(s) that the client is not authorized to describe.",
                (),
            ),
        ]


async def test_describe_answers_authorized_operations_when_asked() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t", 1) is E.none
        assert (await c.request(join("g", "m1"))).error_code is E.none
        d = await c.request(
            cgd.ConsumerGroupDescribeRequest(group_ids=("g",), include_authorized_operations=True)
        )
        # no authorizer: every GROUP operation (READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS,
        # ALTER_CONFIGS)
        assert d.groups[0].authorized_operations == sum(1 << op for op in (3, 6, 8, 10, 11))


async def test_classic_members_inside_a_consumer_group() -> None:
    """JoinGroup/SyncGroup/Heartbeat/LeaveGroup from a classic member of a consumer group (the
    online migration), each error path with Kafka's code; Describe/List show the mixed group."""
    from kio.schema.heartbeat.v4 import request as hbr
    from kio.schema.join_group.v9 import request as jg
    from kio.schema.leave_group.v5 import request as lg5
    from kio.schema.sync_group.v5 import request as sg

    from coordinator.consumer_group.consumer_protocol import decode_assignment
    from coordinator.consumer_group.consumer_protocol import encode_subscription as sub

    def jreq(member: str, ptype: str = "consumer", name: str = "range") -> jg.JoinGroupRequest:
        return jg.JoinGroupRequest(
            group_id="g",
            session_timeout=10_000 * MS,
            rebalance_timeout=10_000 * MS,
            member_id=member,
            group_instance_id=None,
            protocol_type=ptype,
            protocols=(jg.JoinGroupRequestProtocol(name=name, metadata=sub(["t"], {}, 1)),),
            reason=None,
        )

    def sreq(member: str, gen: int, name: str = "range") -> sg.SyncGroupRequest:
        return sg.SyncGroupRequest(
            group_id="g",
            generation_id=gen,
            member_id=member,
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name=name,
            assignments=(),
        )

    def beat_req(member: str, gen: int) -> hbr.HeartbeatRequest:
        return hbr.HeartbeatRequest(
            group_id="g", generation_id=gen, member_id=member, group_instance_id=None
        )

    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t", 4) is E.none
        r = await c.request(join("g", "m1"))
        assert r.member_epoch == 1
        first = await c.request(jreq(""))
        assert first.error_code is E.member_id_required and first.member_id
        k = first.member_id
        assert (await c.request(jreq(k, ptype="connect"))).error_code is (
            E.inconsistent_group_protocol
        )
        j = await c.request(jreq(k))
        assert (j.error_code, j.generation_id, j.protocol_type, j.protocol_name, j.leader) == (
            E.none,
            2,
            "consumer",
            "range",
            "",
        )
        assert (await c.request(sreq(k, 7))).error_code is E.illegal_generation
        assert (await c.request(sreq(k, 2, "roundrobin"))).error_code is (
            E.inconsistent_group_protocol
        )
        assert (await c.request(sreq("m1", 1))).error_code is E.unknown_member_id
        s = await c.request(sreq(k, 2))
        assert s.error_code is E.none and decode_assignment(s.assignment) == ()
        assert (await c.request(beat_req(k, 3))).error_code is E.illegal_generation
        assert (await c.request(beat_req(k, 2))).error_code is E.none  # waits on m1's revoking
        # m1 revokes; the classic member is told to rejoin and gets its share
        r = await c.request(join("g", "m1", member_epoch=1, topic_partitions=None))
        assert r.assignment is not None
        kept = r.assignment.topic_partitions[0].partitions
        own = (
            hb.TopicPartitions(topic_id=r.assignment.topic_partitions[0].topic_id, partitions=kept),
        )
        await c.request(join("g", "m1", member_epoch=r.member_epoch, topic_partitions=own))
        assert (await c.request(beat_req(k, 2))).error_code is E.rebalance_in_progress
        j = await c.request(jreq(k))
        s = await c.request(sreq(k, j.generation_id))
        [(_, got)] = decode_assignment(s.assignment)
        assert set(got) | set(kept) == {0, 1, 2, 3} and not set(got) & set(kept)
        d = await c.request(
            cgd.ConsumerGroupDescribeRequest(group_ids=("g",), include_authorized_operations=False)
        )
        assert sorted((m.member_id, m.member_type) for m in d.groups[0].members) == sorted(
            [("m1", 1), (k, 0)]
        )
        lg = await c.request(ListGroupsRequest(states_filter=(), types_filter=()))
        assert [(x.group_id, x.group_type) for x in lg.groups] == [("g", "consumer")]
        # LeaveGroup removes any member, a consumer-protocol one too (Kafka 4.2's
        # classicGroupLeaveToConsumerGroup checks no protocol)
        out = await c.request(
            lg5.LeaveGroupRequest(
                group_id="g",
                members=(
                    lg5.MemberIdentity(member_id="m1", group_instance_id=None, reason=None),
                    lg5.MemberIdentity(member_id=k, group_instance_id=None, reason=None),
                ),
            )
        )
        assert [(m.member_id, m.error_code) for m in out.members] == [("m1", E.none), (k, E.none)]


async def test_a_regex_python_cannot_compile_is_answered_and_the_member_goes_on() -> None:
    """A regex whose repeat count overflows Python's parser is answered
    INVALID_REGULAR_EXPRESSION like any other bad regex, one nested deeper than Python's parser
    recurses is resolved; the connection and the group stay usable."""
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t", 1) is E.none
        req = join("g", "m1", subscribed_topic_regex="t{4294967296}")
        r = await c.request(replace(req, subscribed_topic_names=None))
        assert r.error_code is E.invalid_regular_expression, r
        assert r.error_message == (
            "SubscribedTopicRegex `t{4294967296}` is not a valid regular expression: "
            "invalid repeat count."
        )
        req = join("g", "m1", subscribed_topic_regex="(" * 5000 + "t" + ")" * 5000)
        ok = await c.request(replace(req, subscribed_topic_names=None))
        assert ok.error_code is E.none and ok.member_epoch == 1
        [assigned] = ok.assignment.topic_partitions
        assert assigned.partitions == (0,)


async def test_a_regex_resolves_to_the_topics_the_member_may_describe() -> None:
    """Kafka 4.x (GroupMetadataManager.filterTopicDescribeAuthorizedTopics) leaves out of a
    regex's resolution the topics the heartbeating member may not DESCRIBE."""
    from proxy.acl.model import AclOperation as Op
    from proxy.acl.model import ResourceType as Res

    async with running_broker() as (server, port), connect(port) as c:
        assert await create(c, "t-open", 1) is E.none
        assert await create(c, "t-secret", 1) is E.none
        assert server.broker is not None
        server.broker.authorizer = _Deny((Op.DESCRIBE, Res.TOPIC, "t-secret"))
        req = join("g", "m1", subscribed_topic_regex="t-.*")
        r = await c.request(replace(req, subscribed_topic_names=None))
        assert r.error_code is E.none
        ids = {t.topic_id for t in r.assignment.topic_partitions}
        d = await c.request(
            cgd.ConsumerGroupDescribeRequest(group_ids=("g",), include_authorized_operations=False)
        )
        assert d.groups[0].error_code is E.none  # else a topic it may not describe is in it
        [member] = d.groups[0].members
        names = {t.topic_name for t in member.assignment.topic_partitions}
        assert names == {"t-open"} and len(ids) == 1
