"""The data directory's identity and lock: which directories the file backend may open.

Theory of operation
-------------------
kafkad deletes files at open (half-deleted topics, leftovers of interrupted writes), so it must
only ever open a directory it owns. Like Kafka's ``meta.properties`` check and ``.lock``
(LogManager.lockLogDirs), opening goes:

1. Inspect, read-only. A missing directory is created; an empty one (ignoring ``.lock`` and a
   file system's ``lost+found``) is new. A directory with ``kafkad.properties`` is kafkad's if
   its ``format.version`` is one this kafkad understands; a newer or unreadable version is
   refused. A directory without the marker but with ``__kafkad_topics/`` was written by a
   kafkad from before the marker existed and is adopted (the marker is written after the lock
   is taken, see 4). Anything else (an Apache Kafka log dir, a home directory) is refused, naming
   what was found. Nothing is created in a refused directory.
2. Lock: ``.lock`` is opened (created if needed) and ``flock``-ed exclusively, without waiting;
   the holder writes its pid into it. A second broker on the same directory is refused, naming
   the directory and the holder's pid. The kernel drops the lock when the process dies, so a
   ``kill -9`` never leaves a stale lock behind. (Deviation: Kafka's FileLock is a POSIX
   ``fcntl`` lock; ``flock`` also refuses a second store in the same process, which the tests
   use, and kafkad never opens a Kafka directory, so the two never need to see each other.)
3. Adopt: in a directory from before the marker, ``adopt`` (the store's) finishes what that
   older kafkad would have finished at its next open (its interrupted topic deletions).
4. Mark: a new or adopted directory gets ``kafkad.properties`` (written atomically).

What the store then finds at the top level must be one of its own names (``OWN_ENTRIES``, the
partition directories of known topics, its own ``<topic id hex>-<p>.deleted`` directories);
anything else stops start-up with every such name listed, and is left in place.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable
from pathlib import Path

from storage.api import StorageError
from storage.segment.files import write_atomic

MARKER = "kafkad.properties"
LOCK_FILE = ".lock"
FORMAT_VERSION = 1
LEGACY_SIGNATURE = "__kafkad_topics"  # every kafkad before the marker created it at open
IGNORED = frozenset({LOCK_FILE, "lost+found"})
_MARKER_TEXT = (
    "# kafkad data directory: kafkad refuses directories without this file.\n"
    f"format.version={FORMAT_VERSION}\n"
).encode()
_SHOWN = 8  # how many unexpected names a message lists


class DataDirError(StorageError):
    """The data directory cannot be used; the message is one line for the user."""


def describe_entries(root: Path, names: list[str]) -> str:
    shown = [n + "/" if (root / n).is_dir() else n for n in sorted(names)[:_SHOWN]]
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return ", ".join(shown) + more


def _read_format_version(root: Path) -> int:
    path = root / MARKER
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataDirError(f"cannot read {path}: {exc}") from None
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "format.version":
            with contextlib.suppress(ValueError):
                return int(value.strip())
    raise DataDirError(f"{path} has no readable format.version: not a kafkad data directory file")


def _cluster_id(path: Path) -> str:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        for line in path.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "cluster.id":
                return f" of cluster.id {value.strip()}"
    return ""


def inspect(root: Path) -> bool:
    """Blocking, read-only: True if ``root`` is kafkad's already (marked), False if it is new,
    empty or a kafkad directory from before the marker; raises ``DataDirError`` otherwise."""
    if not root.exists():
        try:
            root.mkdir(parents=True)
        except OSError as exc:
            raise DataDirError(f"cannot create data dir {root}: {exc.strerror or exc}") from None
        return False
    if not root.is_dir():
        raise DataDirError(f"data dir {root} exists and is not a directory")
    try:
        names = [n for n in os.listdir(root) if n not in IGNORED]
    except OSError as exc:
        raise DataDirError(f"cannot read data dir {root}: {exc.strerror or exc}") from None
    if MARKER in names:
        version = _read_format_version(root)
        if version != FORMAT_VERSION:
            raise DataDirError(
                f"data dir {root} has kafkad data format {version}; this kafkad reads format "
                f"{FORMAT_VERSION} only"
            )
        return True
    if not names or (root / LEGACY_SIGNATURE).is_dir():
        return False
    hint = ""
    if "meta.properties" in names:
        cluster = _cluster_id(root / "meta.properties")
        hint = (
            f" (meta.properties{cluster} without kafkad.properties: an Apache Kafka log directory?)"
        )
    raise DataDirError(
        f"data dir {root} is not empty and is not a kafkad data directory{hint}: found "
        f"{describe_entries(root, names)}; refusing to touch it, use an empty directory"
    )


class DataDirLock:
    """An exclusive ``flock`` on ``<root>/.lock``, held until ``release``."""

    def __init__(self, root: Path) -> None:
        path = root / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise DataDirError(f"cannot create lock file {path}: {exc.strerror or exc}") from None
        try:
            self._lock(fd, root, path)
        except BaseException:  # the fd (and with it any lock taken) goes with the failure
            os.close(fd)
            raise
        self._fd = fd

    @staticmethod
    def _lock(fd: int, root: Path, path: Path) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            except OSError:
                holder = ""
            pid = f"pid {holder}" if holder.isdigit() else "another process"
            raise DataDirError(
                f"data dir {root} is locked by {pid} ({path}): is another kafkad using it?"
            ) from None
        except OSError as exc:  # e.g. ENOLCK: a file system without locks
            raise DataDirError(f"cannot lock {path}: {exc.strerror or exc}") from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as exc:  # e.g. a read-only or full file system
            raise DataDirError(f"cannot write {path}: {exc.strerror or exc}") from None

    def release(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)  # drops the flock; the pid stays behind, harmlessly


def open_data_dir(root: Path, adopt: Callable[[Path], None]) -> DataDirLock:
    """Blocking: inspect, lock, adopt and mark ``root`` (steps 1-4 above)."""
    marked = inspect(root)
    lock = DataDirLock(root)
    try:
        if not marked and (root / LEGACY_SIGNATURE).is_dir():
            adopt(root)
        if not marked:
            try:
                write_atomic(root / MARKER, _MARKER_TEXT)
            except OSError as exc:
                raise DataDirError(f"cannot write {root / MARKER}: {exc.strerror or exc}") from None
    except BaseException:
        lock.release()
        raise
    return lock
