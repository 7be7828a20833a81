"""``FaultyDisk``: the file backend's disk calls (``storage/segment/osio.py``) with failures
on request: the Nth ``pwrite``/``write``/``ftruncate``/``fsync``/``fdatasync`` from now fails
with EIO, ENOSPC..., once or until ``clear()`` (a disk that stays full). A ``pwrite`` can
first write part of its data, as a real disk filling up mid-write does."""

from __future__ import annotations

import errno
import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from storage.segment import osio


@dataclass
class _Rule:
    at: int  # the call number (per op) that fails first
    err: int
    persistent: bool
    partial: int  # pwrite: bytes written before failing


class FaultyDisk(osio.Ops):
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self._rules: dict[str, _Rule] = {}

    def fail(
        self,
        op: str,
        *,
        nth: int = 1,
        err: int = errno.EIO,
        persistent: bool = False,
        partial: int = 0,
    ) -> None:
        """Fail the ``nth`` call of ``op`` from now (and every later one if ``persistent``)."""
        self._rules[op] = _Rule(self.calls[op] + nth, err, persistent, partial)

    def clear(self) -> None:
        self._rules.clear()

    def _check(self, op: str) -> _Rule | None:
        self.calls[op] += 1
        rule = self._rules.get(op)
        n = self.calls[op]
        if rule is None or n < rule.at or (n > rule.at and not rule.persistent):
            return None
        self.failures[op] += 1
        return rule

    def _raise(self, rule: _Rule, op: str) -> None:
        raise OSError(rule.err, f"{os.strerror(rule.err)} (injected into {op})")

    def pwrite(self, fd: int, data: osio.Buffer, pos: int) -> int:
        rule = self._check("pwrite")
        if rule is None:
            return super().pwrite(fd, data, pos)
        if rule.partial:
            super().pwrite(fd, memoryview(data)[: rule.partial], pos)
        self._raise(rule, "pwrite")
        raise AssertionError("unreachable")

    def write(self, fd: int, data: osio.Buffer) -> int:
        if rule := self._check("write"):
            self._raise(rule, "write")
        return super().write(fd, data)

    def ftruncate(self, fd: int, size: int) -> None:
        if rule := self._check("ftruncate"):
            self._raise(rule, "ftruncate")
        super().ftruncate(fd, size)

    def fsync(self, fd: int) -> None:
        if rule := self._check("fsync"):
            self._raise(rule, "fsync")
        super().fsync(fd)

    def fdatasync(self, fd: int) -> None:
        if rule := self._check("fdatasync"):
            self._raise(rule, "fdatasync")
        super().fdatasync(fd)


@contextmanager
def faulty_disk() -> Iterator[FaultyDisk]:
    disk = FaultyDisk()
    old = osio.install(disk)
    try:
        yield disk
    finally:
        osio.install(old)
