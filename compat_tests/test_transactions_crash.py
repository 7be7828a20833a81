"""Transactions across kill -9: a stream of confluent-kafka transactions over two topics and
several partitions (some committing consumer offsets with send_offsets_to_transaction, some
aborted on purpose) while the broker dies at seeded moments, then checks after every restart
(spec eos.md §4, §5, §6.2):

* every acknowledged commit is entirely visible to a read_committed consumer, on all its
  partitions, and its offsets are the group's committed offsets;
* nothing that was aborted, or never asked to commit, is visible;
* a transaction whose commit was never acknowledged is all-or-nothing (data and offsets);
* each partition holds its committed records in production order, without duplicates;
* no LSO stays stuck: once the open transactions are resolved, the LSO of every partition
  reaches its high watermark.

The broker dies two ways: the test kills it (SIGKILL) before a randomly drawn client step
(begin, each produce, flush, send_offsets, commit/abort), and the broker's own crash points
(``kafkad.fault.injection`` ``crash=txn_after_prepare``, ``crash=txn_after_first_marker``:
between the durable PrepareCommit/PrepareAbort and the last marker) end it mid-EndTxn. A
watcher thread restarts it on the same data dir and port whichever way it died, each time with
a new fault seed (the same seed would crash at the same spot forever). The offsets each
"consume-transform-produce" transaction commits are chosen by the test (transaction n commits
offset n + 1 of the input partition), with the group metadata of a consumer of that input.

librdkafka caches the group coordinator, and after the broker comes back its
send_offsets_to_transaction can wait forever for that cached coordinator to come up, ignoring
its timeout (librdkafka#5456, #5511; its coordinator-request timeout is never checked). So the
test does what an application must: after a restart it replaces the producer (the new
instance's InitProducerId fences the old one and aborts its open transaction) before the next
send_offsets_to_transaction, and a transaction that loses its producer this way before asking
to commit is expected aborted.

Everything is drawn from the seed, but of every four transactions the first is committed and
the second aborted on purpose whatever the draw, so each run of two or more goes through
abort_transaction and commit_transaction (the test asserts both fates were seen); SIGKILLs land
at seeded client steps, but what the broker has done by then depends on timing, so a failure
prints its seed and the history. Default: a few seeds, well under a minute. Longer:
``KAFKAD_TXN_CRASH_SEEDS=50 KAFKAD_TXN_CRASH_TXNS=40``.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from compat_tests._support import EXTERNAL, topic_name, wait_for
from compat_tests.conftest import _LIVE, BrokerProcess, _spawn
from compat_tests.test_transactions_confluent import create, read_all

SEEDS = int(os.environ.get("KAFKAD_TXN_CRASH_SEEDS", "2"))
TXNS = int(os.environ.get("KAFKAD_TXN_CRASH_TXNS", "10"))
KILL_P = 0.025  # per client step
CRASH_SPEC = "crash=txn_after_prepare@0.1; crash=txn_after_first_marker@0.2"
OP_TIMEOUT_S = 30
T = TypeVar("T")
DEBUG = {"debug": "eos,protocol"} if os.environ.get("KAFKAD_TXN_CRASH_DEBUG") else {}

pytestmark = [
    pytest.mark.timeout(60 + 60 * SEEDS * max(1, TXNS // 10)),
    pytest.mark.skipif(bool(EXTERNAL), reason="kills the broker: not against KAFKAD_BOOTSTRAP"),
]


class Abandoned(Exception):
    """The transaction's producer was replaced before it asked to commit."""


@dataclass
class Txn:
    n: int
    records: list[tuple[int, int]]  # (index into tps, record number)
    offsets: bool  # commits offset n + 1 of the input partition
    abort: bool  # aborted on purpose
    outcome: str = "open"  # commit | abort | unknown (commit asked, never acknowledged)

    def value(self, tp: int, i: int) -> bytes:
        return f"{self.n}:{tp}:{i}".encode()


@dataclass
class Crashes:
    """The broker's restarts, by the watcher (own crash) or the test (SIGKILL)."""

    broker: BrokerProcess
    base_seed: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    kills: int = 0
    crashes: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def _restart(self) -> None:
        restarts = self.kills + self.crashes
        fault = f"seed={self.base_seed * 1000 + restarts}; {CRASH_SPEC}"
        self.broker.settings["kafkad.fault.injection"] = fault
        self.broker.restart()

    def kill(self) -> None:
        with self.lock:
            self.kills += 1
            self.broker.kill9()
            self._restart()

    def watch(self) -> None:
        while not self.stop.wait(0.02):
            with self.lock:
                if self.broker.exited():
                    self.crashes += 1
                    self._restart()

    @property
    def restarts(self) -> int:
        return self.kills + self.crashes


def retrying(fn: Callable[..., T], *args: object) -> T:
    """``fn`` again while it fails with a retriable error (librdkafka's transactional calls may
    be repeated after one)."""
    deadline = time.monotonic() + OP_TIMEOUT_S
    while True:
        try:
            return fn(*args)
        except KafkaException as exc:
            if not exc.args[0].retriable() or time.monotonic() > deadline:
                raise


def new_producer(bs: str, tid: str) -> Producer:
    p = Producer(
        {
            "bootstrap.servers": bs,
            "transactional.id": tid,
            "linger.ms": 2,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 200,
            "retry.backoff.ms": 20,
            "retry.backoff.max.ms": 200,
            **DEBUG,
        }
    )
    retrying(p.init_transactions, OP_TIMEOUT_S)
    return p


@pytest.fixture(params=range(SEEDS), ids=lambda s: f"seed{s}")
def crashing(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Crashes]:
    seed = request.param
    broker = _spawn(tmp_path, "txn-crash", {"kafkad.fault.injection": f"seed={seed}; {CRASH_SPEC}"})
    crashes = Crashes(broker, seed)
    watcher = threading.Thread(target=crashes.watch, daemon=True)
    watcher.start()
    try:
        yield crashes
    finally:
        crashes.stop.set()
        watcher.join(10)
        broker.stop()
        _LIVE.remove(broker)


def test_transactions_survive_crashes(crashing: Crashes) -> None:
    seed = crashing.base_seed
    rng = random.Random(seed)
    bs = crashing.broker.bootstrap
    a, b = create(bs, topic_name("xa"), 3), create(bs, topic_name("xb"), 2)
    src = create(bs, topic_name("xin"), 1)
    tps = [(a, 0), (a, 1), (a, 2), (b, 0), (b, 1)]
    group, tid = topic_name("xg"), topic_name("xtid")
    consumer = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "reconnect.backoff.max.ms": 200,
        }
    )
    consumer.assign([TopicPartition(src, 0, 0)])
    txns: list[Txn] = []
    p = new_producer(bs, tid)
    producer_at = verified_at = 0  # restarts seen when the producer was made, when checked
    history: list[str] = []
    aborts_asked = 0  # abort_transaction calls on purpose (not to recover)

    def step(what: str) -> None:
        if rng.random() < KILL_P:
            history.append(f"kill9 before {what}")
            print(history[-1], file=sys.stderr, flush=True)
            crashing.kill()

    try:
        for n in range(TXNS):
            chosen = sorted(rng.sample(range(len(tps)), rng.randint(1, 4)))
            records = [(tp, i) for tp in chosen for i in range(rng.randint(1, 3))]
            offsets = rng.random() < 0.4
            drawn = rng.random() < 0.25
            # of every four, the first is committed and the second aborted whatever the draw
            # (the draw stays, so the seeds' other choices do not move): a seed may draw no
            # abort at all, or abort all of a short run (seed 2 its first three)
            txn = Txn(n, records, offsets=offsets, abort=n % 4 == 1 or (drawn and n % 4 != 0))
            txns.append(txn)
            asked_commit = False
            try:
                step(f"begin {n}")
                p.begin_transaction()
                for tp, i in txn.records:
                    step(f"produce {n}")
                    topic, part = tps[tp]
                    p.produce(topic, txn.value(tp, i), partition=part)
                step(f"flush {n}")
                p.flush(OP_TIMEOUT_S)
                if txn.offsets:
                    step(f"offsets {n}")
                    if crashing.restarts > producer_at:  # librdkafka#5456: replace it
                        history.append(f"txn {n}: new producer before send_offsets")
                        producer_at = crashing.restarts
                        p = new_producer(bs, tid)
                        raise Abandoned
                    offsets = [TopicPartition(src, 0, n + 1)]
                    meta = consumer.consumer_group_metadata()
                    retrying(p.send_offsets_to_transaction, offsets, meta, OP_TIMEOUT_S)
                step(f"end {n}")
                if txn.abort:
                    aborts_asked += 1
                    retrying(p.abort_transaction, OP_TIMEOUT_S)
                    txn.outcome = "abort"
                else:
                    asked_commit = True
                    retrying(p.commit_transaction, OP_TIMEOUT_S)
                    txn.outcome = "commit"
            except Abandoned:
                txn.outcome = "abort"
            except KafkaException as exc:
                err = exc.args[0]
                history.append(f"txn {n}: {err.name()} fatal={err.fatal()}")
                txn.outcome = "unknown" if asked_commit else "abort"
                recovered = False
                if err.txn_requires_abort() and not err.fatal():
                    try:
                        retrying(p.abort_transaction, OP_TIMEOUT_S)
                        recovered = True
                    except KafkaException as again:
                        history.append(f"txn {n}: abort failed: {again.args[0].name()}")
                if not recovered:  # a new instance fences this one and resolves its txn
                    producer_at = crashing.restarts
                    p = new_producer(bs, tid)
            history.append(f"txn {n}: {txn.outcome} restarts={crashing.restarts}")
            if crashing.restarts > producer_at:  # librdkafka#5456, see the docstring
                producer_at = crashing.restarts
                p = new_producer(bs, tid)
            if crashing.restarts > verified_at:
                verified_at = crashing.restarts
                check(bs, tps, src, group, txns)
        check(bs, tps, src, group, txns)
    except BaseException:
        print(f"seed {seed}: " + "\n".join(history))  # shown on failure
        raise
    finally:
        consumer.close()
    # every run went through abort_transaction and saw both fates checked
    if TXNS >= 2:
        assert aborts_asked >= 1, history
        assert {t.outcome for t in txns} >= {"commit", "abort"}, [t.outcome for t in txns]
    print(f"seed {seed}: {crashing.kills} kill -9, {crashing.crashes} crash point(s)")


def check(bs: str, tps: list[tuple[str, int]], src: str, group: str, txns: list[Txn]) -> None:
    """Every expectation of the module docstring over the transactions so far (the last one
    resolved)."""
    wait_for(lambda: lso_reaches_hw(bs, tps), 30, "every LSO to reach its high watermark")
    got = read_all(bs, tps, "read_committed")
    by_txn: dict[int, set[tuple[int, int]]] = {}
    per_tp: dict[int, list[tuple[int, int]]] = {}
    for _, _, value in got:
        n, tp, i = map(int, value.split(b":"))
        by_txn.setdefault(n, set()).add((tp, i))
        per_tp.setdefault(tp, []).append((n, i))
    committed_offset = -1001  # librdkafka's "no committed offset"
    for txn in txns:
        seen = by_txn.get(txn.n, set())
        full = set(txn.records)
        if txn.outcome == "commit":
            assert seen == full, f"acknowledged commit {txn.n} not fully visible: {seen} of {full}"
        elif txn.outcome == "abort":
            assert not seen, f"aborted transaction {txn.n} visible: {seen}"
        else:
            assert seen in (set(), full), f"transaction {txn.n} half visible: {seen} of {full}"
        if txn.offsets and seen:
            committed_offset = txn.n + 1
    for tp, recs in per_tp.items():
        assert recs == sorted(set(recs)), f"{tps[tp]} out of order or duplicated: {recs}"

    def offsets_committed() -> bool:
        c = Consumer(
            {"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed"}
        )
        try:
            (tp,) = c.committed([TopicPartition(src, 0)], 10)
        except KafkaException:
            return False
        finally:
            c.close()
        return tp.offset == committed_offset

    wait_for(offsets_committed, 30, f"the group's committed offset to be {committed_offset}")


def lso_reaches_hw(bs: str, tps: list[tuple[str, int]]) -> bool:
    ends = {}
    for isolation in ("read_committed", "read_uncommitted"):
        c = Consumer({"bootstrap.servers": bs, "group.id": "lso", "isolation.level": isolation})
        try:
            ends[isolation] = [
                c.get_watermark_offsets(TopicPartition(t, p), 10, cached=False)[1] for t, p in tps
            ]
        except KafkaException:
            return False
        finally:
            c.close()
    return ends["read_committed"] == ends["read_uncommitted"]
