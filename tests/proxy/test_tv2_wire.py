"""Transaction version 2 over a real socket, request by request as a Java 4.x producer sends
them (``TransactionManager`` with the feature finalized at 2): InitProducerId, Produce v12 (no
AddPartitionsToTxn), TxnOffsetCommit v5 (no AddOffsetsToTxn), EndTxn v5 carrying on with the
producer id and epoch it returns; and each known pitfall: the epoch at the top of its range,
InitProducerId meeting an ongoing TV2 transaction, committing a transaction that wrote nothing,
a produce arriving after its transaction ended, TV1 and TV2 transactions on the same partitions,
and the fenced late writer.

Requests are kio's classes over the harness's raw client; the broker is in process, which the
overflow test uses to start a producer at the top of the epoch range (32,766 InitProducerIds
would take minutes) and the others to look at the markers' epochs.

Every test runs with ``transaction.version`` finalized at 2 (Kafka 4's default) and at 0: as
in Kafka, the protocol of a transaction follows its client's request versions, not the level."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from kio.schema.add_partitions_to_txn.v3 import request as apt3
from kio.schema.add_partitions_to_txn.v4 import request as apt4
from kio.schema.add_partitions_to_txn.v5 import request as apt5
from kio.schema.end_txn.v4 import request as end4
from kio.schema.end_txn.v5 import request as end5
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v5 import request as ipi
from kio.schema.produce.v11 import request as pr11
from kio.schema.produce.v12 import request as pr12
from kio.schema.produce.v13 import request as pr13
from kio.schema.txn_offset_commit.v5 import request as toc5

from coordinator.placement import partition_for
from coordinator.txn.state import MAX_EPOCH, TxnState
from proxy.broker import Broker
from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_broker_requests import create
from tests.proxy.test_transactions import delivered, fetch, fetch_offset, list_offset, tbatch
from tests.proxy.test_tv2_flow import markers

E = ErrorCode
MS = datetime.timedelta(milliseconds=1)
LATEST = -1


@pytest.fixture(params=[2, 0], ids=["tv2-finalized", "tv0-finalized"])
def features(request: pytest.FixtureRequest) -> dict[str, int]:
    return {"transaction.version": request.param}


async def init(c: RawClient, tid: str, pid: int = -1, epoch: int = -1) -> tuple[E, int, int]:
    r = await c.request(
        ipi.InitProducerIdRequest(
            transactional_id=tid,
            transaction_timeout=60_000 * MS,
            producer_id=pid,
            producer_epoch=epoch,
        )
    )
    return r.error_code, r.producer_id, r.producer_epoch


async def produce_answer(
    c: RawClient,
    tid: str,
    pid: int,
    epoch: int,
    seq: int,
    topic: str = "in",
    part: int = 0,
    *,
    v: int = 12,
) -> Any:
    """The partition's answer to a Produce (v12, or v11) of one transactional batch."""
    m: Any = pr12 if v == 12 else pr11
    r = await c.request(
        m.ProduceRequest(
            transactional_id=tid,
            acks=-1,
            timeout=1000 * MS,
            topic_data=(
                m.TopicProduceData(
                    name=topic,
                    partition_data=(
                        m.PartitionProduceData(index=part, records=tbatch(pid, seq, epoch=epoch)),
                    ),
                ),
            ),
        )
    )
    return r.responses[0].partition_responses[0]


async def produce(
    c: RawClient,
    tid: str,
    pid: int,
    epoch: int,
    seq: int,
    topic: str = "in",
    part: int = 0,
    *,
    v: int = 12,
) -> E:
    code: E = (await produce_answer(c, tid, pid, epoch, seq, topic, part, v=v)).error_code
    return code


async def end(c: RawClient, tid: str, pid: int, epoch: int, commit: bool) -> tuple[E, int, int]:
    r = await c.request(
        end5.EndTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit
        )
    )
    return r.error_code, r.producer_id, r.producer_epoch


async def commit_offset(c: RawClient, tid: str, pid: int, epoch: int, group: str, offset: int) -> E:
    r = await c.request(
        toc5.TxnOffsetCommitRequest(
            transactional_id=tid,
            group_id=group,
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=(
                toc5.TxnOffsetCommitRequestTopic(
                    name="in",
                    partitions=(
                        toc5.TxnOffsetCommitRequestPartition(
                            partition_index=0,
                            committed_offset=offset,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        ),
                    ),
                ),
            ),
        )
    )
    code: E = r.topics[0].partitions[0].error_code
    return code


def partition(broker: Broker, index: int = 0) -> Any:
    p = broker.topics.partition("in", index)
    assert p is not None
    return p


async def no_hanging_transaction(c: RawClient) -> None:
    """The last stable offset has caught up with the high watermark."""
    assert await list_offset(c, "in", LATEST, True) == await list_offset(c, "in", LATEST, False)


async def test_a_java_4_producer_loop(features: dict[str, int]) -> None:
    async with running_broker(features=features) as (server, port), connect(port) as c:
        assert await create(c, "in", partitions=2) is E.none
        broker = server.broker
        code, pid, epoch = await init(c, "tx")
        assert code is E.none
        for round_ in range(3):
            commit = round_ != 1
            for part in (0, 1):  # sequences restart at every epoch, as the client resets them
                assert await produce(c, "tx", pid, epoch, 0, part=part) is E.none
                assert await produce(c, "tx", pid, epoch, 1, part=part) is E.none
            assert await commit_offset(c, "tx", pid, epoch, "g", 10 * (round_ + 1)) is E.none
            meta = broker.txns.cache["tx"]
            assert meta.client_transaction_version == 2
            assert meta.partitions == {
                ("in", 0),
                ("in", 1),
                ("__consumer_offsets", meta_offsets(broker)),
            }
            assert await end(c, "tx", pid, epoch, commit) == (E.none, pid, epoch + 1)
            for part in (0, 1):  # the markers carry the bumped epoch
                assert (await markers(partition(broker, part)))[-1] == (pid, epoch + 1)
            epoch += 1
        got = delivered(await fetch(c, "in", 0, committed=True))
        assert len(got) == 4  # rounds 0 and 2, two records each; round 1 aborted
        assert await fetch_offset(c, "g", stable=True) == (30, E.none)
        await no_hanging_transaction(c)
        # a retried EndTxn of the last round (pre-bump epoch) is recognised, not an error
        assert await end(c, "tx", pid, epoch - 1, True) == (E.none, pid, epoch)


def meta_offsets(broker: Broker) -> int:
    topic = broker.topics.get("__consumer_offsets")
    assert topic is not None
    return partition_for("g", len(topic.partitions))


async def test_the_late_writer_of_a_finished_transaction_is_fenced(
    features: dict[str, int],
) -> None:
    async with running_broker(features=features) as (server, port), connect(port) as c:
        assert await create(c, "in") is E.none
        _, pid, epoch = await init(c, "tx")
        assert await produce(c, "tx", pid, epoch, 0) is E.none
        assert await end(c, "tx", pid, epoch, True) == (E.none, pid, epoch + 1)
        # a batch of the finished transaction arrives late: refused, opens nothing
        assert await produce(c, "tx", pid, epoch, 1) is E.invalid_producer_epoch
        assert not partition(server.broker).has_open_transaction(pid, epoch)
        assert server.broker.txns.cache["tx"].state is TxnState.COMPLETE_COMMIT
        await no_hanging_transaction(c)
        # and the next transaction, at the bumped epoch, goes on
        assert await produce(c, "tx", pid, epoch + 1, 0) is E.none
        assert await end(c, "tx", pid, epoch + 1, True) == (E.none, pid, epoch + 2)
        assert len(delivered(await fetch(c, "in", 0, committed=True))) == 2


async def test_a_new_producer_fences_the_old_one_with_one_bump(features: dict[str, int]) -> None:
    async with running_broker(features=features) as (server, port), connect(port) as c:
        assert await create(c, "in") is E.none
        _, pid, epoch = await init(c, "tx")
        assert await produce(c, "tx", pid, epoch, 0) is E.none
        # a second instance starts: the ongoing TV2 transaction is aborted with one bump ...
        assert (await init(c, "tx"))[0] is E.concurrent_transactions
        assert (await markers(partition(server.broker)))[-1] == (pid, epoch + 1)
        # ... and the retry bumps once more, not twice
        assert await init(c, "tx") == (E.none, pid, epoch + 2)
        # the old instance is fenced on every path
        assert await produce(c, "tx", pid, epoch, 1) is E.invalid_producer_epoch
        assert (await end(c, "tx", pid, epoch, True))[0] is E.producer_fenced
        assert await commit_offset(c, "tx", pid, epoch, "g", 5) is E.invalid_producer_epoch
        await no_hanging_transaction(c)
        assert delivered(await fetch(c, "in", 0, committed=True)) == []


async def test_the_top_of_the_epoch_range_moves_to_a_new_producer_id(
    features: dict[str, int],
) -> None:
    async with running_broker(features=features) as (server, port), connect(port) as c:
        assert await create(c, "in") is E.none
        broker = server.broker
        _, pid, _ = await init(c, "tx")
        top = MAX_EPOCH - 1  # 32766: in process, instead of 32,766 InitProducerIds
        broker.txns.cache["tx"].producer_epoch = top
        assert await produce(c, "tx", pid, top, 0) is E.none
        code, new_pid, new_epoch = await end(c, "tx", pid, top, True)
        assert (code, new_epoch) == (E.none, 0) and new_pid != pid
        assert (await markers(partition(broker)))[-1] == (pid, MAX_EPOCH)
        # the retry of that EndTxn is answered with the new id, never (pid, 32767)
        assert await end(c, "tx", pid, top, True) == (E.none, new_pid, 0)
        assert await produce(c, "tx", new_pid, 0, 0) is E.none
        assert await end(c, "tx", new_pid, 0, True) == (E.none, new_pid, 1)
        # the old id is gone for good
        assert await produce(c, "tx", pid, top, 1) is not E.none
        assert len(delivered(await fetch(c, "in", 0, committed=True))) == 2
        await no_hanging_transaction(c)


async def test_committing_a_transaction_that_wrote_nothing(features: dict[str, int]) -> None:
    async with running_broker(features=features) as (server, port), connect(port) as c:
        assert await create(c, "in") is E.none
        _, pid, epoch = await init(c, "tx")
        # Kafka: INVALID_TXN_STATE (the Java client skips such an EndTxn), nothing written
        assert (await end(c, "tx", pid, epoch, True))[0] is E.invalid_txn_state
        assert server.broker.txns.cache["tx"].producer_epoch == epoch
        # an empty abort is fine and bumps (the client's abortTransaction)
        assert await end(c, "tx", pid, epoch, False) == (E.none, pid, epoch + 1)
        assert await markers(partition(server.broker)) == []
        assert await produce(c, "tx", pid, epoch + 1, 0) is E.none
        assert await end(c, "tx", pid, epoch + 1, True) == (E.none, pid, epoch + 2)


async def test_tv1_and_tv2_transactions_on_the_same_partitions(features: dict[str, int]) -> None:
    async with running_broker(features=features) as (server, port), connect(port) as c:
        assert await create(c, "in") is E.none
        _, p1, e1 = await init(c, "classic")
        _, p2, e2 = await init(c, "tv2")
        add = await c.request(
            apt3.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id="classic",
                v3_and_below_producer_id=p1,
                v3_and_below_producer_epoch=e1,
                v3_and_below_topics=(apt3.AddPartitionsToTxnTopic(name="in", partitions=(0,)),),
            )
        )
        assert (
            add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
            is E.none
        )
        assert await produce(c, "classic", p1, e1, 0, v=11) is E.none
        assert await produce(c, "tv2", p2, e2, 0) is E.none
        assert await produce(c, "classic", p1, e1, 1, v=11) is E.none
        assert await produce(c, "tv2", p2, e2, 1) is E.none
        meta = server.broker.txns.cache
        assert (
            meta["classic"].client_transaction_version,
            meta["tv2"].client_transaction_version,
        ) == (0, 2)
        assert await end(c, "tv2", p2, e2, True) == (E.none, p2, e2 + 1)
        r = await c.request(
            end4.EndTxnRequest(
                transactional_id="classic", producer_id=p1, producer_epoch=e1, committed=False
            )
        )
        assert r.error_code is E.none
        got = await markers(partition(server.broker))
        assert got == [(p2, e2 + 1), (p1, e1)]  # TV2 at the bumped epoch, TV1 at its own
        records = delivered(await fetch(c, "in", 0, committed=True))
        assert len(records) == 2  # the TV2 producer's two; the classic one aborted
        await no_hanging_transaction(c)
        # a classic producer still has to add the partition first (no implicit add below v12)
        assert await produce(c, "classic", p1, e1, 2, v=11) is E.transaction_abortable


async def test_produce_v13_names_topics_by_id(features: dict[str, int]) -> None:
    async with running_broker(features=features) as (server, port), connect(port) as c:
        assert await create(c, "in") is E.none
        topic = server.broker.topics.get("in")
        assert topic is not None and topic.topic_id is not None
        _, pid, epoch = await init(c, "tx")

        async def send(topic_id: uuid.UUID, seq: int) -> Any:
            r = await c.request(
                pr13.ProduceRequest(
                    transactional_id="tx",
                    acks=-1,
                    timeout=1000 * MS,
                    topic_data=(
                        pr13.TopicProduceData(
                            topic_id=topic_id,
                            partition_data=(
                                pr13.PartitionProduceData(
                                    index=0, records=tbatch(pid, seq, epoch=epoch)
                                ),
                            ),
                        ),
                    ),
                )
            )
            return r.responses[0]

        got = await send(topic.topic_id, 0)  # a TV2 batch: the partition added implicitly
        assert got.topic_id == topic.topic_id
        assert got.partition_responses[0].error_code is E.none
        unknown = uuid.uuid4()
        got = await send(unknown, 1)
        assert (got.topic_id, got.partition_responses[0].error_code) == (
            unknown,
            E.unknown_topic_id,
        )
        assert await end(c, "tx", pid, epoch, True) == (E.none, pid, epoch + 1)
        assert len(delivered(await fetch(c, "in", 0, committed=True))) == 1


@pytest.mark.parametrize("v", [4, 5])
async def test_a_brokers_add_is_a_tv2_add_from_v4(features: dict[str, int], v: int) -> None:
    """AddPartitionsToTxn v4+ comes from brokers; an add (not VerifyOnly) records client
    transaction version 2 from v4 on (Kafka's transactionVersionForAddPartitionsToTxn: a
    version above 3), so the EndTxn v5 that follows ends it as a TV2 transaction."""
    m: Any = apt4 if v == 4 else apt5
    async with running_broker(features=features) as (server, port), connect(port) as c:
        assert await create(c, "in") is E.none
        _, pid, epoch = await init(c, "tx")

        async def add(verify_only: bool) -> E:
            r = await c.request(
                m.AddPartitionsToTxnRequest(
                    transactions=(
                        m.AddPartitionsToTxnTransaction(
                            transactional_id="tx",
                            producer_id=pid,
                            producer_epoch=epoch,
                            verify_only=verify_only,
                            topics=(m.AddPartitionsToTxnTopic(name="in", partitions=(0,)),),
                        ),
                    )
                )
            )
            assert r.error_code is E.none
            part = r.results_by_transaction[0].topic_results[0].results_by_partition[0]
            code: E = part.partition_error_code
            return code

        assert await add(True) is not E.none  # not in the transaction yet
        assert await add(False) is E.none
        assert server.broker.txns.cache["tx"].client_transaction_version == 2
        assert await add(True) is E.none
        assert await end(c, "tx", pid, epoch, True) == (E.none, pid, epoch + 1)
