"""Fixtures for the compat tests: a real kafkad subprocess on 127.0.0.1 and a free port.

Set KAFKAD_BOOTSTRAP=host:port to run the same tests against another broker (for example
Apache Kafka); tests that kill or restart the broker are then skipped.
"""

from __future__ import annotations

import atexit
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests._support import EXTERNAL

REPO = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
READY = re.compile(
    r"^kafkad ready listen=(?P<listen>\S+):(?P<port>\d+) advertise=(?P<advertise>\S+)"
    r"(?: listeners=(?P<listeners>\S+))? data_dir=(?P<data_dir>.+)$"
)
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
DEFAULT_TEST_TIMEOUT_S = 60
LOG_TAIL_BYTES = 20_000


class BrokerStartError(RuntimeError):
    pass


class BrokerProcess:
    """One kafkad subprocess. stdout is read for the ready line; stderr goes to a log file."""

    def __init__(self, data_dir: Path, log_path: Path, settings: dict[str, str] | None = None):
        self.data_dir = data_dir
        self.log_path = log_path
        self.settings = dict(settings or {})
        self.port = 0
        self.advertise = ""
        self.listeners = ""
        self._proc: subprocess.Popen[str] | None = None
        self._log_file = None

    @property
    def bootstrap(self) -> str:
        return self.advertise

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def exited(self) -> bool:
        """Whether the process has ended on its own (a crash, an injected crash point)."""
        return self._proc is not None and self._proc.poll() is not None

    def start(self, port: int = 0) -> None:
        assert self._proc is None, "already running"
        args = [sys.executable, "-m", "proxy.cli", "serve", "--data-dir", str(self.data_dir)]
        if "listeners" not in self.settings:  # else the settings name the listeners (e.g. SSL)
            args += ["--listen", f"127.0.0.1:{port}"]
        if level := os.environ.get("KAFKAD_TEST_LOG_LEVEL"):  # e.g. DEBUG, to chase a flake
            args += ["--log-level", level]
        for name, value in self.settings.items():
            args += ["--set", f"{name}={value}"]
        self._log_file = open(self.log_path, "a", encoding="utf-8")  # noqa: SIM115
        self._log_file.write(f"===== start {' '.join(args)}\n")
        self._log_file.flush()
        self._proc = subprocess.Popen(
            args,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_drain, args=(self._proc.stdout, lines), daemon=True).start()
        try:
            line = lines.get(timeout=START_TIMEOUT_S)
        except queue.Empty:
            self.kill9()
            msg = f"no ready line in {START_TIMEOUT_S}s\n{self.log_tail()}"
            raise BrokerStartError(msg) from None
        match = READY.match(line or "")
        if match is None:
            code = self._proc.poll()
            self.kill9()
            raise BrokerStartError(f"exit={code} stdout={line!r}\n{self.log_tail()}")
        self.port = int(match["port"])
        self.advertise = match["advertise"]
        self.listeners = match["listeners"] or ""  # NAME://bound->advertised,... when several
        assert match["data_dir"] == str(self.data_dir), line

    def stop(self) -> int | None:
        """SIGTERM and wait; SIGKILL if it does not stop in time. Returns the exit code."""
        if self._proc is None:
            return None
        proc, self._proc = self._proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._close_log()
        return proc.returncode

    def kill9(self) -> None:
        if self._proc is None:
            return
        proc, self._proc = self._proc, None
        proc.kill()
        proc.wait()
        self._close_log()

    def restart(self) -> None:
        """Start again on the same data dir, on the same port if it is still free."""
        old = self.port
        self.stop()
        try:
            self.start(port=old)
        except BrokerStartError:
            self.start(port=0)

    def log_tail(self, since: int = 0) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(since, f.seek(0, os.SEEK_END) - LOG_TAIL_BYTES))
                return f.read().decode("utf-8", "replace")
        except OSError as exc:
            return f"(no log: {exc})"

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None


def _drain(stream, lines: queue.Queue[str | None]) -> None:
    # Keep reading so the broker never blocks on a full stdout pipe.
    with stream:
        for line in stream:
            lines.put(line.rstrip("\n"))
    lines.put(None)


_LIVE: list[BrokerProcess] = []


@atexit.register
def _kill_leftovers() -> None:  # if pytest dies before teardown
    for b in _LIVE:
        b.kill9()


def _spawn(tmp: Path, name: str, settings: dict[str, str] | None = None) -> BrokerProcess:
    data = tmp / "data"
    data.mkdir(parents=True, exist_ok=True)
    broker = BrokerProcess(data, tmp / f"{name}.stderr.log", settings)
    _LIVE.append(broker)
    broker.start()
    return broker


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess | None]:
    """The shared broker for the session, or None when KAFKAD_BOOTSTRAP names one."""
    if EXTERNAL:
        yield None
        return
    b = _spawn(tmp_path_factory.mktemp("kafkad"), "session")
    yield b
    code = b.stop()
    _LIVE.remove(b)
    assert code == 0, f"broker exit code {code} on SIGTERM\n{b.log_tail()}"


@pytest.fixture(scope="session")
def bootstrap(broker: BrokerProcess | None) -> str:
    return EXTERNAL or (broker.bootstrap if broker else "")


def module_broker(
    factory: pytest.TempPathFactory, name: str, settings: dict[str, str], why: str
) -> Iterator[BrokerProcess]:
    """A module-scoped fixture's body: a kafkad subprocess with ``settings``, stopped at the
    end; skipped (``why``) against KAFKAD_BOOTSTRAP."""
    if EXTERNAL:
        pytest.skip(why)
    b = _spawn(factory.mktemp(f"kafkad-{name}"), name, settings)
    yield b
    b.stop()
    _LIVE.remove(b)


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker this test alone may kill and restart."""
    if EXTERNAL:
        pytest.skip("kills the broker: not against KAFKAD_BOOTSTRAP")
    b = _spawn(tmp_path, "own")
    yield b
    code = b.stop()
    _LIVE.remove(b)
    assert code in (None, 0), f"broker exit code {code} on SIGTERM\n{b.log_tail()}"


# Third-party clients' own deprecations, not ours (warnings are errors in this repo).
CLIENT_WARNINGS = [
    "ignore:(read|open)_text is deprecated:DeprecationWarning",  # kafka-python 3.0 schemas
]


def pytest_configure(config: pytest.Config) -> None:
    for line in CLIENT_WARNINGS:
        config.addinivalue_line("filterwarnings", line)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.compat)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(DEFAULT_TEST_TIMEOUT_S))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    report = yield
    if call.when == "setup":
        item.stash[_LOG_MARKS] = {id(b): b.log_size() for b in _LIVE}
    if report.failed and HERE in item.path.parents:
        marks = item.stash.get(_LOG_MARKS, {})
        for b in _LIVE:
            report.sections.append(
                (f"kafkad stderr ({b.log_path.name})", b.log_tail(marks.get(id(b), 0)))
            )
    return report


_LOG_MARKS = pytest.StashKey[dict[int, int]]()
