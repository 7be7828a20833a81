"""DescribeQuorum (key 55) v0-2: the single node as the only voter and leader of
``__cluster_metadata``-0 (Kafka's KafkaRaftClient.handleDescribeQuorumRequest and
RaftUtil.singletonDescribeQuorumResponse), UNKNOWN_TOPIC_OR_PARTITION for anything else, and
DESCRIBE on the cluster (ControllerApis.handleDescribeQuorum)."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.describe_quorum.v0 import request as dq0
from kio.schema.describe_quorum.v1 import request as dq1
from kio.schema.describe_quorum.v2 import request as dq2
from kio.schema.errors import ErrorCode

from tests.proxy.acl.harness import Op, Type, secured
from tests.proxy.harness import connect, running_broker

MODULES = {0: dq0, 1: dq1, 2: dq2}


def quorum_request(version: int, *topics: tuple[str, tuple[int, ...]]) -> Any:
    mod = MODULES[version]
    topics = topics or (("__cluster_metadata", (0,)),)
    return mod.DescribeQuorumRequest(
        topics=tuple(
            mod.TopicData(
                topic_name=name,
                partitions=tuple(mod.PartitionData(partition_index=p) for p in parts),
            )
            for name, parts in topics
        )
    )


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_the_node_is_the_single_voter_and_leader(version: int) -> None:
    async with running_broker(**{"node.id": "3"}) as (_, port), connect(port) as c:
        resp = await c.request(quorum_request(version))
        assert resp.error_code == ErrorCode.none
        [topic] = resp.topics
        [part] = topic.partitions
        assert (topic.topic_name, part.partition_index, part.error_code) == (
            "__cluster_metadata",
            0,
            ErrorCode.none,
        )
        # no metadata log in kafkad: its offsets are "unknown"; the first elected epoch
        assert (part.leader_id, part.leader_epoch, part.high_watermark) == (3, 1, -1)
        [voter] = part.current_voters
        assert (voter.replica_id, voter.log_end_offset, part.observers) == (3, -1, ())
        if version >= 1:  # the leader's own times are now, as Kafka reports them
            assert voter.last_fetch_timestamp == voter.last_caught_up_timestamp > 0
        if version >= 2:
            assert voter.replica_directory_id is None  # the zero UUID: no directory id
            assert (resp.error_message, part.error_message) == (None, None)
            [node] = resp.nodes
            assert node.node_id == 3
            assert [(lst.host, lst.port) for lst in node.listeners] == [("127.0.0.1", port)]


@pytest.mark.parametrize(
    "topics",
    [
        (("__cluster_metadata", (1,)),),
        (("other", (0,)),),
        (("__cluster_metadata", (0, 1)),),
        (("__cluster_metadata", (0,)), ("t", (0,))),
    ],
)
async def test_anything_but_the_metadata_partition_alone_is_unknown(topics: Any) -> None:
    async with running_broker() as (_, port), connect(port) as c:
        resp = await c.request(quorum_request(2, *topics))
        assert (resp.error_code, resp.nodes) == (ErrorCode.none, ())
        got = {
            (t.topic_name, p.partition_index): (
                p.error_code,
                p.error_message,
                p.current_voters,
                (p.leader_id, p.leader_epoch, p.high_watermark),
            )
            for t in resp.topics
            for p in t.partitions
        }
        # getPartitionLevelErrorResponse sets the code and message alone: the other fields keep
        # the schema's defaults (no "default" given: 0)
        unknown = (
            ErrorCode.unknown_topic_or_partition,
            "This server does not host this topic-partition.",
            (),
            (0, 0, 0),
        )
        assert got == {(name, p): unknown for name, parts in topics for p in parts}


async def test_needs_describe_on_the_cluster() -> None:
    async with secured() as (c, grants, _):
        grants.open = False
        resp = await c.request(quorum_request(2))
        assert (resp.error_code, resp.error_message, resp.topics) == (
            ErrorCode.cluster_authorization_failed,
            "Cluster authorization failed.",
            (),
        )
        resp = await c.request(quorum_request(0))
        assert (resp.error_code, resp.topics) == (ErrorCode.cluster_authorization_failed, ())
        grants.grant(Op.DESCRIBE, Type.CLUSTER)
        resp = await c.request(quorum_request(2))
        assert resp.error_code == ErrorCode.none
        assert resp.topics[0].partitions[0].leader_id == 1
