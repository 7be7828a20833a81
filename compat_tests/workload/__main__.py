"""``python -m compat_tests.workload --seed N --duration S --profile short|long|calm
[--bootstrap host:port] [--dir DIR]``: one workload run (see ``runner.py``); prints the
counts and any anomaly, exits 1 on an anomaly. Without ``--bootstrap`` it starts its own
kafkad from this checkout (and may kill it); with one, no broker faults are injected.
``--check DIR/history.jsonl`` checks a saved history again."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from compat_tests.workload.checker import check
from compat_tests.workload.profiles import PROFILES
from compat_tests.workload.runner import Run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m compat_tests.workload")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", choices=sorted(PROFILES), default="short")
    ap.add_argument("--duration", type=float, default=None, help="seconds (profile's default)")
    ap.add_argument("--bootstrap", default=None, help="an already running broker")
    ap.add_argument("--dir", type=Path, default=None, help="keep logs and history here")
    ap.add_argument("--check", type=Path, default=None, help="only check a saved history.jsonl")
    args = ap.parse_args(argv)
    if args.check is not None:
        with open(args.check, encoding="utf-8") as f:
            report = check(json.loads(line) for line in f if line.strip())
        print(report.summary())
        return 0 if report.clean else 1
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="kafkad-workload-"))
    workdir.mkdir(parents=True, exist_ok=True)
    run = Run(args.seed, PROFILES[args.profile], workdir, args.bootstrap, duration_s=args.duration)
    try:
        report = run.run()
    finally:
        run.stop_broker()
    print(f"seed={args.seed} profile={args.profile} history={run.history.path}")
    print(report.summary())
    return 0 if report.clean else 1


if __name__ == "__main__":
    sys.exit(main())
