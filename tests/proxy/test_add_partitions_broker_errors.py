"""AddPartitionsToTxn v4/v5 (the broker form) answers the coordinator's codes as Kafka 4.2's
``handleAddPartitionsToTxnRequest`` does: as they are, at v4 as at v5. The one rewrite of the
handler is PRODUCER_FENCED below v2 (clients only); TRANSACTION_ABORTABLE, which only a
VerifyOnly check gives, reaches the calling broker unchanged, and that broker's
AddPartitionsToTxnManager maps it for an old client (INVALID_TXN_STATE for Produce v0-10).

Each case against a TV1 transaction (partition added by a v3 client add) and a TV2 one (added
by a v4+ add, then ended by EndTxn v5, which bumps the epoch)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from kio.schema.add_partitions_to_txn.v3 import request as apt3
from kio.schema.add_partitions_to_txn.v4 import request as apt4
from kio.schema.add_partitions_to_txn.v5 import request as apt5
from kio.schema.errors import ErrorCode

from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_broker_requests import create
from tests.proxy.test_tv2_wire import end, init

E = ErrorCode


async def broker_add(
    c: RawClient, v: int, tid: str, pid: int, epoch: int, part: int, *, verify_only: bool
) -> E:
    m: Any = apt4 if v == 4 else apt5
    r = await c.request(
        m.AddPartitionsToTxnRequest(
            transactions=(
                m.AddPartitionsToTxnTransaction(
                    transactional_id=tid,
                    producer_id=pid,
                    producer_epoch=epoch,
                    verify_only=verify_only,
                    topics=(m.AddPartitionsToTxnTopic(name="in", partitions=(part,)),),
                ),
            )
        )
    )
    assert r.error_code is E.none
    (topic,) = r.results_by_transaction[0].topic_results
    code: E = topic.results_by_partition[0].partition_error_code
    return code


async def client_add(c: RawClient, tid: str, pid: int, epoch: int, part: int) -> E:
    r = await c.request(
        apt3.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=(apt3.AddPartitionsToTxnTopic(name="in", partitions=(part,)),),
        )
    )
    code: E = r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
    return code


@pytest.mark.parametrize("v", [4, 5])
@pytest.mark.parametrize("tv2", [False, True], ids=["tv1-txn", "tv2-txn"])
async def test_coordinator_codes_reach_a_broker_unchanged(v: int, tv2: bool) -> None:
    async with running_broker() as (_server, port), connect(port) as c:
        assert await create(c, "in", partitions=2) is E.none
        _, pid, epoch = await init(c, "tx")
        if tv2:
            assert await broker_add(c, v, "tx", pid, epoch, 0, verify_only=False) is E.none
        else:
            assert await client_add(c, "tx", pid, epoch, 0) is E.none
        assert await broker_add(c, v, "tx", pid, epoch, 0, verify_only=True) is E.none
        # partition 1 is not in the transaction: TRANSACTION_ABORTABLE at v4 too
        got = await broker_add(c, v, "tx", pid, epoch, 1, verify_only=True)
        assert got is E.transaction_abortable
        unknown = await broker_add(c, v, "nobody", pid, epoch, 0, verify_only=True)
        assert unknown is E.invalid_producer_id_mapping
        other_pid = await broker_add(c, v, "tx", pid + 1, epoch, 0, verify_only=False)
        assert other_pid is E.invalid_producer_id_mapping
        if tv2:  # EndTxn v5 bumps the epoch: the old one is fenced
            assert await end(c, "tx", pid, epoch, True) == (E.none, pid, epoch + 1)
        else:  # a new instance bumps it (after the abort it starts, as a Java client retries)
            got_init = await init(c, "tx")
            with trio.fail_after(10):
                while got_init[0] is E.concurrent_transactions:
                    await trio.sleep(0.01)
                    got_init = await init(c, "tx")
            assert got_init == (E.none, pid, epoch + 2)  # the abort's fence, then its own
        for verify_only in (True, False):
            fenced = await broker_add(c, v, "tx", pid, epoch, 0, verify_only=verify_only)
            assert fenced is E.producer_fenced
