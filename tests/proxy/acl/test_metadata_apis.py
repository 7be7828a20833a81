"""Metadata, DescribeTopicPartitions and DescribeCluster with an authorizer: topics the
principal may not DESCRIBE are left out or refused without revealing whether they exist,
auto-creation needs CREATE, and authorized-operations bitfields hold what is granted."""

from __future__ import annotations

from kio.schema.describe_cluster.v2 import request as dcl
from kio.schema.describe_topic_partitions.v0 import request as dtp
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v10 import request as md10
from kio.schema.metadata.v12 import request as md

from proxy.acl.checks import CLUSTER_OPERATIONS, TOPIC_OPERATIONS
from tests.proxy.acl.harness import Op, Type, create, secured
from wire.values import ZERO_UUID

E = ErrorCode
OMITTED = -(2**31)


def metadata(*names: str | None, ops: bool = False, auto: bool = False, ids: tuple = ()) -> object:
    topics = (
        None
        if names == (None,)
        else tuple(md.MetadataRequestTopic(topic_id=None, name=n) for n in names)
        + tuple(md.MetadataRequestTopic(topic_id=i, name=None) for i in ids)
    )
    return md.MetadataRequest(
        topics=topics,
        allow_auto_topic_creation=auto,
        include_topic_authorized_operations=ops,
    )


async def test_all_topics_leaves_out_what_may_not_be_described() -> None:
    async with secured() as (c, grants, _):
        await create(c, "seen", "hidden")
        grants.open = False
        grants.grant(Op.DESCRIBE, Type.TOPIC, "seen")
        resp = await c.request(metadata(None))
        assert [t.name for t in resp.topics] == ["seen"]


async def test_a_named_topic_is_refused_alike_whether_it_exists_or_not() -> None:
    async with secured() as (c, grants, _):
        await create(c, "hidden")
        grants.open = False
        resp = await c.request(metadata("hidden", "nowhere"))
        for t in resp.topics:
            assert t.error_code == E.topic_authorization_failed
            assert t.topic_id in (None, ZERO_UUID)  # kio reads the zero id as None
            assert t.partitions == () and not t.is_internal
        assert [t.name for t in resp.topics] == ["hidden", "nowhere"]


async def test_a_topic_asked_by_id_is_refused_with_its_id_and_no_name() -> None:
    async with secured() as (c, grants, _):
        await create(c, "hidden")
        topic_id = (await c.request(metadata("hidden"))).topics[0].topic_id
        grants.open = False
        resp = await c.request(metadata(ids=(topic_id,)))
        (t,) = resp.topics
        assert (t.error_code, t.name, t.topic_id) == (E.topic_authorization_failed, None, topic_id)


async def test_auto_creation_needs_create_on_the_cluster_or_the_topic() -> None:
    async with secured(**{"auto.create.topics.enable": "true"}) as (c, grants, _):
        grants.open = False
        grants.grant(Op.DESCRIBE, Type.TOPIC, "new")
        grants.grant(Op.DESCRIBE, Type.TOPIC, "other")
        resp = await c.request(metadata("new", auto=True))
        assert resp.topics[0].error_code == E.topic_authorization_failed
        grants.grant(Op.CREATE, Type.TOPIC, "new")
        resp = await c.request(metadata("new", auto=True))
        assert resp.topics[0].error_code == E.none and resp.topics[0].partitions
        grants.grant(Op.CREATE, Type.CLUSTER)
        resp = await c.request(metadata("other", auto=True))
        assert resp.topics[0].error_code == E.none


async def test_topic_authorized_operations_are_what_is_granted() -> None:
    async with secured() as (c, grants, _):
        await create(c, "t")
        resp = await c.request(metadata("t", ops=True))
        assert resp.topics[0].topic_authorized_operations == TOPIC_OPERATIONS
        grants.open = False
        grants.grant(Op.DESCRIBE, Type.TOPIC, "t")
        grants.grant(Op.READ, Type.TOPIC, "t")
        resp = await c.request(metadata("t", ops=True))
        assert resp.topics[0].topic_authorized_operations == (1 << 3) | (1 << 8)
        resp = await c.request(metadata("t"))
        assert resp.topics[0].topic_authorized_operations == OMITTED


async def test_topic_operations_are_set_on_unknown_and_invalid_topics_too() -> None:
    """Kafka's handleTopicMetadataRequest and DescribeTopicPartitionsRequestHandler set the
    topic operations on every topic they looked up, an unknown or invalid one too (not on a
    refused one)."""
    async with secured() as (c, grants, _):
        resp = await c.request(metadata("nosuch", "bad/name", ops=True))
        assert [(t.error_code, t.topic_authorized_operations) for t in resp.topics] == [
            (E.unknown_topic_or_partition, TOPIC_OPERATIONS),  # no authorizer: every operation
            (E.invalid_topic_exception, TOPIC_OPERATIONS),
        ]
        asked = dtp.DescribeTopicPartitionsRequest(
            topics=(dtp.TopicRequest(name="nosuch"), dtp.TopicRequest(name="hidden"))
        )
        grants.open = False
        grants.grant(Op.DESCRIBE, Type.TOPIC, "nosuch")
        resp = await c.request(metadata("nosuch", "hidden", ops=True))
        assert [(t.error_code, t.topic_authorized_operations) for t in resp.topics] == [
            (E.unknown_topic_or_partition, 1 << 8),
            (E.topic_authorization_failed, OMITTED),
        ]
        resp = await c.request(asked)
        assert [(t.error_code, t.topic_authorized_operations) for t in resp.topics] == [
            (E.unknown_topic_or_partition, 1 << 8),
            (E.topic_authorization_failed, OMITTED),
        ]


async def test_metadata_v10_cluster_operations_need_cluster_describe() -> None:
    req = md10.MetadataRequest(
        topics=(),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=False,
    )
    async with secured() as (c, grants, _):
        assert (await c.request(req)).cluster_authorized_operations == CLUSTER_OPERATIONS
        grants.open = False
        grants.grant(Op.ALTER, Type.CLUSTER)
        assert (await c.request(req)).cluster_authorized_operations == 0
        grants.grant(Op.DESCRIBE, Type.CLUSTER)
        assert (await c.request(req)).cluster_authorized_operations == (1 << 7) | (1 << 8)


async def test_describe_cluster_operations() -> None:
    req = dcl.DescribeClusterRequest(
        include_cluster_authorized_operations=True, include_fenced_brokers=False
    )
    async with secured() as (c, grants, _):
        assert (await c.request(req)).cluster_authorized_operations == CLUSTER_OPERATIONS
        grants.open = False
        assert (await c.request(req)).cluster_authorized_operations == 0
        grants.grant(Op.DESCRIBE, Type.CLUSTER)
        assert (await c.request(req)).cluster_authorized_operations == 1 << 8


async def test_describe_topic_partitions_refuses_named_topics_last_and_skips_unnamed() -> None:
    async with secured() as (c, grants, _):
        await create(c, "a", "b", "c")
        grants.open = False
        grants.grant(Op.DESCRIBE, Type.TOPIC, "b")
        named = dtp.DescribeTopicPartitionsRequest(
            topics=tuple(dtp.TopicRequest(name=n) for n in ("a", "b", "c"))
        )
        resp = await c.request(named)
        got = [(t.name, t.error_code) for t in resp.topics]
        assert got == [
            ("b", E.none),
            ("a", E.topic_authorization_failed),
            ("c", E.topic_authorization_failed),
        ]
        assert resp.topics[0].topic_authorized_operations == 1 << 8
        every = await c.request(dtp.DescribeTopicPartitionsRequest(topics=()))
        assert [t.name for t in every.topics] == ["b"]
