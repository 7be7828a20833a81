"""Idempotent producers of every client that supports idempotence, across a kill -9: each
produces N records to several partitions, the broker is killed with SIGKILL mid-stream and
restarted on the same data dir and port, and the client's own retries carry on. Afterwards
every acknowledged record must be stored exactly once, at the offset it was acknowledged with,
and each partition must hold its records in production order (spec eos.md §3, §6.2).

The producers run as subprocesses (``idem_producer.py``, ``kafkajs/idem_producer.js``) that
print one line per acknowledgement, so the test can kill the broker after a given number of
acknowledgements without sharing an interpreter with the client.
"""

from __future__ import annotations

import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from compat_tests.test_crash import PARTITIONS, create_topic, read_all

if TYPE_CHECKING:
    from compat_tests.conftest import BrokerProcess

HERE = Path(__file__).parent
N = 100_000
KILL_AFTER = 30_000  # acknowledgements before the kill
TIMEOUT_S = 120


def command(client: str, bootstrap: str, topic: str) -> list[str]:
    if client == "kafkajs":
        node = shutil.which("node")
        if node is None or not (HERE / "kafkajs" / "node_modules" / "kafkajs").is_dir():
            pytest.fail("node or kafkajs missing: run scripts/install-client-tools")
        script = str(HERE / "kafkajs" / "idem_producer.js")
        return [node, script, bootstrap, topic, str(N), str(PARTITIONS)]
    script = str(HERE / "idem_producer.py")
    return [sys.executable, "-u", script, client, bootstrap, topic, str(N), str(PARTITIONS)]


@pytest.mark.timeout(TIMEOUT_S + 60)
@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python", "aiokafka", "kafkajs"])
def test_idempotent_producer_survives_kill9(
    own_broker: BrokerProcess, client: str, tmp_path: Path
) -> None:
    topic = create_topic(own_broker.bootstrap)
    # the command first: a missing client fails the test here, before a file is left open
    # (its ResourceWarning would fail whichever later test the garbage collector ran in)
    argv = command(client, own_broker.bootstrap, topic)
    stderr = open(tmp_path / f"{client}.stderr", "w+", encoding="utf-8")  # noqa: SIM115
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=stderr,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def drain() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    acked: dict[tuple[int, int], int] = {}
    failed: list[str] = []
    finished = killed = False
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                break
            kind, *rest = line.split(" ", 3)
            if kind == "ack":
                p, o, i = map(int, rest)
                acked[(p, o)] = i
            elif kind == "fail":
                failed.append(line)
            elif kind == "done":
                finished = True
            if not killed and len(acked) >= KILL_AFTER:
                own_broker.kill9()
                killed = True
                acked_at_kill = len(acked)
                own_broker.restart()
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(10)
        if proc.stdout is not None:
            proc.stdout.close()
        stderr.seek(0)
        client_log = stderr.read()[-5000:]
        stderr.close()
    assert killed, f"only {len(acked)} acknowledged before the deadline\n{client_log}"
    assert acked_at_kill < N, "everything was acknowledged before the kill: not mid-stream"
    assert finished and proc.returncode == 0, f"producer exit {proc.returncode}\n{client_log}"

    stored = read_all(own_broker.bootstrap, topic)
    print(  # shown on failure
        f"{client}: acked {len(acked)} ({acked_at_kill} before the kill), failed {len(failed)},"
        f" stored {sum(map(len, stored.values()))}; first failures {failed[:3]}"
    )
    assert not failed, f"{len(failed)} records failed, e.g. {failed[:3]}\n{client_log}"
    assert len(acked) == N
    for p, records in stored.items():
        values = [int(v) for _, v in records]
        assert all(v % PARTITIONS == p for v in values), f"foreign records in partition {p}"
        dups = len(values) - len(set(values))
        assert dups == 0, f"partition {p}: {dups} duplicates"
        assert values == sorted(values), f"partition {p} is out of production order"
        at = dict(records)
        wrong = [(o, i) for (q, o), i in acked.items() if q == p and at.get(o) != b"%08d" % i]
        assert not wrong, f"partition {p}: acknowledged records lost or moved, e.g. {wrong[:5]}"
    assert sum(map(len, stored.values())) == N
