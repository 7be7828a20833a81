"""Recordings: every frame of one proxied connection, in one file (``kafkad proxy --record``).

Format (version 1), all integers big-endian::

    file    = MAGIC meta entry*
    MAGIC   = b"KDREC1\\n"                  (7 bytes)
    meta    = u32 length, then that many bytes of UTF-8 JSON: {"format": 1,
              "started_unix": float, "client": "ip:port", "listener": "host:port",
              "upstream": "host:port", "node_id": int | null}
    entry   = u8 kind | u64 microseconds since the connection started | u32 length | payload

Kinds (``Kind``): REQUEST, a request frame as the client sent it (without its size prefix),
forwarded upstream unless a LOCAL or NOTE entry follows it; RESPONSE, a response frame as the
upstream sent it; REWRITTEN, what the client got in place of the RESPONSE just before it
(broker addresses replaced); LOCAL, a response the proxy made up (an injected error) and the
client got instead of forwarding; NOTE, UTF-8 text: a fault applied, why the connection closed.

Frames are written whole and unchanged, so a recording holds the exact bytes both sides
exchanged (record batches included), with one exception: a SaslAuthenticate request is
written as its header only, followed by a NOTE, and SaslHandshake v0's unframed tokens only as
NOTEs of their size (a PLAIN token is a password). Each entry is one unbuffered write, so a
file can be replayed while its connection is open and a proxy killed mid-write loses at most
the entry it was writing: ``read`` stops at the first incomplete one. The golden request frames of
``tests/wire/frames`` are cut from recordings (``compat_tests/capture.py``).
"""

from __future__ import annotations

import enum
import json
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

MAGIC = b"KDREC1\n"
_ENTRY = struct.Struct(">BQI")
_LEN = struct.Struct(">I")


class Kind(enum.IntEnum):
    REQUEST = 1
    RESPONSE = 2
    REWRITTEN = 3
    LOCAL = 4
    NOTE = 5


@dataclass(frozen=True, slots=True)
class Entry:
    kind: Kind
    micros: int
    payload: bytes


class Recorder:
    """Appends entries to one connection's file; ``close`` flushes it."""

    def __init__(self, path: Path, meta: dict[str, Any]) -> None:
        self.path = path
        self._start = time.monotonic()
        self._file: IO[bytes] | None = open(path, "wb", buffering=0)  # noqa: SIM115
        text = json.dumps({"format": 1, "started_unix": time.time(), **meta}).encode()
        self._file.write(MAGIC + _LEN.pack(len(text)) + text)

    def add(self, kind: Kind, payload: bytes | bytearray | memoryview) -> None:
        if self._file is None:
            return
        micros = int((time.monotonic() - self._start) * 1_000_000)
        self._file.write(_ENTRY.pack(kind, micros, len(payload)) + payload)

    def note(self, text: str) -> None:
        self.add(Kind.NOTE, text.encode())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


@dataclass(frozen=True, slots=True)
class Recording:
    meta: dict[str, Any]
    entries: list[Entry]
    truncated: bool  # the file ended inside an entry


class RecordingError(ValueError):
    pass


def read(path: Path) -> Recording:
    data = path.read_bytes()
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 4:
        raise RecordingError(f"{path}: not a kafkad recording (no {MAGIC!r} header)")
    pos = len(MAGIC)
    (size,) = _LEN.unpack_from(data, pos)
    pos += 4
    try:
        meta = json.loads(data[pos : pos + size])
    except ValueError as exc:
        raise RecordingError(f"{path}: damaged header: {exc}") from None
    pos += size
    entries = list(_entries(data, pos))
    end = pos + sum(_ENTRY.size + len(e.payload) for e in entries)
    return Recording(meta, entries, truncated=end != len(data))


def _entries(data: bytes, pos: int) -> Iterator[Entry]:
    while pos + _ENTRY.size <= len(data):
        kind, micros, size = _ENTRY.unpack_from(data, pos)
        start = pos + _ENTRY.size
        if start + size > len(data) or kind not in Kind._value2member_map_:
            return
        yield Entry(Kind(kind), micros, data[start : start + size])
        pos = start + size
