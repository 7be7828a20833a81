"""A short coverage-guided fuzz run (``fuzz_atheris``) as a test: 20,000 inputs from the golden
frames, in a subprocess so that a crash, even a native abort, fails this test only."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("atheris")

REPO = Path(__file__).resolve().parents[2]
RUNS = 20_000


@pytest.mark.timeout(240)
def test_short_fuzz_run_finds_no_crash(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.wire.fuzz_atheris",
            str(corpus),
            f"-runs={RUNS}",
            "-seed=1",
            "-max_len=4096",
            f"-artifact_prefix={tmp_path}/",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=220,
    )
    tail = proc.stderr[-4000:]
    assert proc.returncode == 0, f"fuzzing failed (artifacts in {tmp_path}):\n{tail}"
    # libFuzzer counts the seed inputs it replays as runs too, so "Done N runs" may exceed RUNS
    done = re.search(r"Done (\d+) runs", proc.stderr)
    assert done is not None and int(done.group(1)) >= RUNS, tail
    assert not list(tmp_path.glob("crash-*"))
