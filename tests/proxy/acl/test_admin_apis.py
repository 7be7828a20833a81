"""The admin APIs with an authorizer: topic CREATE / DELETE / ALTER / DESCRIBE_CONFIGS /
ALTER_CONFIGS and the cluster operations Kafka 4 asks for (the controller's checks for the
requests a broker forwards to it)."""

from __future__ import annotations

from typing import Any

from kio.schema.alter_configs.v2 import request as ac
from kio.schema.alter_partition_reassignments.v0 import request as apr
from kio.schema.alter_replica_log_dirs.v2 import request as ard
from kio.schema.alter_user_scram_credentials.v0 import request as aus
from kio.schema.create_partitions.v3 import request as cp
from kio.schema.create_topics.v7 import request as ct
from kio.schema.delete_records.v2 import request as dr
from kio.schema.delete_topics.v6 import request as dtt
from kio.schema.describe_configs.v4 import request as dc
from kio.schema.describe_log_dirs.v4 import request as dld
from kio.schema.describe_user_scram_credentials.v0 import request as dus
from kio.schema.elect_leaders.v2 import request as el
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1 import request as iac
from kio.schema.list_partition_reassignments.v0 import request as lpr
from kio.schema.metadata.v12 import request as md

from tests.proxy.acl.harness import MS, Op, Type, codes, create, secured

E = ErrorCode
TOPIC, BROKER = 2, 4


def create_request(*names: str) -> Any:
    return ct.CreateTopicsRequest(
        topics=tuple(
            ct.CreatableTopic(
                name=n, num_partitions=1, replication_factor=-1, assignments=(), configs=()
            )
            for n in names
        ),
        timeout=1000 * MS,
        validate_only=False,
    )


async def test_create_topics_needs_create_and_describe_configs_for_the_configs() -> None:
    async with secured() as (c, grants, _):
        grants.open = False
        grants.grant(Op.CREATE, Type.TOPIC, "a")
        resp = await c.request(create_request("a", "b"))
        a, b = resp.topics
        assert (b.error_code, b.error_message) == (
            E.topic_authorization_failed,
            "Authorization failed.",
        )
        assert (a.error_code, a.topic_config_error_code) == (E.none, E.topic_authorization_failed)
        assert (a.num_partitions, a.replication_factor, a.configs) == (-1, -1, ())
        grants.grant(Op.CREATE, Type.CLUSTER)
        grants.grant(Op.DESCRIBE_CONFIGS, Type.TOPIC, "c")
        (made,) = (await c.request(create_request("c"))).topics
        assert (made.error_code, made.topic_config_error_code) == (E.none, 0)
        assert made.num_partitions == 1 and made.configs


async def test_delete_topics_by_name_and_by_id() -> None:
    async with secured() as (c, grants, _):
        await create(c, "seen", "hidden", "gone")
        ids = {
            t.name: t.topic_id
            for t in (
                await c.request(
                    md.MetadataRequest(
                        topics=None,
                        allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False,
                    )
                )
            ).topics
        }
        grants.open = False
        grants.grant(Op.DESCRIBE, Type.TOPIC, "seen")
        grants.grant(Op.DELETE, Type.TOPIC, "gone")
        grants.grant(Op.DESCRIBE, Type.TOPIC, "gone")
        resp = await c.request(
            dtt.DeleteTopicsRequest(
                topics=(
                    dtt.DeleteTopicState(name="seen", topic_id=None),
                    dtt.DeleteTopicState(name=None, topic_id=ids["hidden"]),
                    dtt.DeleteTopicState(name=None, topic_id=ids["gone"]),
                ),
                timeout=1000 * MS,
            )
        )
        got = {(r.name, r.topic_id): (r.error_code, r.error_message) for r in resp.responses}
        refused = (E.topic_authorization_failed, "Topic authorization failed.")
        assert got[("seen", None)] == refused
        assert got[(None, ids["hidden"])] == refused  # its name is not revealed
        assert got[("gone", ids["gone"])] == (E.none, None)


async def test_create_partitions_needs_alter() -> None:
    async with secured() as (c, grants, _):
        await create(c, "a", "b")
        grants.open = False
        grants.grant(Op.ALTER, Type.TOPIC, "a")
        resp = await c.request(
            cp.CreatePartitionsRequest(
                topics=tuple(
                    cp.CreatePartitionsTopic(name=n, count=2, assignments=None) for n in "ab"
                ),
                timeout=1000 * MS,
                validate_only=True,
            )
        )
        assert [(r.name, r.error_code) for r in resp.results] == [
            ("a", E.none),
            ("b", E.topic_authorization_failed),
        ]


async def test_delete_records_needs_delete() -> None:
    async with secured() as (c, grants, _):
        await create(c, "a", "b")
        grants.open = False
        grants.grant(Op.DELETE, Type.TOPIC, "a")
        resp = await c.request(
            dr.DeleteRecordsRequest(
                topics=tuple(
                    dr.DeleteRecordsTopic(
                        name=n, partitions=(dr.DeleteRecordsPartition(partition_index=0, offset=0),)
                    )
                    for n in "ab"
                ),
                timeout=1000 * MS,
            )
        )
        assert codes(resp.topics) == {("a", 0): E.none, ("b", 0): E.topic_authorization_failed}
        assert resp.topics[1].partitions[0].low_watermark == -1


async def test_describe_configs_refuses_last_with_the_message() -> None:
    async with secured() as (c, grants, _):
        await create(c, "a", "b")
        grants.open = False
        grants.grant(Op.DESCRIBE_CONFIGS, Type.TOPIC, "b")
        resp = await c.request(
            dc.DescribeConfigsRequest(
                resources=(
                    dc.DescribeConfigsResource(
                        resource_type=BROKER, resource_name="", configuration_keys=None
                    ),
                    dc.DescribeConfigsResource(
                        resource_type=TOPIC, resource_name="a", configuration_keys=None
                    ),
                    dc.DescribeConfigsResource(
                        resource_type=TOPIC, resource_name="b", configuration_keys=None
                    ),
                )
            )
        )
        got = [
            (r.resource_name, r.error_code, r.error_message, bool(r.configs)) for r in resp.results
        ]
        assert got == [
            ("b", E.none, None, True),
            ("", E.cluster_authorization_failed, "Cluster authorization failed.", False),
            ("a", E.topic_authorization_failed, "Topic authorization failed.", False),
        ]


async def test_alter_configs_both_apis_need_alter_configs() -> None:
    async with secured() as (c, grants, _):
        await create(c, "a", "b")
        grants.open = False
        grants.grant(Op.ALTER_CONFIGS, Type.TOPIC, "a")
        legacy = await c.request(
            ac.AlterConfigsRequest(
                resources=tuple(
                    ac.AlterConfigsResource(
                        resource_type=TOPIC,
                        resource_name=n,
                        configs=(ac.AlterableConfig(name="retention.ms", value="1000"),),
                    )
                    for n in "ab"
                ),
                validate_only=True,
            )
        )
        assert [(r.resource_name, r.error_code) for r in legacy.responses] == [
            ("a", E.none),
            ("b", E.topic_authorization_failed),
        ]
        topics = [
            iac.AlterConfigsResource(
                resource_type=TOPIC,
                resource_name=n,
                configs=(
                    iac.AlterableConfig(name="retention.ms", config_operation=0, value="1000"),
                ),
            )
            for n in "ab"
        ]
        broker_logger = iac.AlterConfigsResource(resource_type=8, resource_name="1", configs=())
        incremental = await c.request(
            iac.IncrementalAlterConfigsRequest(
                resources=(*topics, broker_logger),
                validate_only=True,
            )
        )
        assert [
            (r.resource_name, r.error_code, r.error_message) for r in incremental.responses
        ] == [
            ("a", E.none, None),
            ("b", E.topic_authorization_failed, "Topic authorization failed."),
            ("1", E.cluster_authorization_failed, "Cluster authorization failed."),
        ]


async def test_cluster_operations_refused_as_kafka_answers() -> None:
    async with secured() as (c, grants, _):
        await create(c, "t")
        grants.open = False
        log_dirs = await c.request(dld.DescribeLogDirsRequest(topics=None))
        assert (log_dirs.error_code, log_dirs.results) == (E.cluster_authorization_failed, ())
        elect = await c.request(
            el.ElectLeadersRequest(
                election_type=0,
                topic_partitions=(el.TopicPartitions(topic="t", partitions=(0,)),),
                timeout=1000 * MS,
            )
        )
        assert codes(elect.replica_election_results, "partition_result") == {
            ("t", 0): E.cluster_authorization_failed
        }
        move = await c.request(
            apr.AlterPartitionReassignmentsRequest(
                topics=(
                    apr.ReassignableTopic(
                        name="t",
                        partitions=(apr.ReassignablePartition(partition_index=0, replicas=None),),
                    ),
                )
            )
        )
        assert move.error_code == E.cluster_authorization_failed
        listed = await c.request(lpr.ListPartitionReassignmentsRequest(topics=None))
        assert listed.error_code == E.cluster_authorization_failed
        dirs = await c.request(
            ard.AlterReplicaLogDirsRequest(
                dirs=(
                    ard.AlterReplicaLogDir(
                        path="/x", topics=(ard.AlterReplicaLogDirTopic(name="t", partitions=(0,)),)
                    ),
                )
            )
        )
        assert codes(dirs.results) == {("t", 0): E.cluster_authorization_failed}
        grants.grant(Op.DESCRIBE, Type.CLUSTER)
        assert (
            await c.request(lpr.ListPartitionReassignmentsRequest(topics=None))
        ).error_code == E.none
        assert (await c.request(dld.DescribeLogDirsRequest(topics=None))).error_code == E.none


async def test_scram_credentials_need_cluster_describe_and_alter() -> None:
    async with secured() as (c, grants, _):
        grants.open = False
        described = await c.request(
            dus.DescribeUserScramCredentialsRequest(users=(dus.UserName(name="alice"),))
        )
        assert (described.error_code, described.error_message) == (
            E.cluster_authorization_failed,
            "Cluster authorization failed.",
        )
        assert [(r.user, r.error_code) for r in described.results] == [
            ("", E.cluster_authorization_failed)
        ]
        altered = await c.request(
            aus.AlterUserScramCredentialsRequest(
                deletions=(
                    aus.ScramCredentialDeletion(name="bob", mechanism=1),
                    aus.ScramCredentialDeletion(name="alice", mechanism=1),
                ),
                upsertions=(),
            )
        )
        assert [(r.user, r.error_code) for r in altered.results] == [
            ("alice", E.cluster_authorization_failed),
            ("bob", E.cluster_authorization_failed),
        ]
        grants.grant(Op.DESCRIBE, Type.CLUSTER)
        described = await c.request(dus.DescribeUserScramCredentialsRequest(users=None))
        assert described.error_code == E.none
