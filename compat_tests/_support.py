"""What every client module produces and expects back, so the clients are held to one standard."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

# Another broker to test instead of a kafkad subprocess (e.g. Apache Kafka), as host:port.
EXTERNAL = os.environ.get("KAFKAD_BOOTSTRAP")

# A day ago: inside any broker's accepted timestamp window, and far from "now".
BASE_TS = (int(time.time()) - 86_400) * 1000


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


def sample_records(tag: str, base_ts: int = BASE_TS) -> list[Rec]:
    """Keys, a null key, a null value, headers (none, several, a repeated name, an empty
    value), non-ASCII bytes, and strictly increasing explicit timestamps 1 s apart."""
    t = tag.encode()
    recs = [
        Rec(b"k0-" + t, b"v0-" + t, (("h1", b"a"), ("h2", b"bb")), 0),
        Rec(None, b"no-key-" + t, (), 0),
        Rec(b"tombstone-" + t, None, (("h", b""),), 0),
        Rec(b"k3-" + t, b"\x00\xff\xfe binary " + t, (("dup", b"1"), ("dup", b"2")), 0),
        Rec(b"", b"", (), 0),
        Rec(b"k5-" + t, ("ünïcødé " + tag).encode() * 50, (("utf8-ß", b"\xc3\x9f"),), 0),
    ]
    return [Rec(r.key, r.value, r.headers, base_ts + 1000 * i) for i, r in enumerate(recs)]


def wait_for(fn: Callable[[], T | None], timeout: float, what: str, step: float = 0.05) -> T:
    """Poll fn until it returns something other than None/False, or fail after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        result = fn()
        if result is not None and result is not False:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(step)
