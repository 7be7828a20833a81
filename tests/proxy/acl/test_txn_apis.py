"""The producer and transaction APIs with an authorizer: TRANSACTIONAL_ID WRITE / DESCRIBE,
IDEMPOTENT_WRITE (KIP-679), GROUP READ for offsets in a transaction, topic WRITE / DESCRIBE /
READ, and CLUSTER_ACTION for WriteTxnMarkers, as Kafka 4's KafkaApis checks them."""

from __future__ import annotations

from typing import Any

from kio.schema.add_offsets_to_txn.v4 import request as ao
from kio.schema.add_partitions_to_txn.v3 import request as ap
from kio.schema.describe_producers.v0 import request as dp
from kio.schema.describe_transactions.v0 import request as dt
from kio.schema.end_txn.v4 import request as et
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v5 import request as ip
from kio.schema.list_transactions.v1 import request as lt
from kio.schema.txn_offset_commit.v4 import request as toc
from kio.schema.write_txn_markers.v1 import request as wm

from proxy.acl.model import (
    AccessControlEntry,
    AclBinding,
    AclPermissionType,
    PatternType,
    ResourcePattern,
)
from tests.proxy.acl.harness import ANONYMOUS, MS, Op, Type, codes, create, secured

E = ErrorCode


def init(txn_id: str | None) -> Any:
    return ip.InitProducerIdRequest(transactional_id=txn_id, transaction_timeout=60_000 * MS)


def add_partitions(pid: int, epoch: int, *topics: str) -> Any:
    return ap.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=tuple(
            ap.AddPartitionsToTxnTopic(name=t, partitions=(0,)) for t in topics
        ),
    )


async def test_init_producer_id_for_a_transactional_id_needs_write_on_it() -> None:
    async with secured() as (c, grants, _):
        grants.open = False
        grants.grant(Op.DESCRIBE, Type.TRANSACTIONAL_ID, "tx")  # FindCoordinator's, not enough
        resp = await c.request(init("tx"))
        assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (
            E.transactional_id_authorization_failed,
            -1,
            -1,
        )
        grants.grant(Op.WRITE, Type.TRANSACTIONAL_ID, "tx")
        assert (await c.request(init("tx"))).error_code == E.none


async def test_an_idempotent_producer_needs_idempotent_write_or_a_topic_write() -> None:
    async with secured() as (c, grants, server):
        grants.open = False
        assert (await c.request(init(None))).error_code == E.cluster_authorization_failed
        grants.grant(Op.IDEMPOTENT_WRITE, Type.CLUSTER)
        assert (await c.request(init(None))).error_code == E.none
        grants.allowed.clear()
        assert (await c.request(init(None))).error_code == E.cluster_authorization_failed
        assert server.broker is not None
        write_some_topic = AclBinding(  # KIP-679: WRITE on some topic is enough
            ResourcePattern(Type.TOPIC, "any-topic", PatternType.LITERAL),
            AccessControlEntry(ANONYMOUS, "*", Op.WRITE, AclPermissionType.ALLOW),
        )
        await server.broker.acls.replace([write_some_topic])
        assert (await c.request(init(None))).error_code == E.none


async def test_add_partitions_checks_the_id_then_each_topic() -> None:
    async with secured() as (c, grants, _):
        await create(c, "mine", "theirs")
        got = await c.request(init("tx"))
        pid, epoch = got.producer_id, got.producer_epoch
        grants.open = False
        resp = await c.request(add_partitions(pid, epoch, "mine"))
        assert codes(
            resp.results_by_topic_v3_and_below, "results_by_partition", "partition_error_code"
        ) == {("mine", 0): E.transactional_id_authorization_failed}
        grants.grant(Op.WRITE, Type.TRANSACTIONAL_ID, "tx")
        grants.grant(Op.WRITE, Type.TOPIC, "mine")
        grants.grant(Op.WRITE, Type.TOPIC, "__consumer_offsets")  # never enough for it
        resp = await c.request(add_partitions(pid, epoch, "mine", "theirs", "__consumer_offsets"))
        assert codes(
            resp.results_by_topic_v3_and_below, "results_by_partition", "partition_error_code"
        ) == {
            ("mine", 0): E.operation_not_attempted,
            ("theirs", 0): E.topic_authorization_failed,
            ("__consumer_offsets", 0): E.topic_authorization_failed,
        }
        resp = await c.request(add_partitions(pid, epoch, "mine"))
        assert (
            resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
            == E.none
        )


async def test_add_offsets_end_txn_and_txn_offset_commit() -> None:
    async with secured() as (c, grants, _):
        await create(c, "mine", "theirs")
        got = await c.request(init("tx"))
        pid, epoch = got.producer_id, got.producer_epoch
        grants.open = False

        def add_offsets() -> Any:
            return ao.AddOffsetsToTxnRequest(
                transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id="g"
            )

        def txn_commit(*topics: str) -> Any:
            return toc.TxnOffsetCommitRequest(
                transactional_id="tx",
                group_id="g",
                producer_id=pid,
                producer_epoch=epoch,
                topics=tuple(
                    toc.TxnOffsetCommitRequestTopic(
                        name=t,
                        partitions=(
                            toc.TxnOffsetCommitRequestPartition(
                                partition_index=0, committed_offset=0, committed_metadata=""
                            ),
                        ),
                    )
                    for t in topics
                ),
            )

        end = et.EndTxnRequest(
            transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=False
        )
        assert (
            await c.request(add_offsets())
        ).error_code == E.transactional_id_authorization_failed
        assert (await c.request(end)).error_code == E.transactional_id_authorization_failed
        resp = await c.request(txn_commit("mine"))
        assert codes(resp.topics) == {("mine", 0): E.transactional_id_authorization_failed}
        grants.grant(Op.WRITE, Type.TRANSACTIONAL_ID, "tx")
        assert (await c.request(add_offsets())).error_code == E.group_authorization_failed
        resp = await c.request(txn_commit("mine"))
        assert codes(resp.topics) == {("mine", 0): E.group_authorization_failed}
        grants.grant(Op.READ, Type.GROUP, "g")
        assert (await c.request(add_offsets())).error_code == E.none
        grants.grant(Op.READ, Type.TOPIC, "mine")
        resp = await c.request(txn_commit("mine", "theirs"))
        assert codes(resp.topics) == {
            ("mine", 0): E.none,
            ("theirs", 0): E.topic_authorization_failed,
        }
        assert (await c.request(end)).error_code == E.none


async def test_write_txn_markers_needs_cluster_action_or_alter() -> None:
    req = wm.WriteTxnMarkersRequest(
        markers=(
            wm.WritableTxnMarker(
                producer_id=1,
                producer_epoch=0,
                transaction_result=False,
                topics=(wm.WritableTxnMarkerTopic(name="t", partition_indexes=(0,)),),
                coordinator_epoch=0,
            ),
        )
    )
    async with secured() as (c, grants, _):
        await create(c, "t")
        grants.open = False
        grants.grant(Op.WRITE, Type.TOPIC, "t")
        resp = await c.request(req)
        assert codes(resp.markers[0].topics) == {("t", 0): E.cluster_authorization_failed}
        grants.grant(Op.CLUSTER_ACTION, Type.CLUSTER)
        resp = await c.request(req)
        assert codes(resp.markers[0].topics) != {("t", 0): E.cluster_authorization_failed}


async def test_describe_and_list_transactions_show_what_may_be_described() -> None:
    async with secured() as (c, grants, _):
        await create(c, "mine", "theirs")
        for tid in ("tx", "other"):
            got = await c.request(init(tid))
        got = await c.request(init("tx"))
        await c.request(add_partitions(got.producer_id, got.producer_epoch, "mine", "theirs"))
        grants.open = False
        grants.grant(Op.DESCRIBE, Type.TRANSACTIONAL_ID, "tx")
        grants.grant(Op.DESCRIBE, Type.TOPIC, "mine")
        resp = await c.request(dt.DescribeTransactionsRequest(transactional_ids=("tx", "other")))
        states = {s.transactional_id: s for s in resp.transaction_states}
        assert states["other"].error_code == E.transactional_id_authorization_failed
        assert states["tx"].error_code == E.none
        assert [t.topic for t in states["tx"].topics] == ["mine"]
        listed = await c.request(lt.ListTransactionsRequest())
        assert [s.transactional_id for s in listed.transaction_states] == ["tx"]


async def test_describe_producers_needs_topic_read() -> None:
    async with secured() as (c, grants, _):
        await create(c, "mine", "theirs")
        grants.open = False
        grants.grant(Op.READ, Type.TOPIC, "mine")
        resp = await c.request(
            dp.DescribeProducersRequest(
                topics=tuple(
                    dp.TopicRequest(name=t, partition_indexes=(0,)) for t in ("mine", "theirs")
                )
            )
        )
        assert codes(resp.topics) == {
            ("mine", 0): E.none,
            ("theirs", 0): E.topic_authorization_failed,
        }
        assert resp.topics[1].partitions[0].error_message == "Topic authorization failed."


async def test_describe_producers_checks_the_name_then_read_then_existence() -> None:
    """Kafka's handleDescribeProducersRequest: Topic.validate first (INVALID_TOPIC_EXCEPTION
    with its message, even for a topic the principal may not READ), then READ, then an unknown
    topic UNKNOWN_TOPIC_OR_PARTITION with Errors' message; a partition the topic lacks has no
    message."""
    async with secured() as (c, grants, _):
        await create(c, "mine")
        grants.open = False
        grants.grant(Op.READ, Type.TOPIC, "mine")
        grants.grant(Op.READ, Type.TOPIC, "gone")
        resp = await c.request(
            dp.DescribeProducersRequest(
                topics=(
                    dp.TopicRequest(name="bad/name", partition_indexes=(0,)),
                    dp.TopicRequest(name="gone", partition_indexes=(0,)),
                    dp.TopicRequest(name="mine", partition_indexes=(5,)),
                )
            )
        )
        got = [
            (t.name, t.partitions[0].error_code, t.partitions[0].error_message) for t in resp.topics
        ]
        assert got == [
            (
                "bad/name",
                E.invalid_topic_exception,
                'Topic name "bad/name" is illegal, it contains a character other than ASCII '
                "alphanumerics, '.', '_' and '-'",
            ),
            (
                "gone",
                E.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            ),
            ("mine", E.unknown_topic_or_partition, None),
        ]
