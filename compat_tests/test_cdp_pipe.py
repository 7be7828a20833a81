"""compat_tests/cdp.py's own clean-up, with a stand-in browser (no Chromium needed): one that
drops both ends of the DevTools pipe at start-up, as a browser crashing there does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from compat_tests.cdp import Browser, CdpError


def pipes() -> set[str]:
    """This process's fds open on a pipe (fd: pipe inode)."""
    out = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("pipe:"):
            out.add(f"{name}:{target}")
    return out


def test_a_browser_that_dies_at_start_up_leaves_no_pipe_and_the_cdp_error(tmp_path: Path) -> None:
    fake = tmp_path / "browser"
    fake.write_text("#!/bin/sh\nexec 3<&- 4>&-\nsleep 1\n")  # fd 3 first: no reader left
    fake.chmod(0o755)
    before = pipes()
    # the browser closed: the start-up call's error, not the BrokenPipeError of Browser.close
    with pytest.raises(CdpError, match="browser closed"):
        Browser(str(fake), tmp_path / "profile")
    assert pipes() - before == set()
