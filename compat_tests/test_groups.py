"""Consumer groups with every stock client: members split a 6-partition topic, a third member
joins (no record lost or delivered twice across the handover, offsets committed per record), a
killed member's partitions move within the session timeout, committed offsets survive a broker
restart, and a static member rejoins without a rebalance.

Each member is a subprocess (compat_tests/group_consumer.py, kafkajs/group_consumer.js, or
kcat -G) that prints one line per record after committing it. The broker runs with
group.initial.rebalance.delay.ms=0, as the clients' own test suites do. The time from a new
member's start to its first record is printed (``-s`` shows it) for the closing note.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupState, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests._support import EXTERNAL, topic_name, wait_for
from compat_tests.conftest import _LIVE, REPO, BrokerProcess, _spawn, module_broker

CLIENTS = ["confluent", "kafka-python", "aiokafka", "kcat", "kafkajs"]
STATIC = ["confluent", "kafka-python", "aiokafka", "kcat"]  # kafkajs has no static membership
SETTINGS = {"group.initial.rebalance.delay.ms": "0"}
PARTS = 6
pytestmark = pytest.mark.timeout(120)


class Member:
    def __init__(self, client: str, bootstrap: str, topic: str, group: str, instance: str | None):
        if client == "kcat":
            args = ["kcat", "-b", bootstrap, "-G", group, topic, "-q", "-u"]
            args += ["-X", "auto.offset.reset=earliest"]  # -o would override committed offsets
            args += ["-f", '{"ev":"rec","p":%p,"o":%o,"v":"%s"}\\n']
            args += ["-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500"]
            args += ["-X", "auto.commit.interval.ms=100"]
            if instance:
                args += ["-X", f"group.instance.id={instance}"]
        elif client == "kafkajs":
            node = shutil.which("node") or "node"
            js = Path(__file__).parent / "kafkajs" / "group_consumer.js"
            args = [node, str(js), bootstrap, topic, group]
        else:
            args = [sys.executable, "-m", "compat_tests.group_consumer", client, bootstrap, topic]
            args += [group] + ([instance] if instance else [])
        self.started = time.monotonic()
        self.records: list[tuple[int, int, str, float]] = []
        self.start_at: float | None = self.started if client == "kcat" else None
        self.proc = subprocess.Popen(
            args,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.stderr_tail: deque[str] = deque(maxlen=40)
        self.ended_by_test = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_tail.append(line)

    def died_on_its_own(self) -> str | None:
        """The exit code and last stderr lines of a member that ended without being told to."""
        rc = self.proc.poll()
        if rc is None or self.ended_by_test:
            return None
        return f"member exited with {rc}:\n" + "".join(self.stderr_tail)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("ev") == "start":
                self.start_at = time.monotonic()
            elif ev.get("ev") == "rec":
                self.records.append((ev["p"], ev["o"], ev["v"], time.monotonic()))

    def values(self) -> list[str]:
        return [r[2] for r in self.records]

    def partitions_since(self, n: int) -> set[int]:
        return {r[0] for r in self.records[n:]}

    def first_record_after_start(self) -> float:
        assert self.records and self.start_at is not None
        return self.records[0][3] - self.start_at

    def stop(self) -> None:
        self.ended_by_test = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._close()

    def kill9(self) -> None:
        self.ended_by_test = True
        self.proc.kill()
        self.proc.wait()
        self._close()

    def _close(self) -> None:
        self.reader.join(5)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def live_members() -> Iterator[list[Member]]:
    """A ``members`` fixture's body: the test's members, each killed at the end; a member
    that died on its own fails the test."""
    live: list[Member] = []
    yield live
    died = [d for m in live if (d := m.died_on_its_own())]
    for m in live:
        m.kill9()
    assert not died, "a group member died on its own:\n" + "\n".join(died)


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    why = "needs group.initial.rebalance.delay.ms=0 on a kafkad subprocess"
    yield from module_broker(tmp_path_factory, "groups", SETTINGS, why)


@pytest.fixture
def members() -> Iterator[list[Member]]:
    yield from live_members()


def setup_topic(bs: str) -> str:
    name = topic_name("grp")
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, PARTS, 1)])[name].result(10)
    return name


def produce(bs: str, topic: str, tag: str, n: int = 60) -> list[str]:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    values = [f"{tag}{i}" for i in range(n)]
    for i, v in enumerate(values):
        p.produce(topic, v.encode(), partition=i % PARTS)
    assert p.flush(10) == 0
    return values


def stable_members(bs: str, group: str) -> int | None:
    admin = AdminClient({"bootstrap.servers": bs})
    (desc,) = admin.describe_consumer_groups([group]).values()
    d = desc.result(10)
    return len(d.members) if d.state == ConsumerGroupState.STABLE else None


def wait_members(bs: str, group: str, n: int, timeout: float = 30) -> None:
    wait_for(lambda: stable_members(bs, group) == n, timeout, f"{n} stable members")


def all_values(ms: list[Member]) -> Counter[str]:
    return Counter(v for m in ms for v in m.values())


def wait_consumed(ms: list[Member], values: list[str], timeout: float = 30) -> None:
    wait_for(lambda: set(values) <= set(all_values(ms)), timeout, f"{len(values)} records")


def report(client: str, what: str, seconds: float) -> None:
    print(f"\n[rebalance] {client}: {what}: {seconds * 1000:.0f} ms", file=sys.stderr)


@pytest.mark.parametrize("client", CLIENTS)
def test_split_then_third_member_joins(client: str, gbroker: BrokerProcess, members) -> None:
    bs, group = gbroker.bootstrap, topic_name("g")
    topic = setup_topic(bs)
    a = produce(bs, topic, "a")
    members += [Member(client, bs, topic, group, None), Member(client, bs, topic, group, None)]
    wait_consumed(members, a)
    wait_members(bs, group, 2)
    marks = [len(m.records) for m in members]
    b = produce(bs, topic, "b")
    wait_consumed(members, b)
    split = [m.partitions_since(k) for m, k in zip(members, marks, strict=True)]
    assert len(split[0]) == len(split[1]) == 3 and not split[0] & split[1], split
    # a third member joins while records keep arriving
    third = Member(client, bs, topic, group, None)
    members.append(third)
    stop = threading.Event()
    c: list[str] = []

    def trickle() -> None:
        i = 0
        while not stop.is_set() and i < 400:
            c.extend(produce(bs, topic, f"c{i}-", PARTS))
            i += 1
            time.sleep(0.05)

    t = threading.Thread(target=trickle)
    t.start()
    try:
        wait_for(lambda: bool(third.records), 40, "the third member's first record")
    finally:
        stop.set()
        t.join()
    report(client, "new member start -> first record", third.first_record_after_start())
    wait_members(bs, group, 3)
    marks = [len(m.records) for m in members]
    d = produce(bs, topic, "d")
    wait_consumed(members, a + b + c + d)
    split = [m.partitions_since(k) for m, k in zip(members, marks, strict=True)]
    assert sorted(len(s) for s in split) == [2, 2, 2] and len(set().union(*split)) == PARTS
    counts = all_values(members)
    dups = {v: n for v, n in counts.items() if n > 1}
    assert not dups, f"delivered twice: {sorted(dups)[:10]}"


@pytest.mark.parametrize("client", CLIENTS)
def test_killed_member_partitions_move(client: str, gbroker: BrokerProcess, members) -> None:
    bs, group = gbroker.bootstrap, topic_name("g")
    topic = setup_topic(bs)
    members += [Member(client, bs, topic, group, None), Member(client, bs, topic, group, None)]
    wait_members(bs, group, 2)
    members[1].kill9()
    killed_at = time.monotonic()
    mark = len(members[0].records)
    b = produce(bs, topic, "b")
    wait_consumed(members[:1], b, timeout=40)
    moved = time.monotonic() - killed_at
    assert members[0].partitions_since(mark) == set(range(PARTS))
    assert moved < 6 + 10 * 0.5 + 5  # session timeout, plus the clients' own rejoin backoff
    report(client, "kill -9 -> partitions consumed by the survivor", moved)


@pytest.mark.parametrize("client", CLIENTS)
def test_committed_offsets_survive_restart(client: str, tmp_path: Path, members) -> None:
    if EXTERNAL:
        pytest.skip("restarts the broker")
    broker = _spawn(tmp_path, "restart", SETTINGS)
    try:
        bs, group = broker.bootstrap, topic_name("g")
        topic = setup_topic(bs)
        a = produce(bs, topic, "a")
        first = Member(client, bs, topic, group, None)
        members.append(first)
        wait_consumed([first], a)
        time.sleep(0.5 if client == "kcat" else 0)  # kcat commits on a 100 ms timer
        first.stop()
        broker.restart()
        bs = broker.bootstrap
        b = produce(bs, topic, "b")
        second = Member(client, bs, topic, group, None)
        members.append(second)
        wait_consumed([second], b)
        assert not set(second.values()) & set(a), "resumed before the committed offsets"
    finally:
        for m in members:  # before their broker goes: some clients exit when it is gone
            m.stop()
        broker.stop()
        _LIVE.remove(broker)


@pytest.mark.parametrize("client", STATIC)
def test_static_member_rejoins_without_rebalance(client: str, gbroker: BrokerProcess, members):
    bs, group = gbroker.bootstrap, topic_name("g")
    topic = setup_topic(bs)
    members += [Member(client, bs, topic, group, "s1"), Member(client, bs, topic, group, "s2")]
    wait_members(bs, group, 2)
    a = produce(bs, topic, "a")
    wait_consumed(members, a)
    before = [m.partitions_since(0) for m in members]
    assert len(before[0]) == len(before[1]) == 3
    members[0].kill9()  # no LeaveGroup; back well inside the 6 s session timeout
    again = Member(client, bs, topic, group, "s1")
    members.append(again)
    mark = len(members[1].records)
    b = produce(bs, topic, "b")
    wait_consumed([members[1], again], b)
    report(client, "static member restart -> first record", again.first_record_after_start())
    assert again.partitions_since(0) == before[0]
    assert members[1].partitions_since(mark) == before[1]  # no rebalance moved anything
