"""Start-up time: process spawn to the first answered ApiVersions, and a big data dir's restart.

    .venv/bin/python -m bench.startup                   # 10 cold starts each, 1,000,000 records
    .venv/bin/python -m bench.startup --runs 5 --records 200000

* memory: ``python -m proxy.cli serve --data-dir memory://`` on a free loopback port;
* empty dir: the same with a fresh empty ``--data-dir``;
* 1M records: a data dir holding ``--records`` records in one partition (written once through
  the raw protocol, 5,000-record uncompressed batches of 100-byte values), restarted 3 times
  after a clean stop; then, 3 times over, a fresh such dir whose broker was SIGKILLed, restarted
  once (recovery). Each restart is timed to the first ApiVersions and to the first
  ListOffsets, which must answer the full log end offset.

Each start is timed from just before ``Popen`` until a plain-socket ApiVersions v0 (the
healthcheck's) is answered, polling the port every millisecond; the broker is stopped with
SIGTERM between runs. Medians are printed as a table. Not a timed test: this machine's load
moves the figures (perf-notes.md), so compare before/after in the same session.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafkad.testing import create_topics, exchange, kafka_string
from proxy.healthcheck import check
from wire.record_codec import Record, build_batch

REPO_DIR = Path(__file__).resolve().parent.parent
TOPIC = "startup-bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(bytecode: bool) -> dict[str, str]:
    """An installed kafkad runs from .pyc files (pip compiles them); a checkout with
    PYTHONDONTWRITEBYTECODE=1 compiles ~200 modules on every start (~0.1 s). ``bytecode``
    uses a private cache (PYTHONPYCACHEPREFIX, warmed by a first untimed start) so the
    checkout gets no __pycache__ folders."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = str(CHECKOUT)
    if bytecode:
        env["PYTHONPYCACHEPREFIX"] = _PYCACHE
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


_PYCACHE = tempfile.mkdtemp(prefix="kafkad-startup-pycache-")
BYTECODE = True
CHECKOUT = REPO_DIR


def _spawn(data_dir: str, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "proxy.cli", "serve", "--listen", f"127.0.0.1:{port}"),
            *("--data-dir", data_dir, "--log-level", "WARNING"),
        ],
        cwd=CHECKOUT,
        env=_env(BYTECODE),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def time_start(
    data_dir: str, timeout_s: float = 120.0
) -> tuple[float, int, subprocess.Popen[bytes]]:
    """Seconds from spawn to the first answered ApiVersions, the port, and the still running
    process."""
    port = free_port()
    t0 = time.perf_counter()
    proc = _spawn(data_dir, port)
    while check("127.0.0.1", port, 1.0) is not None:
        if proc.poll() is not None:
            raise RuntimeError(f"kafkad exited with {proc.returncode} while starting")
        if time.perf_counter() - t0 > timeout_s:
            _stop(proc)
            raise RuntimeError(f"kafkad did not answer within {timeout_s} s")
        time.sleep(0.001)
    return time.perf_counter() - t0, port, proc


def cold_starts(on_disk: bool, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="kafkad-startup-") as tmp:
            data_dir = tmp if on_disk else "memory://"
            seconds, _port, proc = time_start(data_dir)
            _stop(proc)
            times.append(seconds)
    return times


# ------------------------------------------------------------------ raw-protocol writer


def record_batch(count: int, value: bytes) -> bytes:
    """A v2 batch of ``count`` records (no key, no headers), base offset 0, no producer id."""
    records = [
        Record(offset_delta=i, timestamp_delta=0, key=None, value=value) for i in range(count)
    ]
    return build_batch(records, base_timestamp=int(time.time() * 1000))


def fill(port: int, records: int, per_batch: int = 5_000, value_size: int = 100) -> None:
    """Create the topic (1 partition) and produce ``records`` records with acks=1."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        create_topics("127.0.0.1", port, TOPIC, partitions=1, configs={}, timeout=30)
        batch = record_batch(per_batch, b"v" * value_size)
        corr = 2
        for _ in range(records // per_batch):
            # Produce v3: transactional_id, acks, timeout, [topic, [partition, records]]
            body = (
                struct.pack(">hhi", -1, 1, 30000)
                + struct.pack(">i", 1)
                + kafka_string(TOPIC)
                + struct.pack(">iii", 1, 0, len(batch))
                + batch
            )
            reply = exchange(sock, 0, 3, body, corr)
            corr += 1
            # [topics: name, [partition, error_code, ...]]
            name_len = struct.unpack(">h", reply[4:6])[0]
            error = struct.unpack(">h", reply[6 + name_len + 8 : 6 + name_len + 10])[0]
            if error:
                raise RuntimeError(f"Produce answered error code {error}")


def log_end_offset(port: int) -> int:
    """ListOffsets v1 for the bench topic's partition 0, latest."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        body = struct.pack(">ii", -1, 1) + kafka_string(TOPIC) + struct.pack(">iiq", 1, 0, -1)
        reply = exchange(sock, 2, 1, body, 1)
    # [topics: name, [partition, error_code, timestamp, offset]]
    name_len = struct.unpack(">h", reply[4:6])[0]
    error, _ts, offset = struct.unpack(">hqq", reply[6 + name_len + 8 : 6 + name_len + 26])
    if error:
        raise RuntimeError(f"ListOffsets answered error code {error}")
    return int(offset)


def restarts(records: int, runs: int, crash: bool = False) -> tuple[list[float], list[float]]:
    """Restart times of a data dir holding ``records`` records: to the first answered
    ApiVersions, and to the first ListOffsets answering the full log end offset. ``crash``:
    the filling broker is SIGKILLed (no clean shutdown), and only the first restart (the one
    that recovers) is timed, ``runs`` times over."""
    if crash:
        ready, served = [], []
        for _ in range(runs):
            r, s = _restarts(records, 1, signal.SIGKILL)
            ready += r
            served += s
        return ready, served
    return _restarts(records, runs, signal.SIGTERM)


def _restarts(records: int, runs: int, how: signal.Signals) -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory(prefix="kafkad-startup-1m-") as tmp:
        _seconds, port, proc = time_start(tmp)
        try:
            fill(port, records)
        finally:
            proc.send_signal(how)
            _stop(proc)
        ready, served = [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            seconds, port, proc = time_start(tmp)
            try:
                end = log_end_offset(port)
                served.append(time.perf_counter() - t0)
            finally:
                _stop(proc)
            if end != records // 5_000 * 5_000:
                raise RuntimeError(f"the restarted log ends at {end}, not {records}")
            ready.append(seconds)
        return ready, served


def main() -> None:
    global BYTECODE, CHECKOUT
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=10, help="cold starts per case (default 10)")
    p.add_argument("--records", type=int, default=1_000_000, help="records for the restart case")
    p.add_argument("--restarts", type=int, default=3, help="restarts of the big dir (default 3)")
    p.add_argument(
        "--checkout",
        type=Path,
        default=REPO_DIR,
        help="the kafkad source tree to start (default: this one); e.g. a `git archive` of main "
        "for a before/after comparison in one session",
    )
    args = p.parse_args()
    CHECKOUT = args.checkout.resolve()
    rows: list[tuple[str, list[float]]] = []
    BYTECODE = False
    rows.append(("memory://, no .pyc cache", cold_starts(False, args.runs)))
    BYTECODE = True
    cold_starts(False, 1)  # fills the bytecode cache
    rows.append(("memory://", cold_starts(False, args.runs)))
    rows.append(("empty data dir", cold_starts(True, args.runs)))
    if args.records:
        ready, served = restarts(args.records, args.restarts)
        rows.append((f"{args.records:,} records: ApiVersions", ready))
        rows.append((f"{args.records:,} records: ListOffsets", served))
        ready, served = restarts(args.records, args.restarts, crash=True)
        rows.append(("  after kill -9: ApiVersions", ready))
        rows.append(("  after kill -9: ListOffsets", served))
    print(f"{'case':<34} {'runs':>4} {'median s':>9} {'min s':>7} {'max s':>7}")
    for name, times in rows:
        print(
            f"{name:<34} {len(times):>4} {statistics.median(times):>9.3f} "
            f"{min(times):>7.3f} {max(times):>7.3f}"
        )
    print(f"checkout: {CHECKOUT}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
