"""The default clock of both backends (segment age for rolls). Tests pass their own."""

from __future__ import annotations

import time


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000
