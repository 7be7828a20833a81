"""Transaction version 2 on a running broker, driven in process as a Java 4.x producer's requests
would drive it (Produce v12 and EndTxn v5 are not advertised yet, so not over the wire): the
partition added by the produce itself (``proxy/txn_implicit_add.py``), EndTxn with the epoch
bump, the markers written by ``Broker.write_txn_marker`` at the bumped epoch, the late writer
of a finished transaction fenced, a TV2 empty abort, and a classic (TV1) transaction on the
same partitions at the same time."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.txn.runtime import EndTxnResult
from coordinator.txn.state import TV2
from proxy.broker import Broker
from proxy.txn_implicit_add import add_for_produce
from storage.partition import Partition
from tests.proxy.harness import connect, running_broker
from tests.proxy.test_broker_requests import create
from tests.proxy.test_transactions import tbatch
from tests.storage.test_transactions import read_committed
from wire.records import iter_batches, read_batch_header

E = ErrorCode


async def produce(
    broker: Broker, tid: str, pid: int, epoch: int, seq: int, p: Partition, *, tv2: bool = True
) -> ErrorCode | int:
    """What the produce path does for one transactional batch (v12 when ``tv2``)."""
    if tv2:
        code = await add_for_produce(broker.txns, tid, pid, epoch, p, seq, broker.now_ms())
        if code is not E.none:
            return code
    data = tbatch(pid, seq, epoch=epoch)
    tp = p.tp

    def verify() -> ErrorCode:
        return broker.txns.verify_partition(tid, pid, epoch, tp)

    now = broker.now_ms()
    got = await p.append(data, read_batch_header(data), now, verify=verify, supports_epoch_bump=tv2)
    return got if isinstance(got, ErrorCode) else got[0]


def appended(outcome: object) -> None:
    assert not isinstance(outcome, ErrorCode), outcome  # ErrorCode is an int too


async def markers(p: Partition) -> list[tuple[int, int]]:
    """(producer id, epoch) of every control batch of the partition."""
    data = await p.read(0, 1 << 30)
    return [(h.producer_id, h.producer_epoch) for _, h in iter_batches(data) if h.is_control]


async def test_tv2_transactions_and_the_late_writer() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        assert await create(c, "in", partitions=2) is E.none
        broker = server.broker
        p0, p1 = (broker.topics.partition("in", i) for i in (0, 1))
        assert p0 is not None and p1 is not None
        init = await broker.txns.init_producer_id("tv2", 60_000)
        pid, epoch = init.producer_id, init.producer_epoch
        for commit in (True, False, True):
            seqs = {0: 0, 1: 0}
            for p in (p0, p1, p0):
                appended(await produce(broker, "tv2", pid, epoch, seqs[p.tp.partition], p))
                seqs[p.tp.partition] += 1
            meta = broker.txns.cache["tv2"]
            assert meta.client_transaction_version == TV2
            assert meta.partitions == {("in", 0), ("in", 1)}
            result = await broker.txns.end_transaction("tv2", pid, epoch, commit, TV2)
            assert result == EndTxnResult(E.none, pid, epoch + 1)
            assert (await markers(p0))[-1] == (pid, epoch + 1)
            assert (await markers(p1))[-1] == (pid, epoch + 1)
            # a late batch of the finished transaction: refused by the coordinator, and by
            # the partition itself if it got there without an add
            assert await produce(broker, "tv2", pid, epoch, 2, p0) is E.producer_fenced
            late = await produce(broker, "tv2", pid, epoch, 1, p1, tv2=False)
            assert late is E.invalid_producer_epoch
            assert not p1.has_open_transaction(pid, epoch)
            epoch += 1
        committed, aborted = await read_committed(p0, 0)
        assert len(committed) == 4 and len(aborted) == 1
        assert p0.last_stable_offset == p0.high_watermark
        # an empty abort still bumps; a commit of nothing is refused
        assert await broker.txns.end_transaction("tv2", pid, epoch, False, TV2) == (
            EndTxnResult(E.none, pid, epoch + 1)
        )
        result = await broker.txns.end_transaction("tv2", pid, epoch + 1, True, TV2)
        assert result == EndTxnResult(E.invalid_txn_state)


async def test_tv1_and_tv2_transactions_on_the_same_partitions() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        assert await create(c, "in") is E.none
        broker = server.broker
        p = broker.topics.partition("in", 0)
        assert p is not None
        r2 = await broker.txns.init_producer_id("new", 60_000)
        r1 = await broker.txns.init_producer_id("classic", 60_000)
        (pid2, e2), (pid1, e1) = (
            (r2.producer_id, r2.producer_epoch),
            (
                r1.producer_id,
                r1.producer_epoch,
            ),
        )
        assert await broker.txns.add_partitions("classic", pid1, e1, [("in", 0)]) is E.none
        appended(await produce(broker, "classic", pid1, e1, 0, p, tv2=False))
        appended(await produce(broker, "new", pid2, e2, 0, p))
        appended(await produce(broker, "classic", pid1, e1, 1, p, tv2=False))
        assert await broker.txns.end_transaction("new", pid2, e2, False, TV2) == EndTxnResult(
            E.none, pid2, e2 + 1
        )
        assert p.last_stable_offset == 0  # the classic transaction is still open at offset 0
        assert await broker.txns.end_txn("classic", pid1, e1, True) is E.none
        assert await markers(p) == [(pid2, e2 + 1), (pid1, e1)]
        committed, aborted = await read_committed(p, 0)
        assert committed == [0, 2] and aborted == [(pid2, 1)]
        # both carry on: the classic one at its epoch, the TV2 one at the bumped epoch
        appended(await produce(broker, "new", pid2, e2 + 1, 0, p))
        assert await broker.txns.add_partitions("classic", pid1, e1, [("in", 0)]) is E.none
        appended(await produce(broker, "classic", pid1, e1, 2, p, tv2=False))
