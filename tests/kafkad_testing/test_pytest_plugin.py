"""kafkad's pytest plugin, as a user meets it: sample_project/ run with ``pytest -p kafkad`` in
a subprocess, alone and under pytest-xdist, its outcomes and report checked.

The plugin is found the way an install finds it, through the ``pytest11`` entry point declared
in pyproject.toml: a throwaway ``.dist-info`` holding that entry point goes on the subprocess's
path (the shared venv's kafkad may be installed from another checkout), and plugin autoloading
is off, so only ``-p kafkad`` (and ``-p xdist.plugin``) can load it.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = Path(__file__).resolve().parent / "sample_project"


def _entry_point_dist(where: Path) -> Path:
    """A dist-info with pyproject.toml's pytest11 entry points, on a fresh path entry."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    entries = project["entry-points"]["pytest11"]
    dist = where / "kafkad_plugin_under_test-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: kafkad-plugin-under-test\nVersion: 0\n"
    )
    lines = "".join(f"{name} = {target}\n" for name, target in entries.items())
    (dist / "entry_points.txt").write_text(f"[pytest11]\n{lines}")
    return where


def _run(
    tmp_path: Path, *args: str, files: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    site = _entry_point_dist(tmp_path / "site")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "KAFKAD_"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT), str(site)]),
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
        SAMPLE_OUT=str(out),
    )
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "kafkad",
            "-p",
            "no:cacheprovider",
            "-rA",
            *args,
            *files,
        ],
        cwd=SAMPLE,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def _outcomes(output: str) -> dict[str, str]:
    """test name -> PASSED/FAILED/ERROR from -rA's short summary."""
    found = {}
    for line in output.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR") and "::" in rest:
            found[rest.split("::", 1)[1].split(" ", 1)[0]] = word
    return found


def _brokers_seen(tmp_path: Path) -> list[dict[str, object]]:
    return [
        json.loads(line)
        for f in sorted((tmp_path / "out").glob("brokers-*.jsonl"))
        for line in f.read_text().splitlines()
    ]


EXPECTED = {
    "test_produce_then_consume": "PASSED",
    "test_session_configs_from_ini": "PASSED",
    "test_topic_factory": "PASSED",
    "test_marker_gets_its_own_broker": "PASSED",
    "test_marker_with_the_session_configs_shares_its_broker": "PASSED",
    **{f"test_spread_over_workers[{n}]": "PASSED" for n in range(4)},
    "test_fails_on_purpose": "FAILED",
}


def test_sample_project_with_p_kafkad(tmp_path: Path) -> None:
    run = _run(tmp_path, files=("test_sample.py",))
    out = run.stdout + run.stderr
    assert run.returncode == 1, out  # exactly the deliberate failure
    assert _outcomes(out) == EXPECTED, out
    # The failing test's report carries the broker's log of that test, and only that test.
    failure = out.split("_ test_fails_on_purpose _", 1)[1].split("short test summary", 1)[0]
    assert "kafkad broker log (127.0.0.1:" in failure, out
    assert "created topic deliberately-failing-topic" in failure, out
    assert "policy_violation" not in failure.lower(), out
    seen = _brokers_seen(tmp_path)
    session = {r["pid"] for r in seen if r["test"] != "marker"}
    marker = {r["pid"] for r in seen if r["test"] == "marker"}
    assert len(session) == 1 and len(marker) == 1 and session != marker, seen
    assert "kafkad: started 2 broker(s)" in out, out


def test_sample_project_under_xdist_gets_a_broker_per_worker(tmp_path: Path) -> None:
    run = _run(tmp_path, "-p", "xdist.plugin", "-n", "2", files=("test_sample.py",))
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert _outcomes(out) == EXPECTED, out
    assert "created topic deliberately-failing-topic" in out, out
    seen = [r for r in _brokers_seen(tmp_path) if r["test"] != "marker"]
    workers = {r["worker"] for r in seen}
    assert workers == {"gw0", "gw1"}, seen
    for worker in workers:  # one broker per worker, used by all its tests
        assert len({r["pid"] for r in seen if r["worker"] == worker}) == 1, seen
    assert len({r["pid"] for r in seen}) == 2, seen
    assert len({r["bootstrap"] for r in seen}) == 2, seen


def test_tests_without_kafkad_fixtures_start_no_broker(tmp_path: Path) -> None:
    run = _run(tmp_path, files=("test_plain.py",))
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert _outcomes(out) == {"test_plain": "PASSED"}, out
    assert "kafkad: started" not in out, out


def test_marker_with_a_bad_argument_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    bad = tmp_path / "proj" / "test_bad.py"
    bad.write_text(
        "import pytest\n\n@pytest.mark.kafkad(3)\ndef test_x(kafkad_broker):\n    pass\n"
    )
    run = _run(tmp_path, str(bad), "--rootdir", str(tmp_path / "proj"))
    assert run.returncode != 0
    assert "@pytest.mark.kafkad takes dicts" in run.stdout + run.stderr


@pytest.mark.parametrize("configs", [{"num.partitions": 3}, {"num_partitions": 3}])
def test_embedded_api(configs: dict[str, int]) -> None:
    import kafkad.testing

    with kafkad.testing.broker(**configs) as b:
        host, port = b.bootstrap_servers.split(":")
        assert host == "127.0.0.1" and int(port) > 0
        assert b.configs["num.partitions"] == "3"
        assert b.configs["group.initial.rebalance.delay.ms"] == "0"
        topic = b.create_topic(partitions=2)
        assert f"created topic {topic} with 2 partition(s)" in b.log_text()
        b.delete_topics(topic)
        assert b.alive()
    assert not b.alive()
    assert not b.log_path.exists()


def test_a_dead_session_broker_fails_later_tests_with_its_exit_status(tmp_path: Path) -> None:
    run = _run(tmp_path, files=("test_dead_broker.py",))
    out = run.stdout + run.stderr
    assert _outcomes(out) == {
        "test_kills_the_session_broker": "PASSED",
        "test_after_the_broker_died": "ERROR",  # at setup, in the fixture
    }, out
    assert "has exited with status -9; its log ends:" in out, out
    assert "kafkad ready" not in out  # the log is stderr; the ready line went to stdout
    assert "not reached" not in out, out


def test_embedded_api_on_disk_keeps_the_data_dir(tmp_path: Path) -> None:
    import kafkad.testing

    data = tmp_path / "data"
    with kafkad.testing.broker(data_dir=data) as b:
        b.create_topic("kept", partitions=2)
    assert data.is_dir()  # stop() removes the log, never the data dir
    with (
        kafkad.testing.broker(data_dir=data) as b,
        pytest.raises(kafkad.testing.BrokerError, match="error code 36"),
    ):
        b.create_topic("kept")  # TOPIC_ALREADY_EXISTS: it survived the restart


def test_the_readme_fixture_example_runs_and_is_five_lines(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    after = readme.split("In your own tests", 1)[1]
    code = after.split("```python\n", 1)[1].split("```", 1)[0]
    assert len([line for line in code.splitlines() if line.strip()]) == 5, code
    (tmp_path / "proj").mkdir()
    example = tmp_path / "proj" / "test_readme_example.py"
    example.write_text(code)
    run = _run(tmp_path, str(example))
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert _outcomes(out) == {"test_greeting": "PASSED"}, out


@pytest.mark.parametrize("spelling", ["data", "file://data"])
def test_embedded_api_keeps_a_relative_data_dir_where_the_caller_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    """A relative data dir is the caller's, not the broker's temporary working directory (which
    is removed on stop, data and all)."""
    import kafkad.testing

    monkeypatch.chdir(tmp_path)
    with kafkad.testing.broker(data_dir=spelling) as b:
        b.create_topic("kept")
    assert (tmp_path / "data").is_dir()
    assert any((tmp_path / "data").iterdir())
    with (
        kafkad.testing.broker(data_dir=spelling) as b,
        pytest.raises(kafkad.testing.BrokerError, match="error code 36"),
    ):
        b.create_topic("kept")


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie awaiting its reaper counts as ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return "\nState:\tZ" not in status


def test_a_killed_test_process_leaves_no_broker_behind(tmp_path: Path) -> None:
    """SIGKILL of the process that started a broker (pytest killed by CI, an xdist worker
    killed with its controller) must not orphan the broker: it stops on its own."""
    script = (
        "import sys, kafkad.testing\n"
        "b = kafkad.testing.Broker()\n"
        "print(b.pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    owner = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert owner.stdout is not None
        broker_pid = int(owner.stdout.readline())
        exited = os.pidfd_open(broker_pid)  # readable once the broker has exited
        try:
            assert _running(broker_pid)
            owner.kill()
            owner.wait()
            ready, _, _ = select.select([exited], [], [], 30)
            assert ready, "the broker outlived the process that started it"
        finally:
            os.close(exited)
    finally:
        owner.kill()
        owner.wait()
        if owner.stdin is not None:
            owner.stdin.close()
        if owner.stdout is not None:
            owner.stdout.close()
