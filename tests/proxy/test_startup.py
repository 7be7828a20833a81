"""Start-up as a user sees it: real ``kafkad`` processes on real directories and ports.

A broker that cannot start prints one line on stderr and exits non-zero; one that must not
touch a directory (Apache Kafka's, another broker's) leaves every byte of it as it was.
Processes run from a scratch working directory with this checkout on PYTHONPATH (so nothing
they write lands in the repository, and the shared venv's installed copy is not the one run).
"""

from __future__ import annotations

import hashlib
import os
import select
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import trio

from storage.api import LogConfig, TopicMeta, TopicPartition
from storage.backends import open_store
from tests.storage.conftest import make_batch

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKAD_")}
    return {**env, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **extra}


def kafkad(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``kafkad ARGS`` to completion (start-up failures end on their own)."""
    return subprocess.run(
        [sys.executable, "-m", "proxy.cli", *args],
        cwd=cwd,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


class Running:
    """A broker process that printed its ready line."""

    def __init__(self, data_dir: Path, cwd: Path, *extra: str) -> None:
        args = [sys.executable, "-m", "proxy.cli", "serve", "--listen", "127.0.0.1:0"]
        self.proc = subprocess.Popen(
            [*args, "--data-dir", str(data_dir), *extra],
            cwd=cwd,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], TIMEOUT_S)
        line = self.proc.stdout.readline() if ready else ""  # the ready line, "" if it died
        if not line.startswith("kafkad ready "):
            self.proc.kill()
            _, err = self.proc.communicate(timeout=TIMEOUT_S)
            raise AssertionError(f"no ready line: {line!r} {err}")
        self.port = int(line.split()[2].rpartition(":")[2])

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=TIMEOUT_S)
        assert self.proc.returncode == 0, err
        return err


def one_line_failure(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafkad: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def tree(root: Path) -> dict[str, str]:
    """Every path under ``root`` with a digest of its content (directories: "dir")."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def make_kafka_log_dir(root: Path) -> None:
    """What Apache Kafka 4.x (KRaft, one combined node) leaves in its log dir."""
    root.mkdir()
    (root / "meta.properties").write_text(
        "#\n#Mon Nov 23 10:00:00 UTC 2026\nnode.id=1\ndirectory.id=x8bpWmV5QdGgnyvZ6UvXbQ\n"
        "version=1\ncluster.id=5L6g3nShT-eMCtK--X86sw\n"
    )
    for name in (
        "bootstrap.checkpoint",
        "cleaner-offset-checkpoint",
        "log-start-offset-checkpoint",
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
    ):
        (root / name).write_text("0\n1\norders 0 42\n")
    (root / ".lock").write_bytes(b"")
    for part in ("orders-0", "orders-1", "__consumer_offsets-7", "__cluster_metadata-0"):
        d = root / part
        d.mkdir()
        (d / "00000000000000000000.log").write_bytes(os.urandom(4096))
        (d / "00000000000000000000.index").write_bytes(b"\0" * 1024)
        (d / "00000000000000000000.timeindex").write_bytes(b"\0" * 1536)
        (d / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
        (d / "partition.metadata").write_text("version: 0\ntopic_id: 3pmnKFTDQgCnBSCmh4Y-pg\n")
    (root / "__cluster_metadata-0" / "quorum-state").write_text('{"leaderId":1}')


# -- point 1: a directory that is not kafkad's is refused and left alone -------------------


def test_an_apache_kafka_log_dir_is_refused_and_left_untouched(tmp_path: Path) -> None:
    data = tmp_path / "kafka-logs"
    make_kafka_log_dir(data)
    before = tree(data)
    result = kafkad("serve", "--listen", "127.0.0.1:0", "--data-dir", str(data), cwd=tmp_path)
    line = one_line_failure(result, str(data), "not a kafkad data directory", "meta.properties")
    assert "Apache Kafka" in line and "orders-0/" in line
    assert "ready" not in result.stdout
    assert tree(data) == before


def test_a_directory_of_other_files_is_refused_and_left_untouched(tmp_path: Path) -> None:
    data = tmp_path / "home"
    data.mkdir()
    (data / "thesis.tex").write_text("years of work")
    (data / "photos-2019").mkdir()
    before = tree(data)
    result = kafkad("serve", "--listen", "127.0.0.1:0", "--data-dir", str(data), cwd=tmp_path)
    one_line_failure(result, "thesis.tex", "photos-2019/")
    assert tree(data) == before


async def _write_records(root: Path) -> None:
    async with open_store(str(root)) as store:
        await store.create_topic(TopicMeta("t", uuid.uuid4(), 1))
        log = await store.open_partition(TopicPartition("t", 0), LogConfig())
        await log.append(0, 2, 1000, make_batch(0, 3))


async def _log_end(root: Path) -> int:
    async with open_store(str(root)) as store:
        return (await store.open_partition(TopicPartition("t", 0), LogConfig())).log_end_offset


async def test_a_data_dir_of_a_kafkad_from_before_the_marker_still_opens(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await _write_records(data)
    (data / "kafkad.properties").unlink()  # what an older kafkad left: no marker, no .lock
    (data / ".lock").unlink()
    (data / "meta.properties").write_text("version=1\ncluster.id=abc\nnode.id=1\n")
    broker = await trio.to_thread.run_sync(Running, data, tmp_path)
    await trio.to_thread.run_sync(broker.stop)
    assert (data / "kafkad.properties").read_text().endswith("format.version=1\n")
    assert "cluster.id=abc" in (data / "meta.properties").read_text()
    assert await _log_end(data) == 3


# -- point 2: one broker per data dir ---------------------------------------------------------


def test_a_second_broker_on_the_same_data_dir_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = Running(data, tmp_path)
    try:
        result = kafkad("serve", "--listen", "127.0.0.1:0", "--data-dir", str(data), cwd=tmp_path)
        one_line_failure(result, f"data dir {data} is locked by pid {first.proc.pid}")
    finally:
        first.stop()
    second = Running(data, tmp_path)  # the lock went with the first process
    second.stop()


# -- point 3: start-up failures in one line -----------------------------------------------------


def test_a_port_in_use_is_named(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = kafkad(
            "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", "memory://", cwd=tmp_path
        )
    one_line_failure(result, f"cannot listen on 127.0.0.1:{port}", "in use")


@pytest.mark.parametrize(
    ("setup", "needles"),
    [
        ("file", ["exists and is not a directory"]),
        ("under-a-file", ["cannot create data dir"]),
        ("scheme", ["unknown store URL scheme", "s3://bucket"]),
        ("corrupt-topic", ["corrupt topic metadata file", "t.json"]),
    ],
)
async def test_data_dir_problems_are_one_line(
    tmp_path: Path, setup: str, needles: list[str]
) -> None:
    data = tmp_path / "data"
    if setup == "file":
        data.write_text("x")
    elif setup == "under-a-file":
        (tmp_path / "f").write_text("x")
        data = tmp_path / "f" / "data"
    elif setup == "corrupt-topic":
        await _write_records(data)
        (data / "__kafkad_topics" / "t.json").write_text('{"name": "t"')
    where = "s3://bucket" if setup == "scheme" else str(data)
    result = await trio.to_thread.run_sync(
        lambda: kafkad("serve", "--listen", "127.0.0.1:0", "--data-dir", where, cwd=tmp_path)
    )
    one_line_failure(result, *needles)


# -- point 4: configs checked like Kafka's --------------------------------------------------


@pytest.mark.parametrize(
    ("args", "env", "needles"),
    [
        (["--set", "socket.request.max.bytes=0"], {}, ["socket.request.max.bytes=0 from --set"]),
        (["--set", "message.max.bytes=-1"], {}, ["message.max.bytes", "at least 0"]),
        (["--set", "log.segment.bytes=1048575"], {}, ["log.segment.bytes", "at least 1048576"]),
        (["--set", "node.id=-3"], {}, ["node.id=-3"]),
        (["--set", "log.retention.ms=-5"], {}, ["-1 (unlimited) or at least 1"]),
        (["--set", "log.segment.delete.delay.ms=-1"], {}, ["must be at least 0"]),
        (["--set", "num.partitions=many"], {}, ["num.partitions=many", "whole number"]),
        (
            [],
            {"KAFKAD_NUM_PARTITIONS": "0"},
            ["from environment variable KAFKAD_NUM_PARTITIONS"],
        ),
        ([], {"KAFKAD_NUM_PARTITION": "3"}, ["KAFKAD_NUM_PARTITION", "KAFKAD_NUM_PARTITIONS?"]),
        (["--listen", "127.0.0.1:99999"], {}, ["--listen", "between 0 and 65535"]),
        (["--listen", "0.0.0.0:9092"], {}, ["needs --advertise"]),
        (["--log-level", "LOUD"], {}, ["invalid choice: 'LOUD'"]),
        ([], {"KAFKAD_LOG_LEVEL": "loud"}, ["KAFKAD_LOG_LEVEL=LOUD", "DEBUG, INFO"]),
    ],
)
def test_bad_configs_are_refused_in_one_line(
    tmp_path: Path, args: list[str], env: dict[str, str], needles: list[str]
) -> None:
    base = ["serve", "--data-dir", "memory://"]
    if "--listen" not in args:
        base += ["--listen", "127.0.0.1:0"]
    result = kafkad(*base, *args, cwd=tmp_path, **env)
    if "--log-level" in args:  # argparse's own usage error: two lines, exit 2
        assert result.returncode == 2 and needles[0] in result.stderr
        return
    one_line_failure(result, *needles)


def test_every_unknown_name_is_reported_at_once(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("nmu.partitions=3\nlog.dirs=/tmp/x\nlog.flush.scheduler.interval.ms=1\n")
    result = kafkad(
        "serve",
        "--data-dir",
        "memory://",
        "--config",
        str(config),
        "--set",
        "bogus=1",
        cwd=tmp_path,
    )
    one_line_failure(
        result, "nmu.partitions", "did you mean num.partitions", "bogus", "log.flush.scheduler"
    )


# -- point 9: what a user runs ---------------------------------------------------------------


def test_version_healthcheck_and_no_hypothesis_folder(tmp_path: Path) -> None:
    result = kafkad("--version", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.startswith("kafkad "), result
    broker = Running(tmp_path / "data", tmp_path)
    try:
        ok = kafkad("healthcheck", "--bootstrap", f"127.0.0.1:{broker.port}", cwd=tmp_path)
        assert ok.returncode == 0, ok.stderr
    finally:
        broker.stop()
    down = kafkad("healthcheck", "--bootstrap", f"127.0.0.1:{broker.port}", cwd=tmp_path)
    one_line_failure(down, "unhealthy", f"127.0.0.1:{broker.port}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]
