"""proxy/cli.py pauses the cyclic GC while the broker's modules import (start-up time,
bench/startup.py) and must hand the broker a running GC: a broker without one would grow
without bound on reference cycles."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent(
    """
    import gc, sys
    sys.argv = ["kafkad"]  # as the console script runs it
    import proxy.cli
    print("during imports:", gc.isenabled())
    def fake_run(fn, config):
        print("when the broker runs:", gc.isenabled(), gc.get_freeze_count() > 1000)
    proxy.cli.trio.run = fake_run
    proxy.cli.main(["serve", "--listen", "127.0.0.1:0", "--data-dir", "memory://"])
    """
)


def test_the_broker_runs_with_the_gc_on_and_start_up_objects_frozen() -> None:
    run = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "during imports: False",
        "when the broker runs: True True",
    ], run.stdout + run.stderr


def test_importing_the_cli_leaves_a_test_process_gc_alone() -> None:
    probe = "import gc, proxy.cli; print(gc.isenabled(), gc.get_freeze_count())"
    run = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert run.stdout.split() == ["True", "0"], run.stdout + run.stderr
