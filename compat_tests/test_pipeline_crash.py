"""The exactly-once sink survives the driver's death: the ledger job's streaming query runs as
a subprocess (driver, JVM, Python workers) and is killed with SIGKILL, the whole process
group at once, at seeded points across several micro-batches: just after Spark wrote a
batch's offsets (its tasks about to write, or writing, their transactions) or just after it
recorded a batch as done, plus a seeded delay. Each time the job is restarted from its
checkpoint; the last run goes to the end (Trigger.AvailableNow). Then a read_committed
consumer of the output must find every valid transfer exactly once as a debit and once as a
credit, and nothing else.

KAFKAD_PIPELINE_CRASH_SEED picks another seed (default 7), KAFKAD_PIPELINE_CRASH_KILLS the
number of kills (default 2: every driver start costs Spark's start-up, tens of seconds on a
busy 2-core machine), KAFKAD_PIPELINE_CRASH_TRANSFERS the input size (default 600).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compat_tests._support import topic_name
from compat_tests.txn_support import create

pytest.importorskip("pyspark")
REPO = Path(__file__).resolve().parent.parent
SEED = int(os.environ.get("KAFKAD_PIPELINE_CRASH_SEED", "7"))
KILLS = int(os.environ.get("KAFKAD_PIPELINE_CRASH_KILLS", "2"))
TRANSFERS = int(os.environ.get("KAFKAD_PIPELINE_CRASH_TRANSFERS", "600"))
PER_TRIGGER = 120  # offsets per micro-batch: 5 batches for 600 transfers
RUN_TIMEOUT_S = 150


def _batches(checkpoint: Path, log: str) -> int:
    """The highest micro-batch id in the checkpoint's offsets/ or commits/ log, -1 if none."""
    d = checkpoint / log
    ids = [int(p.name) for p in d.iterdir() if p.name.isdigit()] if d.is_dir() else []
    return max(ids, default=-1)


def _start(args: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    from pipeline.session import spark_env

    spark_env()  # PYSPARK_PYTHON, PYTHONPATH, SPARK_LOCAL_IP, JAVA_HOME for the driver
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            args,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the kill takes JVM and workers
        )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def _tail(path: Path, n: int = 4000) -> str:
    data = path.read_bytes() if path.exists() else b""
    return data[-n:].decode("utf-8", "replace")


@pytest.mark.timeout(600)
def test_driver_killed_at_random_points_output_exactly_once(bootstrap: str, tmp_path: Path) -> None:
    from pipeline.examples import ledger

    rng = random.Random(SEED)
    src = create(bootstrap, topic_name("transfers"), 3)
    out = create(bootstrap, topic_name("balance-updates"), 3)
    ledger.seed(bootstrap, src, ledger.make_transfers(TRANSFERS, seed=SEED), 3)
    checkpoint = tmp_path / "ckpt"
    args = [sys.executable, "-m", "pipeline.examples.ledger", "run", "--bootstrap", bootstrap]
    args += ["--input", src, "--output", out, "--checkpoint", str(checkpoint)]
    args += ["--available-now", "--max-offsets-per-trigger", str(PER_TRIGGER)]
    log = tmp_path / "driver.log"
    kills: list[str] = []
    finished = False
    for run in range(KILLS):
        log_name = rng.choice(["offsets", "commits"])
        wait_batches = 1 + rng.randrange(2)  # this run's first or second new batch
        delay = rng.uniform(0.0, 1.0)
        target = _batches(checkpoint, log_name) + wait_batches
        proc = _start(args, log)
        try:
            deadline = time.monotonic() + RUN_TIMEOUT_S
            while _batches(checkpoint, log_name) < target and proc.poll() is None:
                assert time.monotonic() < deadline, f"run {run} stalled\n{_tail(log)}"
                time.sleep(0.05)
            if proc.poll() is not None:
                assert proc.returncode == 0, f"run {run} failed\n{_tail(log)}"
                finished = True
                break
            time.sleep(delay)
        finally:
            _kill_group(proc)
        kills.append(f"{log_name}/{target}+{delay:.2f}s")
    if not finished:
        proc = _start(args, log)
        try:
            assert proc.wait(RUN_TIMEOUT_S) == 0, f"last run failed\n{_tail(log)}"
        finally:
            _kill_group(proc)
    print(f"seed {SEED}: killed at {kills}; {_batches(checkpoint, 'commits') + 1} batches")
    assert kills, "the job finished before the first kill"
    report = ledger.check_topics(bootstrap, src, out)
    assert report.ok, (kills, report.problems[:10])
    assert report.valid > TRANSFERS * 0.8 and report.updates == 2 * report.valid
