"""A TV2 producer whose transaction the coordinator aborted on timeout (the epoch bumped, the
abort markers written at the new epoch) goes on writing at its old epoch, as Kafka 4.2 answers
it: every Produce version gets INVALID_PRODUCER_EPOCH, never PRODUCER_FENCED -- whether the
partition's log rejects the stale epoch itself (``UnifiedLog.maybeStartTransactionVerification``:
an epoch below the last one seen) or the coordinator is asked to add a new partition and
answers PRODUCER_FENCED, which ``AddPartitionsToTxnManager`` turns into INVALID_PRODUCER_EPOCH.
So does TxnOffsetCommit v5 (implicit add) and v4 (verification), through the same manager. An
unknown epoch (above the coordinator's) is refused the same way, and no refused write leaves a
transaction open;
the producer's EndTxn at the old epoch is answered as Kafka's TV2 retry rules say."""

from __future__ import annotations

import datetime
from collections.abc import Callable

import trio
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v5 import request as ipi
from kio.schema.txn_offset_commit.v4 import request as toc4

from coordinator.txn.state import TxnState
from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_broker_requests import create
from tests.proxy.test_tv2_wire import (
    commit_offset,
    end,
    no_hanging_transaction,
    partition,
    produce,
)

E = ErrorCode
MS = datetime.timedelta(milliseconds=1)
SCAN = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "20"}


async def until(check: Callable[[], bool]) -> None:
    """Poll the coordinator, changed by its timeout scan, with a deadline."""
    with trio.fail_after(20):
        while True:
            if check():
                return
            await trio.sleep(0.02)


async def init_short(c: RawClient, tid: str, timeout_ms: int) -> tuple[int, int]:
    r = await c.request(
        ipi.InitProducerIdRequest(
            transactional_id=tid,
            transaction_timeout=timeout_ms * MS,
            producer_id=-1,
            producer_epoch=-1,
        )
    )
    assert r.error_code is E.none
    return int(r.producer_id), int(r.producer_epoch)


async def commit_offset_v4(c: RawClient, tid: str, pid: int, epoch: int, group: str) -> E:
    r = await c.request(
        toc4.TxnOffsetCommitRequest(
            transactional_id=tid,
            group_id=group,
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=(
                toc4.TxnOffsetCommitRequestTopic(
                    name="in",
                    partitions=(
                        toc4.TxnOffsetCommitRequestPartition(
                            partition_index=0,
                            committed_offset=1,
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


async def test_writes_after_a_timeout_abort_get_invalid_producer_epoch() -> None:
    async with running_broker(**SCAN) as (server, port), connect(port) as c:
        broker = server.broker
        assert await create(c, "in", partitions=2) is E.none
        pid, epoch = await init_short(c, "tx", 500)
        assert await produce(c, "tx", pid, epoch, 0) is E.none  # partition 0 added implicitly
        await until(lambda: broker.txns.cache["tx"].state is TxnState.COMPLETE_ABORT)
        meta = broker.txns.cache["tx"]
        assert (meta.producer_id, meta.producer_epoch) == (pid, epoch + 1)
        # the same partition (its log saw the abort marker at epoch + 1) and a new one (the
        # coordinator is asked), Produce v12 (TV2) and v11 (verification): all the same code
        for v in (12, 11):
            for part in (0, 1):
                got = await produce(c, "tx", pid, epoch, 1, part=part, v=v)
                assert got is E.invalid_producer_epoch, (v, part)
        assert await commit_offset(c, "tx", pid, epoch, "g", 1) is E.invalid_producer_epoch
        assert await commit_offset_v4(c, "tx", pid, epoch, "g") is E.invalid_producer_epoch
        # an epoch the coordinator never gave out
        for part in (0, 1):
            got = await produce(c, "tx", pid, epoch + 5, 0, part=part)
            assert got is E.invalid_producer_epoch, part
        assert await commit_offset(c, "tx", pid, epoch + 5, "g", 1) is E.invalid_producer_epoch
        for part in (0, 1):
            assert not partition(broker, part).has_open_transaction(pid, epoch)
            assert not partition(broker, part).has_open_transaction(pid, epoch + 5)
        assert broker.txns.cache["tx"].state is TxnState.COMPLETE_ABORT
        await no_hanging_transaction(c)
        # EndTxn v5 at the old epoch (TransactionCoordinator.endTransaction, retryOnEpochBump):
        # a commit is INVALID_TXN_STATE, an abort is taken as the retry of the one done
        assert (await end(c, "tx", pid, epoch, True))[0] is E.invalid_txn_state
        assert await end(c, "tx", pid, epoch, False) == (E.none, pid, epoch + 1)
        assert await produce(c, "tx", pid, epoch + 1, 0, part=1) is E.none  # and it goes on
        assert await end(c, "tx", pid, epoch + 1, True) == (E.none, pid, epoch + 2)
