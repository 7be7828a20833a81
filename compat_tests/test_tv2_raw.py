"""Transaction version 2 over the wire as Java 4.x's producer drives it, through kafkad's
raw-protocol producer (``kafkad/client/txn_producer.py``): repeated transactions with the epoch
bumped at each commit and abort, consume-transform-produce offsets by TxnOffsetCommit v5, the
late writer of a finished transaction and the fenced old instance refused (their stale
epoch abortable, the old instance's abort fenced, as Java's producer sees them), and a classic
transaction on the same partition at the same time. Skipped while the broker offers no EndTxn
v5 or its ``transaction.version`` is finalized below 2."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from compat_tests._support import topic_name, wait_for
from compat_tests.conftest import _LIVE, _spawn
from compat_tests.test_transactions_crash import lso_reaches_hw
from compat_tests.txn_support import create, read_all
from kafkad.client.txn_producer import TxnAbortable, TxnFenced, TxnProducer
from kafkad.client.txn_transport import SocketTransport


@pytest.fixture
def transport(bootstrap: str) -> Iterator[SocketTransport]:
    t = SocketTransport(bootstrap)
    why = t.why_no_tv2()
    if why is not None:
        t.close()
        pytest.skip(f"no transaction version 2: {why}")
    yield t
    t.close()


def committed_values(bs: str, topic: str, partitions: int = 1) -> list[bytes]:
    tps = [(topic, p) for p in range(partitions)]
    return [v for _, _, v in read_all(bs, tps, "read_committed")]


def test_repeated_transactions_bump_the_epoch_and_commit_offsets(
    bootstrap: str, transport: SocketTransport
) -> None:
    out, src, group = create(bootstrap, topic_name("tv2o"), 2), topic_name("tv2in"), topic_name("g")
    create(bootstrap, src, 1)
    p = TxnProducer(transport, topic_name("tid"))
    p.init_transactions()
    epochs = [p.producer_epoch]
    for n in range(6):
        p.begin()
        p.send(out, n % 2, [f"{n}.a".encode(), f"{n}.b".encode()])
        p.send_offsets(group, [(src, 0, n + 1)])
        p.commit() if n % 3 != 2 else p.abort()
        epochs.append(p.producer_epoch)
    assert epochs == list(range(epochs[0], epochs[0] + 7))  # one bump per transaction
    got = sorted(committed_values(bootstrap, out, 2))
    want = sorted(f"{n}.{x}".encode() for n in range(6) if n % 3 != 2 for x in "ab")
    assert got == want
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        (tp,) = c.committed([TopicPartition(src, 0)], 10)
    finally:
        c.close()
    assert tp.offset == 5  # transaction 4's offsets; 5's were aborted


def test_the_late_writer_and_the_old_instance_are_fenced(
    bootstrap: str, transport: SocketTransport
) -> None:
    topic, tid = create(bootstrap, topic_name("tv2late"), 1), topic_name("tid")
    p = TxnProducer(transport, tid)
    p.init_transactions()
    p.begin()
    p.send(topic, 0, [b"kept"])
    finished_epoch = p.producer_epoch
    p.commit()
    p.begin()  # a batch of the finished transaction arrives late (its epoch, a new sequence)
    p.producer_epoch, p._sequences = finished_epoch, {(topic, 0): 1}
    with pytest.raises(TxnAbortable) as late:  # as Java's: InvalidProducerEpochException
        p.send(topic, 0, [b"late"])
    assert late.value.code == 47  # INVALID_PRODUCER_EPOCH

    a = TxnProducer(transport, tid)
    a.init_transactions()
    a.begin()
    a.send(topic, 0, [b"open"])
    b = TxnProducer(transport, tid)
    b.init_transactions()  # fences a and aborts its open transaction
    with pytest.raises(TxnAbortable) as zombie:  # the stale epoch: abortable, as in Java
        a.send(topic, 0, [b"zombie"])
    assert zombie.value.code == 47
    with pytest.raises(TxnFenced):  # its abort is told PRODUCER_FENCED: fatal
        a.abort()
    b.begin()
    b.send(topic, 0, [b"new"])
    b.commit()
    wait_for(lambda: lso_reaches_hw(bootstrap, [(topic, 0)]), 30, "the LSO to reach the HW")
    assert committed_values(bootstrap, topic) == [b"kept", b"new"]


def test_classic_and_tv2_transactions_on_one_partition(
    bootstrap: str, transport: SocketTransport
) -> None:
    topic = create(bootstrap, topic_name("tv2mix"), 1)
    tv2 = TxnProducer(transport, topic_name("tid2"))
    classic = TxnProducer(transport, topic_name("tid1"), tv2=False)
    for p in (tv2, classic):
        p.init_transactions()
    for n in range(3):
        tv2.begin()
        classic.begin()
        tv2.send(topic, 0, [f"tv2.{n}".encode()])
        classic.send(topic, 0, [f"classic.{n}".encode()])
        tv2.send(topic, 0, [f"tv2.{n}.b".encode()])
        (classic.commit if n % 2 else classic.abort)()
        (tv2.abort if n % 2 else tv2.commit)()
    wait_for(lambda: lso_reaches_hw(bootstrap, [(topic, 0)]), 30, "the LSO to reach the HW")
    got = committed_values(bootstrap, topic)
    assert got == [b"tv2.0", b"tv2.0.b", b"classic.1", b"tv2.2", b"tv2.2.b"]


def test_the_workload_worker_picks_the_flow_as_java_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``tv2`` workload worker is Java 4.x's producer: at a finalized ``transaction.version``
    below 2 it runs the classic flow, whatever API versions the broker offers."""
    from compat_tests.workload.worker import RawTxn

    monkeypatch.setenv("KAFKAD_FEATURE", "transaction.version=1")
    broker = _spawn(tmp_path, "tv1")
    try:
        cfg = {"bootstrap": broker.bootstrap, "tid": topic_name("tid"), "client": "tv2"}
        worker = RawTxn(cfg | {"txn_timeout_ms": 10_000})
        worker.t.close()
        assert worker.p.tv2 is False
    finally:
        broker.stop()
        _LIVE.remove(broker)
