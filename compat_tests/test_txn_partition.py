"""confluent-kafka consumers at read_committed and read_uncommitted against partitions whose
transactional batches and markers were written through the raw protocol and
``Broker.write_txn_marker`` (the transaction coordinator is wired in at the merge; the full
client-transaction tests come then).

The broker runs in-process, in a thread of its own (trio), with a stand-in verifier, so the test
can write markers between the consumer's polls.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer, TopicPartition

from storage.api import TopicPartition as TP
from tests.proxy.harness import connect, running_broker
from tests.proxy.test_broker_requests import create
from tests.proxy.test_transactions import install, plain, produce, tbatch

P1, P2, P3 = 1000, 2000, 3000
TIMEOUT_S = 20.0


class BrokerThread:
    """An in-process broker in a thread; ``call`` runs an async function on its trio loop. A
    broker that fails to start fails ``__enter__`` with its own error at once; one that does not
    stop in time fails ``__exit__`` (no broker thread is left behind unnoticed)."""

    def __init__(self) -> None:
        self.ready: queue.Queue[tuple[int, Any, trio.lowlevel.TrioToken] | BaseException] = (
            queue.Queue()
        )
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # reported to __enter__ (or lost after a clean start)
            self.ready.put(exc)

    async def _main(self) -> None:
        async with running_broker() as (server, port):
            self.ready.put((port, server.broker, trio.lowlevel.current_trio_token()))
            await trio.to_thread.run_sync(self.stop.wait)

    def __enter__(self) -> BrokerThread:
        self.thread.start()
        try:
            started = self.ready.get(timeout=TIMEOUT_S)
        except queue.Empty:
            self.stop.set()  # a start that ends late stops at once
            raise RuntimeError(
                f"the in-process broker did not start within {TIMEOUT_S} s"
            ) from None
        if isinstance(started, BaseException):
            raise RuntimeError("the in-process broker failed to start") from started
        self.port, self.broker, self.token = started
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(TIMEOUT_S)
        if self.thread.is_alive():
            raise RuntimeError(f"the in-process broker did not stop within {TIMEOUT_S} s")
        failed = None if self.ready.empty() else self.ready.get()
        if isinstance(failed, BaseException):
            raise RuntimeError("the in-process broker failed while stopping") from failed

    def call(self, fn: Callable[[], Any]) -> Any:
        return trio.from_thread.run(fn, trio_token=self.token)


def test_a_broker_slow_to_start_fails_the_test_and_is_not_left_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = threading.Event()

    @asynccontextmanager
    async def slow() -> AsyncIterator[tuple[Any, int]]:
        await trio.to_thread.run_sync(gate.wait)
        yield SimpleNamespace(broker=None), 0

    monkeypatch.setattr(sys.modules[__name__], "running_broker", slow)
    monkeypatch.setattr(sys.modules[__name__], "TIMEOUT_S", 0.1)
    b = BrokerThread()
    with pytest.raises(RuntimeError, match="did not start within"):
        b.__enter__()
    gate.set()  # the start completes late: the broker stops at once
    b.thread.join(10)
    assert not b.thread.is_alive()


@pytest.fixture
def inproc() -> Iterator[BrokerThread]:
    with BrokerThread() as b:
        yield b


def consumer(port: int, isolation: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "group.id": "compat-unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "isolation.level": isolation,
        }
    )


def take(c: Consumer, count: int) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(out) < count and time.monotonic() < deadline:
        for msg in c.consume(count - len(out), timeout=0.2):
            assert msg.error() is None, msg.error()
            out.append((msg.offset(), msg.value()))
    assert len(out) == count, out
    return out


def test_read_committed_and_uncommitted_consumers(inproc: BrokerThread) -> None:
    b = inproc.broker

    async def setup() -> None:
        v = install(b)
        for pid in (P1, P2, P3):
            v.add(pid, 0, TP("t", 0))
        async with connect(inproc.port) as c:
            assert await create(c, "t") == 0
            assert (await produce(c, "t", plain(), txn=None)).base_offset == 0  # "plain"
            assert (await produce(c, "t", tbatch(P1, 0, 2))).base_offset == 1
            assert (await produce(c, "t", tbatch(P2, 0))).base_offset == 3
            assert await b.write_txn_marker(TP("t", 0), P1, 0, False, 0) == 0  # abort at 4
            assert (await produce(c, "t", plain(), txn=None)).base_offset == 5
            assert await b.write_txn_marker(TP("t", 0), P2, 0, True, 0) == 0  # commit at 6
            assert (await produce(c, "t", tbatch(P3, 0))).base_offset == 7  # left open
            assert (await produce(c, "t", plain(), txn=None)).base_offset == 8

    inproc.call(setup)
    rc = consumer(inproc.port, "read_committed")
    ru = consumer(inproc.port, "read_uncommitted")
    try:
        rc.assign([TopicPartition("t", 0, 0)])
        ru.assign([TopicPartition("t", 0, 0)])
        assert take(rc, 3) == [(0, b"plain"), (3, b"2000-0"), (5, b"plain")]
        assert take(ru, 6) == [
            (0, b"plain"),
            (1, b"1000-0"),
            (2, b"1000-1"),
            (3, b"2000-0"),
            (5, b"plain"),
            (7, b"3000-0"),
        ]
        assert take(ru, 1) == [(8, b"plain")]
        # read_committed stops at the LSO (7) until P3's marker lands; librdkafka reports
        # the LSO as the end of the partition
        lo, hi = rc.get_watermark_offsets(TopicPartition("t", 0), timeout=TIMEOUT_S, cached=False)
        assert (lo, hi) == (0, 7)
        assert rc.poll(1.0) is None

        async def commit_p3() -> None:
            assert await b.write_txn_marker(TP("t", 0), P3, 0, True, 0) == 0

        inproc.call(commit_p3)
        assert take(rc, 2) == [(7, b"3000-0"), (8, b"plain")]
    finally:
        rc.close()
        ru.close()


def test_aborted_transaction_at_the_end_is_skipped(inproc: BrokerThread) -> None:
    """An aborted transaction followed only by its marker: the read_committed consumer
    delivers nothing of it and moves past the marker."""
    b = inproc.broker

    async def setup() -> None:
        v = install(b)
        v.add(P1, 0, TP("a", 0))
        async with connect(inproc.port) as c:
            assert await create(c, "a") == 0
            assert (await produce(c, "a", tbatch(P1, 0, 3))).base_offset == 0
            assert await b.write_txn_marker(TP("a", 0), P1, 0, False, 0) == 0  # at 3
            assert (await produce(c, "a", plain(), txn=None)).base_offset == 4

    inproc.call(setup)
    rc = consumer(inproc.port, "read_committed")
    try:
        rc.assign([TopicPartition("a", 0, 0)])
        assert take(rc, 1) == [(4, b"plain")]
    finally:
        rc.close()
