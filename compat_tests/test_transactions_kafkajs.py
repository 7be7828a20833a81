"""Transactions end to end with kafkajs 2.2.4 (v0-v1 of the transaction APIs), through
kafkajs/txn_driver.js: the eight scenarios of issue 5 (commit across topics and partitions, aborts
hidden from read_committed, an open transaction holding back the LSO, two interleaved transactions
on one partition, consume-transform-produce with sendOffsets, zombie fencing, a stalled producer's
transaction aborted by the timeout, 200 back-to-back transactions).

Each check reads with confluent-kafka (``read_all``, up to the end the broker reports for the
isolation level) and with kafkajs's own group consumer, so kafkajs's filtering of aborted data is
exercised too. Fenced kafkajs calls fail with INVALID_PRODUCER_EPOCH: kafkajs predates
PRODUCER_FENCED, and Kafka answers the old request versions with the old code.

The broker is a module-scoped kafkad subprocess with group.initial.rebalance.delay.ms=0 (kafkajs
consumers always join a group) and a 200 ms timed-out-transaction scan; against KAFKAD_BOOTSTRAP
the same tests run there, except the timeout scenario, which needs that broker setting.
"""

from __future__ import annotations

import json
import queue
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compat_tests._support import EXTERNAL, topic_name, wait_for
from compat_tests.test_transactions_confluent import committed_offset, lso, txn_test_broker
from compat_tests.txn_support import create, plain_producer, read_all, values

DRIVER = Path(__file__).parent / "kafkajs" / "txn_driver.js"
CALL_TIMEOUT_S = 30.0
pytestmark = pytest.mark.timeout(120)


class JsError(Exception):
    def __init__(self, error: dict[str, Any]):
        super().__init__(f"{error['name']} {error['type']}: {error['message']}")
        self.type = error["type"]


class Driver:
    """One txn_driver.js process; call() sends a command and waits for its answer."""

    def __init__(self, bootstrap: str, stderr_path: Path):
        node = shutil.which("node")
        if node is None or not (DRIVER.parent / "node_modules" / "kafkajs").is_dir():
            pytest.fail("node or kafkajs missing: run scripts/install-client-tools")
        self.stderr_path = stderr_path
        self._stderr = open(stderr_path, "a", encoding="utf-8")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [node, str(DRIVER), bootstrap],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def call(self, op: str, **args: Any) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        try:
            line = self._lines.get(timeout=CALL_TIMEOUT_S)
        except queue.Empty:
            raise AssertionError(f"kafkajs {op}: no answer\n{self.stderr()}") from None
        assert line is not None, f"kafkajs driver exited during {op}\n{self.stderr()}"
        out = json.loads(line)
        if "error" in out:
            raise JsError(out["error"])
        return out["ok"]

    def fails(self, op: str, **args: Any) -> str:
        """The Kafka error name a call fails with."""
        with pytest.raises(JsError) as info:
            self.call(op, **args)
        return str(info.value.type)

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")[-5000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGKILL)
                self.proc.wait()
        self._reader.join(5)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self._stderr.close()


@pytest.fixture(scope="module")
def bs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with txn_test_broker(tmp_path_factory, "txn-js") as bootstrap:
        yield bootstrap


@pytest.fixture
def js(bs: str, tmp_path: Path) -> Iterator[Driver]:
    d = Driver(bs, tmp_path / "kafkajs.stderr.log")
    yield d
    d.close()


def msgs(*items: tuple[str, int]) -> list[dict[str, Any]]:
    return [{"value": v, "partition": p} for v, p in items]


def js_read(js: Driver, topics: list[str], count: int, uncommitted: bool = False) -> list[Any]:
    """kafkajs's own group consumer, from the beginning, until count records."""
    got = js.call(
        "consume",
        group=topic_name("js-reader"),
        topics=topics,
        count=count,
        readUncommitted=uncommitted,
    )
    return [tuple(r) for r in got]


def by_partition(recs: list[Any]) -> dict[tuple[str, int], list[bytes]]:
    out: dict[tuple[str, int], list[bytes]] = {}
    for r in recs:
        out.setdefault((r[0], r[1]), []).append(r[-1].encode() if isinstance(r[-1], str) else r[-1])
    return out


def test_commit_is_atomic_across_topics_and_partitions(bs: str, js: Driver) -> None:
    a, b = create(bs, topic_name("kjs-txa"), 3), create(bs, topic_name("kjs-txb"), 1)
    tps = [(a, 0), (a, 1), (a, 2), (b, 0)]
    js.call("producer", name="p", tid=topic_name("kjs-tid"))
    for n, commit in ((1, True), (2, False), (3, True)):
        js.call("begin", name="p")
        for t, part in tps:
            js.call(
                "send", name="p", topic=t, messages=msgs(*((f"t{n}-{i}", part) for i in range(3)))
            )
        js.call("commit" if commit else "abort", name="p")
    want = {tp: [f"t{n}-{i}".encode() for n in (1, 3) for i in range(3)] for tp in tps}
    assert by_partition(read_all(bs, tps, "read_committed")) == want
    assert by_partition(js_read(js, [a, b], 6 * len(tps))) == want
    assert len(read_all(bs, tps, "read_uncommitted")) == 9 * len(tps)


def test_abort_is_hidden_from_read_committed_only(bs: str, js: Driver) -> None:
    t = create(bs, topic_name("kjs-abort"), 1)
    js.call("producer", name="p", tid=topic_name("kjs-tid"))
    for tag, end in (("c1", "commit"), ("ab", "abort"), ("c2", "commit")):
        js.call("begin", name="p")
        js.call("send", name="p", topic=t, messages=msgs(*((f"{tag}-{i}", 0) for i in range(4))))
        js.call(end, name="p")
    committed = [f"{tag}-{i}" for tag in ("c1", "c2") for i in range(4)]
    everything = [f"{tag}-{i}" for tag in ("c1", "ab", "c2") for i in range(4)]
    assert values(read_all(bs, [(t, 0)], "read_committed")) == [v.encode() for v in committed]
    assert [r[3] for r in js_read(js, [t], 8)] == committed
    # read_uncommitted returns the aborted records too (the markers are never surfaced)
    assert values(read_all(bs, [(t, 0)], "read_uncommitted")) == [v.encode() for v in everything]
    assert [r[3] for r in js_read(js, [t], 12, uncommitted=True)] == everything


def test_open_transaction_holds_back_read_committed(bs: str, js: Driver) -> None:
    t = create(bs, topic_name("kjs-lso"), 1)
    plain = plain_producer(bs)
    plain.produce(t, b"before", partition=0)
    plain.flush(10)
    js.call("producer", name="p", tid=topic_name("kjs-tid"))
    js.call("begin", name="p")
    js.call("send", name="p", topic=t, messages=msgs(("in-txn", 0)))
    plain.produce(t, b"after", partition=0)  # non-transactional, behind the open transaction
    plain.flush(10)
    assert values(read_all(bs, [(t, 0)], "read_committed")) == [b"before"]
    assert values(read_all(bs, [(t, 0)], "read_uncommitted")) == [b"before", b"in-txn", b"after"]
    js.call("commit", name="p")
    assert values(read_all(bs, [(t, 0)], "read_committed")) == [b"before", b"in-txn", b"after"]
    assert [r[3] for r in js_read(js, [t], 3)] == ["before", "in-txn", "after"]


def test_interleaved_transactions_on_one_partition(bs: str, js: Driver) -> None:
    t = create(bs, topic_name("kjs-interleave"), 1)
    js.call("producer", name="a", tid=topic_name("kjs-tid-a"))
    js.call("producer", name="b", tid=topic_name("kjs-tid-b"))
    js.call("begin", name="a")
    js.call("begin", name="b")
    js.call("send", name="a", topic=t, messages=msgs(("a1", 0)))  # offset 0
    js.call("send", name="b", topic=t, messages=msgs(("b1", 0)))  # offset 1: b's first
    js.call("send", name="a", topic=t, messages=msgs(("a2", 0)))  # offset 2
    js.call("commit", name="a")  # marker at 3
    # The LSO stops at b's first offset: a1 is visible at once, a2 waits for b.
    assert values(read_all(bs, [(t, 0)], "read_committed")) == [b"a1"]
    js.call("send", name="b", topic=t, messages=msgs(("b2", 0)))
    js.call("abort", name="b")
    assert values(read_all(bs, [(t, 0)], "read_committed")) == [b"a1", b"a2"]
    # kafkajs filters b's aborted records from between a's committed ones itself
    assert [(r[2], r[3]) for r in js_read(js, [t], 2)] == [(0, "a1"), (2, "a2")]
    assert values(read_all(bs, [(t, 0)], "read_uncommitted")) == [b"a1", b"b1", b"a2", b"b2"]


def test_consume_transform_produce_with_send_offsets(bs: str, js: Driver) -> None:
    src, dst = create(bs, topic_name("kjs-src"), 1), create(bs, topic_name("kjs-dst"), 1)
    plain = plain_producer(bs)
    for i in range(10):
        plain.produce(src, f"in-{i}".encode(), partition=0)
    plain.flush(10)
    group = topic_name("kjs-ctp")
    taken = js.call("consume", group=group, topics=[src], count=10)  # joins the group
    assert [r[3] for r in taken] == [f"in-{i}" for i in range(10)]
    js.call("producer", name="p", tid=topic_name("kjs-tid"))
    offsets = [{"topic": src, "partitions": [{"partition": 0, "offset": "10"}]}]
    for end in ("abort", "commit"):
        js.call("begin", name="p")
        js.call("send", name="p", topic=dst, messages=msgs(*((r[3].upper(), 0) for r in taken)))
        js.call("sendOffsets", name="p", group=group, topics=offsets)
        js.call(end, name="p")
        if end == "abort":  # the aborted offsets were never committed
            assert js.call("fetchOffsets", group=group, topic=src) == [[0, -1]]
    assert js.call("fetchOffsets", group=group, topic=src) == [[0, 10]]
    assert committed_offset(bs, group, src) == 10
    assert values(read_all(bs, [(dst, 0)], "read_committed")) == [
        f"IN-{i}".encode() for i in range(10)
    ]


def test_a_new_instance_fences_the_zombie(bs: str, js: Driver) -> None:
    t = create(bs, topic_name("kjs-zombie"), 2)
    src = create(bs, topic_name("kjs-zsrc"), 1)
    group = topic_name("kjs-zgroup")
    tid = topic_name("kjs-tid")
    js.call("producer", name="zombie", tid=tid)
    js.call("begin", name="zombie")
    js.call("send", name="zombie", topic=t, messages=msgs(("zombie", 0)))
    js.call("producer", name="fresh", tid=tid)
    js.call("begin", name="fresh")  # InitProducerId: fences the zombie, aborts its transaction
    js.call("send", name="fresh", topic=t, messages=msgs(("fresh", 1)))
    js.call("commit", name="fresh")
    offsets = [{"topic": src, "partitions": [{"partition": 0, "offset": "5"}]}]
    # Produce to a partition already in the transaction, AddPartitionsToTxn, AddOffsetsToTxn,
    # EndTxn: every one is refused with the fenced epoch.
    assert js.fails("send", name="zombie", topic=t, messages=msgs(("z2", 0))) == (
        "INVALID_PRODUCER_EPOCH"
    )
    assert js.fails("send", name="zombie", topic=src, messages=msgs(("z3", 0))) == (
        "INVALID_PRODUCER_EPOCH"
    )
    assert js.fails("sendOffsets", name="zombie", group=group, topics=offsets) == (
        "INVALID_PRODUCER_EPOCH"
    )
    assert js.fails("commit", name="zombie") == "INVALID_PRODUCER_EPOCH"
    assert values(read_all(bs, [(t, 0), (t, 1), (src, 0)], "read_committed")) == [b"fresh"]
    assert js.call("fetchOffsets", group=group, topic=src) == [[0, -1]]


@pytest.mark.skipif(bool(EXTERNAL), reason="needs a short timed-out-transaction scan interval")
def test_a_stalled_producers_transaction_is_aborted_by_the_timeout(bs: str, js: Driver) -> None:
    t = create(bs, topic_name("kjs-timeout"), 1)
    js.call("producer", name="p", tid=topic_name("kjs-tid"), timeoutMs=2000)
    js.call("begin", name="p")
    js.call("send", name="p", topic=t, messages=msgs(("lost", 0)))  # offset 0, then silence
    plain = plain_producer(bs)
    plain.produce(t, b"after", partition=0)  # offset 1
    plain.flush(10)
    assert values(read_all(bs, [(t, 0)], "read_committed")) == []
    # The coordinator aborts the transaction (marker at 2): the LSO moves past everything.
    wait_for(lambda: lso(bs, t) == 3, 15, "the timed-out transaction to be aborted")
    assert values(read_all(bs, [(t, 0)], "read_committed")) == [b"after"]
    assert [r[3] for r in js_read(js, [t], 1)] == ["after"]
    # The abort bumped the epoch: the stalled producer is fenced.
    assert js.fails("send", name="p", topic=t, messages=msgs(("late", 0))) == (
        "INVALID_PRODUCER_EPOCH"
    )
    assert js.fails("commit", name="p") == "INVALID_PRODUCER_EPOCH"
    assert values(read_all(bs, [(t, 0)], "read_committed")) == [b"after"]


def test_200_back_to_back_transactions(bs: str, js: Driver) -> None:
    t = create(bs, topic_name("kjs-many"), 1)
    js.call("producer", name="p", tid=topic_name("kjs-tid"))
    assert js.call("many", name="p", topic=t, partition=0, count=200, prefix="m") == 200
    want = [f"m{i}" for i in range(200)]
    assert values(read_all(bs, [(t, 0)], "read_committed")) == [v.encode() for v in want]
    got = js_read(js, [t], 200)
    assert [r[3] for r in got] == want
    assert [r[2] for r in got] == list(range(0, 400, 2))  # each record, then its marker
