"""Produce, Fetch, ListOffsets and OffsetForLeaderEpoch with an authorizer: what Kafka 4
checks (KafkaApis), each refusal with its error code."""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fr
from kio.schema.list_offsets.v11 import request as lo
from kio.schema.offset_for_leader_epoch.v4 import request as ofle
from kio.schema.produce.v11 import request as pr

from tests.proxy.acl.harness import MS, Op, Type, codes, create, secured
from tests.proxy.test_broker_requests import batch
from wire.records import Record, build_batch

E = ErrorCode


def produce_request(*topics: str, txn_id: str | None = None, data: bytes | None = None) -> object:
    return pr.ProduceRequest(
        transactional_id=txn_id,
        acks=-1,
        timeout=1000 * MS,
        topic_data=tuple(
            pr.TopicProduceData(
                name=t,
                partition_data=(pr.PartitionProduceData(index=0, records=data or batch([b"v"])),),
            )
            for t in topics
        ),
    )


def fetch_request(*topics: str, replica_id: int = -1) -> object:
    return fr.FetchRequest(
        replica_id=replica_id,
        max_wait=0 * MS,
        min_bytes=1,
        topics=tuple(
            fr.FetchTopic(
                topic=t,
                partitions=(
                    fr.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),
                ),
            )
            for t in topics
        ),
        forgotten_topics_data=(),
    )


async def test_produce_needs_write_on_each_topic() -> None:
    async with secured() as (c, grants, _):
        await create(c, "mine", "theirs")
        grants.open = False
        grants.grant(Op.WRITE, Type.TOPIC, "mine")
        resp = await c.request(produce_request("mine", "theirs", "missing"))
        got = codes(resp.responses, "partition_responses")
        assert got == {
            ("mine", 0): E.none,
            ("theirs", 0): E.topic_authorization_failed,
            ("missing", 0): E.topic_authorization_failed,  # existence is not revealed
        }
        assert grants.hosts == {"127.0.0.1"}  # the client's IP, without a port


async def test_transactional_produce_needs_write_on_the_transactional_id() -> None:
    txn_batch = build_batch(
        [Record(offset_delta=0, timestamp_delta=0, key=None, value=b"v", headers=[])],
        base_timestamp=1_700_000_000_000,
        producer_id=1,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    async with secured() as (c, grants, _):
        await create(c, "t")
        grants.open = False
        grants.grant(Op.WRITE, Type.TOPIC, "t")
        resp = await c.request(produce_request("t", txn_id="tx", data=txn_batch))
        assert codes(resp.responses, "partition_responses") == {
            ("t", 0): E.transactional_id_authorization_failed
        }


async def test_fetch_needs_read_and_refused_partitions_carry_no_state() -> None:
    async with secured() as (c, grants, _):
        await create(c, "mine", "theirs")
        grants.open = False
        grants.grant(Op.READ, Type.TOPIC, "mine")
        resp = await c.request(fetch_request("mine", "theirs"))
        parts = {t.topic: t.partitions[0] for t in resp.responses}
        assert parts["mine"].error_code == E.none
        refused = parts["theirs"]
        assert refused.error_code == E.topic_authorization_failed
        assert (refused.high_watermark, refused.last_stable_offset) == (-1, -1)
        assert refused.log_start_offset == -1


async def test_a_follower_fetch_needs_cluster_action() -> None:
    async with secured() as (c, grants, _):
        await create(c, "t")
        grants.open = False
        grants.grant(Op.READ, Type.TOPIC, "t")  # not enough for a replica
        resp = await c.request(fetch_request("t", replica_id=2))
        assert resp.responses[0].partitions[0].error_code == E.topic_authorization_failed
        grants.grant(Op.CLUSTER_ACTION, Type.CLUSTER)
        resp = await c.request(fetch_request("t", replica_id=2))
        # authorized; then, as Kafka's Partition.followerReplicaOrThrow, replica 2 is not one
        # of this single node's replicas
        assert resp.responses[0].partitions[0].error_code == E.not_leader_or_follower


async def test_list_offsets_needs_describe_and_answers_refused_topics_last() -> None:
    async with secured() as (c, grants, _):
        await create(c, "a", "b")
        grants.open = False
        grants.grant(Op.DESCRIBE, Type.TOPIC, "b")
        resp = await c.request(
            lo.ListOffsetsRequest(
                replica_id=-1,
                isolation_level=0,
                timeout=1000 * MS,
                topics=tuple(
                    lo.ListOffsetsTopic(
                        name=t,
                        partitions=(lo.ListOffsetsPartition(partition_index=0, timestamp=-1),),
                    )
                    for t in ("a", "b")
                ),
            )
        )
        assert [t.name for t in resp.topics] == ["b", "a"]
        refused = resp.topics[1].partitions[0]
        assert refused.error_code == E.topic_authorization_failed
        assert (refused.offset, refused.timestamp) == (-1, -1)
        assert resp.topics[0].partitions[0].error_code == E.none


async def test_offset_for_leader_epoch_takes_describe_or_cluster_action() -> None:
    req = ofle.OffsetForLeaderEpochRequest(
        topics=tuple(
            ofle.OffsetForLeaderTopic(
                topic=t, partitions=(ofle.OffsetForLeaderPartition(partition=0, leader_epoch=0),)
            )
            for t in ("a", "b")
        )
    )
    async with secured() as (c, grants, _):
        await create(c, "a", "b")
        grants.open = False
        grants.grant(Op.DESCRIBE, Type.TOPIC, "a")
        resp = await c.request(req)
        assert codes(resp.topics) == {("a", 0): E.none, ("b", 0): E.topic_authorization_failed}
        grants.grant(Op.CLUSTER_ACTION, Type.CLUSTER)
        resp = await c.request(req)
        assert codes(resp.topics) == {("a", 0): E.none, ("b", 0): E.none}


async def test_fetch_by_topic_id_checks_the_id_before_authorization() -> None:
    """Kafka's handleFetchRequest at v13+: an id that names no topic is UNKNOWN_TOPIC_ID
    whatever the grants; a known topic without READ is TOPIC_AUTHORIZATION_FAILED; both are
    answered after the partitions read."""
    import uuid

    from tests.proxy.test_fetch_topic_ids import parts, request, topic_id

    async with secured() as (c, grants, server):
        await create(c, "mine", "theirs")
        grants.open = False
        grants.grant(Op.READ, Type.TOPIC, "mine")
        ghost, mine, theirs = uuid.uuid4(), topic_id(server, "mine"), topic_id(server, "theirs")
        resp = await c.request(
            request(18, [(ghost, [(0, 0)]), (theirs, [(0, 0)]), (mine, [(0, 0)])])
        )
        assert [(p[0], p[2], p[3]) for p in parts(resp)] == [
            (mine, E.none, 0),
            (ghost, E.unknown_topic_id, -1),
            (theirs, E.topic_authorization_failed, -1),
        ]
