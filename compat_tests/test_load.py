"""Load: 1,000 concurrent connections, 100 concurrent transactional producers, and a soak with
the broker's memory and open files sampled (issue 7, item 4).

* 1,000 raw sockets are opened and held at once; each sends ApiVersions v0 and Metadata v1
  (all topics) and checks its answers; the broker must still answer a fresh client after, and
  hand back its file descriptors once they close.
* 100 confluent-kafka transactional producers (one thread each) run their transactions at the
  same time; every committed value is read back once at read_committed.
* The soak runs the workload's ``soak`` profile (no broker faults; producers and copiers killed
  and replaced, readers joining and leaving) while ``/proc/<pid>/status`` VmRSS and
  ``/proc/<pid>/fd`` are sampled each second: the late window must not outgrow the early one
  beyond a tolerance, and the checker must be clean. ``KAFKAD_SOAK_SECONDS`` (default 60;
  the long run is 600, see README).

The soft limit of open files is raised (to the hard limit, at most 8192) before the broker
starts, so the broker, which inherits it, can hold the connections.
"""

from __future__ import annotations

import os
import resource
import statistics
import struct
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from confluent_kafka import Producer

from compat_tests._support import EXTERNAL, topic_name, wait_for
from compat_tests.conftest import _LIVE, BrokerProcess, _spawn
from compat_tests.txn_support import create, read_all
from compat_tests.workload.profiles import PROFILES
from compat_tests.workload.runner import Run, proc_usage

CONNECTIONS = 1000
PRODUCERS = 100
SOAK_S = float(os.environ.get("KAFKAD_SOAK_SECONDS", "60"))
WANT_NOFILE = 8192

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="samples its own broker's /proc")


def raise_nofile() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = WANT_NOFILE if hard == resource.RLIM_INFINITY else min(WANT_NOFILE, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


@pytest.fixture(scope="module")
def load_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    limit = raise_nofile()
    if limit < CONNECTIONS + 200:
        pytest.skip(f"open files limited to {limit}")
    b = _spawn(tmp_path_factory.mktemp("load"), "load", {"group.initial.rebalance.delay.ms": "0"})
    yield b
    code = b.stop()
    _LIVE.remove(b)
    assert code == 0, f"broker exit code {code}\n{b.log_tail()}"


def request(api_key: int, version: int, corr: int, body: bytes) -> bytes:
    client = b"load"
    head = struct.pack(">hhih", api_key, version, corr, len(client)) + client
    return struct.pack(">i", len(head) + len(body)) + head + body


async def read_frame(stream: trio.SocketStream) -> bytes:
    buf = b""
    while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
        chunk = await stream.receive_some(65536)
        assert chunk, "broker closed the connection"
        buf += chunk
    return buf[4:]


async def converse(stream: trio.SocketStream, i: int) -> None:
    await stream.send_all(request(18, 0, i, b""))  # ApiVersions v0
    frame = await read_frame(stream)
    corr, error = struct.unpack(">ih", frame[:6])
    assert (corr, error) == (i, 0)
    await stream.send_all(request(3, 1, i + 1, struct.pack(">i", -1)))  # Metadata v1, all
    frame = await read_frame(stream)
    corr, brokers = struct.unpack(">ii", frame[:8])
    assert corr == i + 1 and brokers == 1


@pytest.mark.timeout(180)
async def test_thousand_concurrent_connections(load_broker: BrokerProcess) -> None:
    pid = load_broker.pid
    _, fds_before = proc_usage(pid)
    streams: list[trio.SocketStream] = []
    with trio.fail_after(120):
        try:
            async with trio.open_nursery() as nursery:
                limit = trio.CapacityLimiter(200)  # connects in flight, not connections held

                async def open_one() -> None:
                    async with limit:
                        streams.append(await trio.open_tcp_stream("127.0.0.1", load_broker.port))

                for _ in range(CONNECTIONS):
                    nursery.start_soon(open_one)
            assert len(streams) == CONNECTIONS
            async with trio.open_nursery() as nursery:
                for i, s in enumerate(streams):
                    nursery.start_soon(converse, s, 2 * i)
            _, fds_held = proc_usage(pid)
            assert fds_held >= fds_before + CONNECTIONS, (fds_before, fds_held)
            # every connection still works, in order: a second round on each
            async with trio.open_nursery() as nursery:
                for i, s in enumerate(streams):
                    nursery.start_soon(converse, s, 10_000 + 2 * i)
        finally:
            for s in streams:
                await s.aclose()
        fresh = await trio.open_tcp_stream("127.0.0.1", load_broker.port)
        async with fresh:
            await converse(fresh, 7)
    # the broker lets go of the closed connections' descriptors
    wait_for(lambda: proc_usage(pid)[1] <= fds_before + 20, 30, "fds back near the baseline")


@pytest.mark.timeout(240)
def test_hundred_concurrent_transactional_producers(load_broker: BrokerProcess) -> None:
    bs = load_broker.bootstrap
    topic = create(bs, topic_name("load-txn"), 8)
    txns, per_txn = 2, 5
    errors: list[str] = []
    start = threading.Barrier(PRODUCERS)
    run = uuid.uuid4().hex[:6]

    def one(k: int) -> None:
        try:
            p = Producer(
                {
                    "bootstrap.servers": bs,
                    "transactional.id": f"load-{run}-{k}",
                    "linger.ms": 5,
                    "transaction.timeout.ms": 60_000,
                }
            )
            start.wait(120)
            p.init_transactions(120)
            for n in range(txns):
                p.begin_transaction()
                for i in range(per_txn):
                    p.produce(topic, f"{k}.{n}.{i}".encode(), partition=(k + i) % 8)
                p.commit_transaction(120)
        except Exception as exc:
            errors.append(f"producer {k}: {exc!r}")

    threads = [threading.Thread(target=one, args=(k,)) for k in range(PRODUCERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(200)
    assert not any(t.is_alive() for t in threads), "producers still running"
    assert errors == []
    got = [v.decode() for _, _, v in read_all(bs, [(topic, p) for p in range(8)], "read_committed")]
    want = {f"{k}.{n}.{i}" for k in range(PRODUCERS) for n in range(txns) for i in range(per_txn)}
    assert len(got) == len(want) and set(got) == want


# Growth allowed from the early window (20-40% of the run) to the late one (last 20%).
RSS_GROWTH = 1.25  # x the early median ...
RSS_SLACK_KB = 40_000  # ... plus this
FD_SLACK = 30


@pytest.mark.timeout(int(SOAK_S) + 240)
def test_soak_bounded_memory_and_fds(tmp_path: Path) -> None:
    raise_nofile()
    run = Run(5, PROFILES["soak"], tmp_path, duration_s=SOAK_S)
    try:
        report = run.run()
    finally:
        run.stop_broker()
    print(report.summary())
    assert report.clean, f"history {run.history.path}\n{report.summary()}"
    assert report.counts["txns.committed"] > 50, report.summary()
    samples = run.samples
    assert len({pid for _, pid, _, _ in samples}) == 1, "the broker restarted during the soak"
    n = len(samples)
    assert n >= 10, f"only {n} samples"
    early = samples[n // 5 : 2 * n // 5 + 1]
    late = samples[4 * n // 5 :]
    rss_early = statistics.median(s[2] for s in early)
    rss_late = statistics.median(s[2] for s in late)
    fds_early = max(s[3] for s in early)
    fds_late = statistics.median(s[3] for s in late)
    print(f"soak: rss {rss_early} -> {rss_late} kB, fds {fds_early} -> {fds_late}, {n} samples")
    assert rss_late <= rss_early * RSS_GROWTH + RSS_SLACK_KB, (rss_early, rss_late)
    assert fds_late <= fds_early + FD_SLACK, (fds_early, fds_late)
