"""Transactions end to end with kafka-python: the eight scenarios of issue 5 (commit across
topics and partitions; an abort hidden from read_committed but returned to read_uncommitted; an
open transaction holding back later records at the LSO; two interleaved transactions on one
partition; consume-transform-produce with send_offsets_to_transaction and the consumer's group
metadata; zombie fencing; a vanished producer's transaction aborted by its timeout; 200
back-to-back transactions).

Reads go through confluent-kafka (`read_all`) and through kafka-python's own read_committed
consumer, so its filtering of aborted data is exercised too. Every expectation is Kafka's own:
run against Apache Kafka with KAFKAD_BOOTSTRAP (the vanished-producer test, which needs a broker
setting, is skipped then).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import InvalidProducerEpochError, KafkaError, ProducerFencedError
from kafka.structs import OffsetAndMetadata

from compat_tests._support import EXTERNAL, topic_name
from compat_tests.txn_support import (
    by_partition,
    check_vanished_transaction_is_aborted,
    committed_values,
    create,
    produce_plain,
    read_all,
    settles,
    uncommitted_values,
)

pytestmark = pytest.mark.timeout(60)
FENCED = (ProducerFencedError, InvalidProducerEpochError)


@pytest.fixture
def producers() -> Iterator[list[KafkaProducer]]:
    live: list[KafkaProducer] = []
    yield live
    for p in live:
        p.close(timeout=2)


def txn_producer(bs: str, live: list[KafkaProducer], tid: str | None = None) -> KafkaProducer:
    p = KafkaProducer(bootstrap_servers=bs, transactional_id=tid or topic_name("tid"), linger_ms=5)
    live.append(p)
    p.init_transactions()
    return p


def own_read(bs: str, tps: list[tuple[str, int]]) -> list[ConsumerRecord]:
    """kafka-python's read_committed consumer, from the start up to its end offsets (the LSO),
    in the order it hands the records out."""
    c = KafkaConsumer(
        bootstrap_servers=bs,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
        fetch_max_wait_ms=100,
    )
    try:
        parts = [TopicPartition(t, p) for t, p in tps]
        c.assign(parts)
        c.seek_to_beginning()
        ends = c.end_offsets(parts)
        out: list[ConsumerRecord] = []
        deadline = time.monotonic() + 15
        while any(c.position(tp) < ends[tp] for tp in parts):
            assert time.monotonic() < deadline, f"stuck before {ends}: {out}"
            for recs in c.poll(timeout_ms=100).values():
                out += recs
        return out
    finally:
        c.close()


def own_values(bs: str, topic: str) -> list[bytes]:
    return [r.value for r in own_read(bs, [(topic, 0)])]


def test_commit_across_partitions_and_abort_hidden(bootstrap: str, producers) -> None:
    a, b = create(bootstrap, topic_name("txa"), 3), create(bootstrap, topic_name("txb"), 1)
    tps = [(a, 0), (a, 1), (a, 2), (b, 0)]
    p = txn_producer(bootstrap, producers)

    def val(n: int, t: str, part: int, i: int) -> bytes:
        return f"txn{n}-{t[:3]}-{part}-{i}".encode()

    for n, commit in ((1, True), (2, False), (3, True)):
        p.begin_transaction()
        futures = [p.send(t, val(n, t, part, i), partition=part) for t, part in tps for i in (0, 1)]
        if commit:
            p.commit_transaction()
        else:
            for f in futures:
                f.get(timeout=15)  # written, then aborted
            p.abort_transaction()
    want = {tp: [val(n, *tp, i) for n in (1, 3) for i in (0, 1)] for tp in tps}
    settles(lambda: by_partition(read_all(bootstrap, tps, "read_committed")), want)
    mine = own_read(bootstrap, tps)
    assert by_partition([(r.topic, r.partition, r.value) for r in mine]) == want
    everything = {tp: [val(n, *tp, i) for n in (1, 2, 3) for i in (0, 1)] for tp in tps}
    assert by_partition(read_all(bootstrap, tps, "read_uncommitted")) == everything


def test_open_transaction_holds_back_later_records(bootstrap: str, producers) -> None:
    t = create(bootstrap, topic_name("lso"), 1)
    produce_plain(bootstrap, t, [b"before"])
    p = txn_producer(bootstrap, producers)
    p.begin_transaction()
    p.send(t, b"in-txn", partition=0).get(timeout=15)
    produce_plain(bootstrap, t, [b"after"])
    assert committed_values(bootstrap, t) == [b"before"]
    assert own_values(bootstrap, t) == [b"before"]
    assert uncommitted_values(bootstrap, t) == [b"before", b"in-txn", b"after"]
    p.commit_transaction()
    settles(lambda: committed_values(bootstrap, t), [b"before", b"in-txn", b"after"])
    assert own_values(bootstrap, t) == [b"before", b"in-txn", b"after"]


def test_interleaved_transactions_on_one_partition(bootstrap: str, producers) -> None:
    t = create(bootstrap, topic_name("interleave"), 1)
    first, second = txn_producer(bootstrap, producers), txn_producer(bootstrap, producers)
    first.begin_transaction()
    first.send(t, b"a1", partition=0).get(timeout=15)
    second.begin_transaction()
    second.send(t, b"b1", partition=0).get(timeout=15)
    first.send(t, b"a2", partition=0).get(timeout=15)
    first.commit_transaction()
    # The second transaction starts at offset 1: only what lies below it is visible.
    settles(lambda: committed_values(bootstrap, t), [b"a1"])
    assert own_values(bootstrap, t) == [b"a1"]
    second.send(t, b"b2", partition=0).get(timeout=15)
    second.abort_transaction()
    settles(lambda: committed_values(bootstrap, t), [b"a1", b"a2"])
    assert own_values(bootstrap, t) == [b"a1", b"a2"]
    assert uncommitted_values(bootstrap, t) == [b"a1", b"b1", b"a2", b"b2"]


def test_consume_transform_produce_with_group_metadata(bootstrap: str, producers) -> None:
    src, dst = create(bootstrap, topic_name("src"), 1), create(bootstrap, topic_name("dst"), 1)
    produce_plain(bootstrap, src, [b"in-%d" % i for i in range(10)])
    consumer = KafkaConsumer(
        src,
        bootstrap_servers=bootstrap,
        group_id=topic_name("ctp"),
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    )
    p = txn_producer(bootstrap, producers)
    tp = TopicPartition(src, 0)
    try:
        taken: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(taken) < 10:
            assert time.monotonic() < deadline, f"consumed only {taken}"
            # a long poll: see group_consumer.py on kafka-python losing a rejoin at short ones
            for recs in consumer.poll(timeout_ms=1000).values():
                taken += [r.value for r in recs]
        meta = consumer.group_metadata()
        assert meta.generation_id > 0 and meta.member_id, meta  # a real member of the group
        # Commit the first half, abort the second, then redo it: the abort changes nothing.
        for lo, hi, commit, offset_after in ((0, 5, True, 5), (5, 10, False, 5), (5, 10, True, 10)):
            p.begin_transaction()
            for v in taken[lo:hi]:
                p.send(dst, v.upper(), partition=0)
            p.send_offsets_to_transaction({tp: OffsetAndMetadata(hi, "", -1)}, meta)
            if commit:
                p.commit_transaction()
            else:
                p.abort_transaction()
            # read_committed: kafka-python asks for stable offsets, waiting out pending ones.
            assert consumer.committed(tp) == offset_after
            want = [v.upper() for v in taken[:offset_after]]
            settles(lambda: committed_values(bootstrap, dst), want)
        assert own_values(bootstrap, dst) == [b"IN-%d" % i for i in range(10)]
    finally:
        consumer.close()


def test_a_new_instance_fences_the_zombie(bootstrap: str, producers) -> None:
    """Each time a new instance with the same transactional.id has fenced the one before, the
    fenced one tries one thing: produce, commit offsets, or commit. Each must fail."""
    t, src = create(bootstrap, topic_name("zombie"), 2), create(bootstrap, topic_name("zsrc"), 1)
    tid, group = topic_name("tid"), topic_name("zgroup")
    current = txn_producer(bootstrap, producers, tid)
    for action in ("produce", "send_offsets", "commit"):
        zombie = current
        zombie.begin_transaction()
        zombie.send(t, f"zombie-{action}".encode(), partition=0).get(timeout=15)
        current = txn_producer(bootstrap, producers, tid)  # fences it, aborts its transaction
        with pytest.raises(KafkaError) as info:
            if action == "produce":
                zombie.send(t, b"zombie-late", partition=0).get(timeout=15)
            elif action == "send_offsets":
                offsets = {TopicPartition(src, 0): OffsetAndMetadata(1, "", -1)}
                zombie.send_offsets_to_transaction(offsets, group)
            else:
                zombie.commit_transaction()
        assert isinstance(info.value, FENCED), repr(info.value)
    current.begin_transaction()
    current.send(t, b"fresh", partition=1)
    current.commit_transaction()
    tps = [(t, 0), (t, 1)]
    settles(lambda: read_all(bootstrap, tps, "read_committed"), [(t, 1, b"fresh")])
    zombies = [b"zombie-produce", b"zombie-send_offsets", b"zombie-commit"]
    assert uncommitted_values(bootstrap, t) == zombies  # aborted, and nothing written later
    probe = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        assert probe.committed(TopicPartition(src, 0)) is None
    finally:
        probe.close()


def test_vanished_producer_is_aborted_by_its_timeout(tmp_path: Path) -> None:
    if EXTERNAL:
        pytest.skip("needs a short transaction.abort.timed.out.transaction.cleanup.interval.ms")
    check_vanished_transaction_is_aborted(tmp_path, "kafka-python", own_values)


def test_200_back_to_back_transactions(bootstrap: str, producers) -> None:
    t = create(bootstrap, topic_name("many"), 1)
    p = txn_producer(bootstrap, producers)
    want = [b"%03d" % i for i in range(200)]
    for v in want:
        p.begin_transaction()
        p.send(t, v, partition=0)
        p.commit_transaction()
    settles(lambda: committed_values(bootstrap, t), want)
    mine = own_read(bootstrap, [(t, 0)])
    # One record and one commit marker per transaction.
    assert [(r.offset, r.value) for r in mine] == [(2 * i, v) for i, v in enumerate(want)]
