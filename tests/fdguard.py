"""A diagnostic pytest plugin: catch code that closes, writes or reads a file descriptor it no
longer owns (``-p tests.fdguard``).

PySpark's JVM exits when its stdin pipe, held by the pytest process, reaches EOF: one stray
``os.close`` of that number by code running later in the same process (a test, a stock client,
an in-process broker) does it. After every test this plugin fills each free fd number below
``FDGUARD_BELOW`` (default 256) with a sentinel, one end of a socket pair whose other
end it keeps far above; before the next test's teardown ends it checks that every sentinel is
still its own socket with nothing written to it. A number freed by one test and touched later
by code that kept it (a close, a write) is reported with the test during which it happened, as
a failure of that test. Numbers a test itself opens and closes are not watched.
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Generator

import pytest

BELOW = int(os.environ.get("FDGUARD_BELOW", "256"))
FAR = 4096  # the kept ends live from here up

# sentinel fd -> (its inode, the kept end's fd)
_sentinels: dict[int, tuple[int, int]] = {}


def _free(fd: int) -> bool:
    try:
        fcntl.fcntl(fd, fcntl.F_GETFD)
    except OSError:
        return True
    return False


def _fill() -> None:
    for fd in range(3, BELOW):
        if fd in _sentinels or not _free(fd):
            continue
        a, b = socket.socketpair()
        kept = fcntl.fcntl(b.fileno(), fcntl.F_DUPFD_CLOEXEC, FAR)
        b.close()
        if a.fileno() != fd:  # someone else's thread took it meanwhile: leave it
            a.close()
            os.close(kept)
            continue
        a.detach()
        os.set_blocking(kept, False)
        _sentinels[fd] = (os.fstat(fd).st_ino, kept)


def _check() -> list[str]:
    problems = []
    for fd, (ino, kept) in list(_sentinels.items()):
        try:
            same = os.fstat(fd).st_ino == ino
        except OSError:
            same = False
        try:
            written = os.read(kept, 4096)
        except BlockingIOError:
            written = None
        if not same or written == b"":
            problems.append(f"fd {fd} was closed (or replaced) by someone who did not own it")
            _sentinels.pop(fd)
            os.close(kept)
        elif written:
            problems.append(f"fd {fd} was written by someone who did not own it: {written[:80]!r}")
    return problems


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    result = yield
    problems = _check()
    _fill()
    if problems:
        pytest.fail(f"fdguard, during or after {item.nodeid}: " + "; ".join(problems))
    return result
