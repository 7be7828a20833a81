"""The sequence of a transactional producer's first batch on a partition, as Kafka 4.2's
``ProducerAppendInfo.checkSequence`` checks it against the partition's verification state
(``VerificationStateEntry``, created by ``UnifiedLog.maybeStartTransactionVerification`` for a
transactional batch of a producer with no transaction open there at that epoch):

- a TV2 producer (Produce v12+, ``supportsEpochBump``) with no state on the partition (no
  retained batch) must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER; a Produce v11
  (verification, TV1) is not held to it (an unknown producer may start anywhere, KIP-360);
- a sequence above the lowest one a verification of that producer saw and that was not
  appended yet (a lower batch whose verification failed and will be retried) is
  OUT_OF_ORDER_SEQUENCE_NUMBER, for both.

The partition's answer is Kafka's ReplicaManager's for an append that threw: the code, no
error message, no base offset, the log start offset."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
from kio.schema.add_partitions_to_txn.v3 import request as apt3
from kio.schema.errors import ErrorCode
from kio.schema.produce.v12 import request as pr12

from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_broker_requests import create
from tests.proxy.test_transactions import tbatch
from tests.proxy.test_tv2_wire import end, init, produce_answer

E = ErrorCode
MS = datetime.timedelta(milliseconds=1)


async def produce(c: RawClient, tid: str, pid: int, epoch: int, seq: int, *, v: int = 12) -> Any:
    """The partition's answer to a Produce of one transactional batch to in-0."""
    return await produce_answer(c, tid, pid, epoch, seq, v=v)


async def add_v3(c: RawClient, tid: str, pid: int, epoch: int) -> None:
    add = await c.request(
        apt3.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=(apt3.AddPartitionsToTxnTopic(name="in", partitions=(0,)),),
        )
    )
    got = add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
    assert got is E.none


def refused_out_of_order(answer: Any) -> None:
    assert answer.error_code is E.out_of_order_sequence_number
    assert answer.error_message is None  # ReplicaManager: hasCustomErrorMessage = false
    assert answer.base_offset == -1
    assert answer.log_start_offset == 0
    assert answer.record_errors == ()


async def test_a_tv2_producer_with_no_state_starts_at_sequence_0() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        assert await create(c, "in") is E.none
        _, pid, epoch = await init(c, "tx")
        p = server.broker.topics.partition("in", 0)
        assert p is not None
        refused_out_of_order(await produce(c, "tx", pid, epoch, 3))
        assert p.high_watermark == 0  # nothing appended
        ok = await produce(c, "tx", pid, epoch, 0)
        assert (ok.error_code, ok.base_offset) == (E.none, 0)
        assert (await produce(c, "tx", pid, epoch, 1)).base_offset == 1
        assert await end(c, "tx", pid, epoch, True) == (E.none, pid, epoch + 1)
        # the next transaction: the marker moved the producer to epoch + 1, nothing retained
        refused_out_of_order(await produce(c, "tx", pid, epoch + 1, 2))
        assert (await produce(c, "tx", pid, epoch + 1, 0)).base_offset == 3


async def test_a_v11_producer_with_no_state_may_start_anywhere() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "in") is E.none
        _, pid, epoch = await init(c, "tx")
        await add_v3(c, "tx", pid, epoch)
        ok = await produce(c, "tx", pid, epoch, 3, v=11)
        assert (ok.error_code, ok.base_offset) == (E.none, 0)


@pytest.mark.parametrize("v", [12, 11])
async def test_a_higher_sequence_waits_for_the_lower_one_being_verified(
    monkeypatch: pytest.MonkeyPatch, v: int
) -> None:
    async with running_broker() as (server, port), connect(port) as c:
        broker = server.broker
        assert await create(c, "in") is E.none
        _, pid, epoch = await init(c, "tx")
        if v == 11:
            await add_v3(c, "tx", pid, epoch)
        # seq 3 is verified while the coordinator is unavailable: refused, to be retried
        with monkeypatch.context() as m:

            async def add_partitions(*args: object) -> E:
                return E.coordinator_not_available

            m.setattr(broker.txns, "add_partitions", add_partitions)
            m.setattr(broker, "txn_verifier", lambda *args: E.coordinator_not_available)
            assert (await produce(c, "tx", pid, epoch, 3, v=v)).error_code is E.not_enough_replicas
        # seq 5 is verified fine, but seq 3 has not been written: held back
        refused_out_of_order(await produce(c, "tx", pid, epoch, 5, v=v))
        # seq 2 lowers the lowest seen; v12 still wants 0 (no state), v11 takes it
        two = await produce(c, "tx", pid, epoch, 2, v=v)
        if v == 12:
            refused_out_of_order(two)
            two = await produce(c, "tx", pid, epoch, 0, v=v)
        assert (two.error_code, two.base_offset) == (E.none, 0)
        # written: the verification state is gone, the usual sequence checks go on
        following = 1 if v == 12 else 3
        assert (await produce(c, "tx", pid, epoch, following, v=v)).base_offset == 1
        refused_out_of_order(await produce(c, "tx", pid, epoch, following + 2, v=v))


async def test_each_partition_of_a_request_has_its_own_verification() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "in", 2) is E.none
        _, pid, epoch = await init(c, "tx")

        async def both(seq0: int, seq1: int) -> list[tuple[E, int]]:
            r = await c.request(
                pr12.ProduceRequest(
                    transactional_id="tx",
                    acks=-1,
                    timeout=1000 * MS,
                    topic_data=(
                        pr12.TopicProduceData(
                            name="in",
                            partition_data=tuple(
                                pr12.PartitionProduceData(
                                    index=i, records=tbatch(pid, s, epoch=epoch)
                                )
                                for i, s in enumerate((seq0, seq1))
                            ),
                        ),
                    ),
                )
            )
            return [(p.error_code, p.base_offset) for p in r.responses[0].partition_responses]

        assert await both(0, 3) == [(E.none, 0), (E.out_of_order_sequence_number, -1)]
        assert await both(1, 0) == [(E.none, 1), (E.none, 0)]
        assert await both(1, 0) == [(E.none, 1), (E.none, 0)]  # the retry: duplicates


async def test_the_verification_state_is_not_kept_across_a_restart(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    async with running_broker(data_dir=data) as (server, port), connect(port) as c:
        assert await create(c, "in") is E.none
        _, pid, epoch = await init(c, "tx")
        refused_out_of_order(await produce(c, "tx", pid, epoch, 3))
        p = server.broker.topics.partition("in", 0)
        assert p is not None and pid in p.producers.verifying
    async with running_broker(data_dir=data) as (server, port), connect(port) as c:
        p = server.broker.topics.partition("in", 0)
        assert p is not None and not p.producers.verifying  # memory only, as Kafka's
        refused_out_of_order(await produce(c, "tx", pid, epoch, 3))  # made again
        ok = await produce(c, "tx", pid, epoch, 0)
        assert (ok.error_code, ok.base_offset) == (E.none, 0)
        assert not p.producers.verifying
