"""A throwaway kafkad broker for tests, from any framework.

    with kafkad.testing.broker(**{"num.partitions": 3}) as b:
        producer = Producer({"bootstrap.servers": b.bootstrap_servers})
        topic = b.create_topic(partitions=2)

Theory of operation: the broker is a **subprocess** (``python -m proxy.cli serve`` with this
very interpreter and, from a checkout, this checkout on its path), not a trio loop on a thread
of the test process. It costs one process start (~0.2 s, bench/startup.py) per broker, and buys:
a broker crash, hang or ``os._exit`` (the ``crash=`` fault injection) never takes the test
process with it; its logging, warnings and signal handling stay out of the test process (whose
pytest may turn warnings into errors); pytest-xdist workers each get their own broker for free;
and the log goes to a file that can be attached to a failing test's report.

It listens on ``127.0.0.1:0`` (a free port, read back from the ``kafkad ready listen=...``
line), with memory storage unless ``data_dir`` is given, and
``group.initial.rebalance.delay.ms=0`` unless configured otherwise. ``KAFKAD_*`` environment
variables of the test process are not passed on, so the broker is the same on every machine.
Stopping sends SIGTERM (a clean shutdown), then SIGKILL after ``stop_timeout`` seconds.

Configs are Kafka's names (``num.partitions``), given as a dict or as keyword arguments
(``**{"num.partitions": 3}``); a name without dots has its underscores read as dots
(``num_partitions=3``: no Kafka config name has an underscore). Values are passed as strings;
``True``/``False`` become ``true``/``false``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["Broker", "BrokerError", "broker", "normalize_configs"]

# The directory holding the proxy/ package this module belongs with (a checkout or site-packages).
_CODE_ROOT = Path(__file__).resolve().parent.parent
_READY = re.compile(r"^kafkad ready listen=(\S+):(\d+) ")
DEFAULT_CONFIGS: Mapping[str, str] = {"group.initial.rebalance.delay.ms": "0"}


def _installed() -> bool:
    """Whether this kafkad lives in a site-packages directory (then it needs no path entry;
    putting site-packages ahead of the standard library would be wrong)."""
    import site

    sites = [*site.getsitepackages(), site.getusersitepackages()]
    return any(Path(d).resolve() == _CODE_ROOT for d in sites if d)


def _absolute_store(data_dir: str) -> str:
    """``data_dir`` with a relative path made absolute against the caller's working directory:
    the broker runs in its own temporary directory (removed on stop), where a relative path
    would otherwise land and be deleted with it."""
    if data_dir.startswith("file://"):
        return "file://" + os.path.abspath(data_dir[len("file://") :])
    if "://" in data_dir:
        return data_dir  # memory:// or a scheme the broker refuses by name
    return os.path.abspath(data_dir)


# The broker's entry point: ``python -m proxy.cli`` plus a guard against orphans. Its stdin is a
# pipe only this process holds, so it reaches EOF when this process ends in any way — even
# SIGKILL, or an xdist worker killed with its controller — and the broker then stops itself:
# SIGTERM (a clean shutdown), SIGKILL if that takes longer than the grace given.
_ORPHAN_GUARD = """
import os, runpy, signal, sys, threading, time
def _guard():
    while sys.stdin.buffer.read(65536):
        pass
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(10)
    os.kill(os.getpid(), signal.SIGKILL)
threading.Thread(target=_guard, name="kafkad-orphan-guard", daemon=True).start()
runpy.run_module("proxy.cli", run_name="__main__", alter_sys=True)
"""


class BrokerError(RuntimeError):
    """The broker did not start, or an admin request it answered failed."""


def _config_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def normalize_configs(*dicts: Mapping[str, object], **configs: object) -> dict[str, str]:
    """One ``{kafka.name: "value"}`` dict from dicts and keywords (later ones win)."""
    out: dict[str, str] = {}
    for source in (*dicts, configs):
        for name, value in source.items():
            key = name if "." in name else name.replace("_", ".")
            out[key] = _config_value(value)
    return out


class Broker:
    """A running kafkad subprocess; see :func:`broker` for the usual way to get one."""

    def __init__(
        self,
        configs: Mapping[str, str] | None = None,
        *,
        data_dir: str | os.PathLike[str] | None = None,
        start_timeout: float = 30.0,
        stop_timeout: float = 10.0,
    ) -> None:
        self.configs: dict[str, str] = {**DEFAULT_CONFIGS, **(configs or {})}
        self.data_dir = "memory://" if data_dir is None else _absolute_store(os.fspath(data_dir))
        self.stop_timeout = stop_timeout
        self._work_dir = tempfile.mkdtemp(prefix="kafkad-testing-")
        self.log_path = Path(self._work_dir) / "broker.log"
        self._stdout_path = Path(self._work_dir) / "stdout"
        self._proc: subprocess.Popen[bytes] | None = None
        self._topic_ids = itertools.count()
        self.host = ""
        self.port = 0
        try:
            self._start(start_timeout)
        except BaseException:
            self.stop()
            raise

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def _start(self, timeout: float) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKAD_")}
        if not _installed():  # a checkout: start its proxy/, not another kafkad's
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(_CODE_ROOT), env.get("PYTHONPATH", "")) if p
            )
        cmd = [sys.executable, "-c", _ORPHAN_GUARD, "serve", "--listen", "127.0.0.1:0"]
        cmd += ["--data-dir", self.data_dir]
        for name, value in self.configs.items():
            cmd += ["--set", f"{name}={value}"]
        with open(self._stdout_path, "wb") as out, open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=out, stderr=log, env=env, cwd=self._work_dir
            )
        deadline = time.monotonic() + timeout
        while True:
            match = _READY.match(self._stdout_path.read_text(errors="replace"))
            if match:
                self.host, self.port = match.group(1), int(match.group(2))
                return
            if self._proc.poll() is not None:
                raise BrokerError(
                    f"kafkad exited with status {self._proc.returncode} while starting:\n"
                    + self.log_text()[-4000:]
                )
            if time.monotonic() > deadline:
                raise BrokerError(f"kafkad was not ready within {timeout} s:\n{self.log_text()}")
            time.sleep(0.005)

    def log_size(self) -> int:
        """The log's length in bytes now: pass it to :meth:`log_text` later for what came since."""
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def log_text(self, since: int = 0) -> str:
        """The broker's log (its stderr) from byte offset ``since``."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(since)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    @property
    def returncode(self) -> int | None:
        """The exit status once the process has ended (None while it runs)."""
        return None if self._proc is None else self._proc.poll()

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        """SIGTERM, wait, SIGKILL if it must; removes the log (and nothing of ``data_dir``)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdin is not None:
                proc.stdin.close()
        shutil.rmtree(self._work_dir, ignore_errors=True)

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ topics

    def unique_topic_name(self, hint: str = "topic") -> str:
        """A legal topic name (at most 249 of ``[a-zA-Z0-9._-]``) no other call returns."""
        clean = re.sub(r"[^a-zA-Z0-9._-]+", "-", hint).strip("-.") or "topic"
        suffix = f"-{next(self._topic_ids)}-{uuid.uuid4().hex[:8]}"
        return clean[: 249 - len(suffix)] + suffix

    def create_topic(
        self,
        name: str | None = None,
        *,
        partitions: int = 1,
        configs: Mapping[str, object] | None = None,
        timeout: float = 30.0,
    ) -> str:
        """Create a topic with CreateTopics (a unique name unless given); returns its name."""
        topic = name or self.unique_topic_name()
        create_topics(
            self.host, self.port, topic, partitions, normalize_configs(configs or {}), timeout
        )
        return topic

    def delete_topics(self, *names: str, timeout: float = 30.0) -> None:
        """Delete topics with DeleteTopics; a topic that is already gone is no error."""
        if names:
            delete_topics(self.host, self.port, names, timeout)


@contextlib.contextmanager
def broker(
    configs: Mapping[str, object] | None = None,
    /,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    start_timeout: float = 30.0,
    **more_configs: object,
) -> Iterator[Broker]:
    """A kafkad broker for the ``with`` block: ``b.bootstrap_servers`` is ``127.0.0.1:PORT``."""
    with Broker(
        normalize_configs(configs or {}, **more_configs),
        data_dir=data_dir,
        start_timeout=start_timeout,
    ) as b:
        yield b


# ---------------------------------------------------------------------- admin requests
# Two requests written by hand over a blocking socket (as proxy/healthcheck.py does), so the
# harness imports neither trio nor kio: CreateTopics v2 and DeleteTopics v1.

_UNKNOWN_TOPIC_OR_PARTITION = 3


def kafka_string(s: str | bytes) -> bytes:
    """A non-flexible STRING: i16 length, bytes."""
    raw = s.encode() if isinstance(s, str) else s
    return struct.pack(">h", len(raw)) + raw


def exchange(
    sock: socket.socket, api_key: int, version: int, body: bytes, correlation_id: int = 1
) -> bytes:
    """Send one request (header v1, non-flexible ``body``) and return its response body."""
    head = struct.pack(">hhi", api_key, version, correlation_id) + kafka_string("kafkad-testing")
    sock.sendall(struct.pack(">i", len(head) + len(body)) + head + body)
    (size,) = struct.unpack(">i", _recv(sock, 4))
    reply = _recv(sock, size)
    if struct.unpack_from(">i", reply)[0] != correlation_id:
        raise BrokerError("the response has another correlation id")
    return reply[4:]


def _roundtrip(
    host: str, port: int, api_key: int, version: int, body: bytes, timeout: float
) -> bytes:
    with socket.create_connection((host, port), timeout=timeout) as sock:
        return exchange(sock, api_key, version, body)


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise BrokerError("the broker closed the connection")
        buf += chunk
    return bytes(buf)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> Any:
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return values[0] if len(values) == 1 else values

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s


def create_topics(
    host: str, port: int, name: str, partitions: int, configs: Mapping[str, str], timeout: float
) -> None:
    entry = kafka_string(name) + struct.pack(">ihi", partitions, -1, 0)
    entry += struct.pack(">i", len(configs))
    for key, value in configs.items():
        entry += kafka_string(key) + kafka_string(value)
    body = struct.pack(">i", 1) + entry + struct.pack(">ib", int(timeout * 1000), 0)
    r = _Reader(_roundtrip(host, port, 19, 2, body, timeout))
    r.take(">i")  # throttle_time_ms
    for _ in range(r.take(">i")):
        topic, code, message = r.string(), r.take(">h"), r.string()
        if code:
            raise BrokerError(f"CreateTopics {topic}: error code {code} {message or ''}".rstrip())


def delete_topics(host: str, port: int, names: tuple[str, ...], timeout: float) -> None:
    body = struct.pack(">i", len(names)) + b"".join(kafka_string(n) for n in names)
    body += struct.pack(">i", int(timeout * 1000))
    r = _Reader(_roundtrip(host, port, 20, 1, body, timeout))
    r.take(">i")  # throttle_time_ms
    failed = []
    for _ in range(r.take(">i")):
        topic, code = r.string(), r.take(">h")
        if code not in (0, _UNKNOWN_TOPIC_OR_PARTITION):
            failed.append(f"{topic}: error code {code}")
    if failed:
        raise BrokerError("DeleteTopics " + "; ".join(failed))
