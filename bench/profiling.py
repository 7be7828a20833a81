"""Optional py-spy profiles of the broker during a phase, summarized by self time."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.brokers import PY_SPY_PACKAGE, TOOLS_DIR

# --------------------------------------------------------------------------- profiling


def ensure_py_spy() -> str:
    found = shutil.which("py-spy")
    if found:
        return found
    target = TOOLS_DIR / "py-spy"
    binary = target / "bin" / "py-spy"
    if not binary.exists():
        print(f"installing py-spy into {target} ...", flush=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--target", str(target), PY_SPY_PACKAGE],
            check=True,
        )  # fmt: skip
    return str(binary)


class ProfileRecorder:
    """`py-spy record --format raw` (collapsed stacks) of one process, until stop()."""

    def __init__(self, py_spy: str, pid: int, out: Path, rate: int = 1000) -> None:
        self.out = out
        self.proc = subprocess.Popen(
            [py_spy, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw",
             "--nonblocking", "--output", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        time.sleep(0.5)  # let it attach before the load starts

    def stop(self) -> dict[str, Any]:
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        if not self.out.exists():
            return {"error": err.decode(errors="replace").strip()[-500:]}
        return {"file": str(self.out), **summarize_collapsed(self.out)}


_LINE_NO = re.compile(r":\d+\)$")


def summarize_collapsed(path: Path, top: int = 15) -> dict[str, Any]:
    """Top functions by self and by inclusive samples, from py-spy's collapsed stacks."""
    self_n: dict[str, int] = {}
    incl_n: dict[str, int] = {}
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [_LINE_NO.sub(")", f) for f in stack.split(";")]
        frames = [f for f in frames if not f.startswith("process ") and not f.startswith("thread ")]
        if not frames:
            continue
        self_n[frames[-1]] = self_n.get(frames[-1], 0) + n
        for f in set(frames):
            incl_n[f] = incl_n.get(f, 0) + n

    def ranked(d: dict[str, int]) -> list[list[Any]]:
        items = sorted(d.items(), key=lambda kv: -kv[1])[:top]
        return [[round(100 * n / total, 1), f] for f, n in items]

    return {"samples": total, "top_self_pct": ranked(self_n), "top_inclusive_pct": ranked(incl_n)}


def print_profile(r: dict[str, Any], top: int = 8) -> None:
    prof = r.get("profile")
    if not prof:
        return
    if "error" in prof:
        print(f"    profile failed: {prof['error']}")
        return
    print(f"    py-spy: {prof['samples']} samples -> {prof['file']}; top self time:")
    for pct, frame in prof["top_self_pct"][:top]:
        print(f"      {pct:5.1f}%  {frame}")
