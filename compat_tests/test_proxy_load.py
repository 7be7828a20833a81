"""``kafkad proxy`` under load and faults (issue 22, items 6-7): 1,000 client connections held
through the proxy at once, each answered in order twice; and the randomized exactly-once
workload (``compat_tests/workload/``, short profile) with every client bootstrapping at a proxy
that injects the workload's faults (retriable errors, delays, drops, drop-after-forwarding),
in front of a kafkad upstream without faults: the history checker must find nothing.

Each client connection costs the proxy two descriptors; the proxy raises its own soft limit
to the hard one, the test raises its own (as ``test_load.py``) before anything starts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from compat_tests._support import EXTERNAL, wait_for
from compat_tests.conftest import _LIVE, BrokerProcess, _spawn
from compat_tests.test_load import CONNECTIONS, converse, raise_nofile
from compat_tests.test_proxy import ProxyProcess
from compat_tests.workload.profiles import FAULT_SPEC, PROFILES
from compat_tests.workload.runner import Run, proc_usage

SEED = int(os.environ.get("KAFKAD_WORKLOAD_SEED", "1"))
DURATION_S = float(os.environ.get("KAFKAD_WORKLOAD_SECONDS", "30"))

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="runs its own upstream and proxy")


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    limit = raise_nofile()
    if limit < 2 * CONNECTIONS + 200:
        pytest.skip(f"open files limited to {limit}")
    settings = {
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
        "group.initial.rebalance.delay.ms": "0",
    }
    b = _spawn(tmp_path_factory.mktemp("proxy-load"), "upstream", settings)
    yield b
    code = b.stop()
    _LIVE.remove(b)
    assert code == 0, f"upstream exit code {code}\n{b.log_tail()}"


@pytest.mark.timeout(240)
async def test_thousand_connections_through_the_proxy(
    upstream: BrokerProcess, tmp_path: Path
) -> None:
    proxy = ProxyProcess(upstream.bootstrap, tmp_path, "", "--log-level", "WARNING")
    streams: list[trio.SocketStream] = []
    host, port = proxy.bootstrap.rsplit(":", 1)
    try:
        _, fds_before = proc_usage(proxy.proc.pid)
        with trio.fail_after(180):
            try:
                async with trio.open_nursery() as nursery:
                    limit = trio.CapacityLimiter(200)  # connects in flight, not held

                    async def open_one() -> None:
                        async with limit:
                            streams.append(await trio.open_tcp_stream(host, int(port)))

                    for _ in range(CONNECTIONS):
                        nursery.start_soon(open_one)
                assert len(streams) == CONNECTIONS
                async with trio.open_nursery() as nursery:
                    for i, s in enumerate(streams):
                        nursery.start_soon(converse, s, 2 * i)
                _, fds_held = proc_usage(proxy.proc.pid)
                # a client's socket and its upstream's, for each connection
                assert fds_held >= fds_before + 2 * CONNECTIONS, (fds_before, fds_held)
                async with trio.open_nursery() as nursery:  # all still work, in order
                    for i, s in enumerate(streams):
                        nursery.start_soon(converse, s, 10_000 + 2 * i)
            finally:
                for s in streams:
                    await trio.aclose_forcefully(s)
            fresh = await trio.open_tcp_stream(host, int(port))
            async with fresh:
                await converse(fresh, 7)
        # the proxy lets go of both descriptors of every closed connection
        wait_for(
            lambda: proc_usage(proxy.proc.pid)[1] <= fds_before + 20, 60, "fds back near the start"
        )
    finally:
        assert proxy.stop() == 0, proxy.log_path.read_text()[-5000:]
    assert "Traceback" not in proxy.log_path.read_text()


@pytest.mark.timeout(int(DURATION_S) + 240)
def test_workload_through_the_proxy_with_faults_is_clean(
    upstream: BrokerProcess, tmp_path: Path
) -> None:
    faults = f"seed={SEED}; {FAULT_SPEC}"
    proxy = ProxyProcess(upstream.bootstrap, tmp_path, faults, "--log-level", "INFO")
    try:
        run = Run(SEED, PROFILES["short"], tmp_path, proxy.bootstrap, duration_s=DURATION_S)
        report = run.run()
    finally:
        assert proxy.stop() == 0, proxy.log_path.read_text()[-5000:]
    print(report.summary())
    assert report.clean, f"seed {SEED}, history {run.history.path}\n{report.summary()}"
    assert report.counts["txns.committed"] > 20, report.summary()
    assert report.counts["copies_visible"] > 0, report.summary()
    log = proxy.log_path.read_text()
    assert "Traceback" not in log
    injected = log.count(": fault injection: corr=")
    print(f"faults injected by the proxy: {injected}")
    assert injected > 20, "the proxy injected (almost) no faults"
