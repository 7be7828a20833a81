"""``FileStore``: topics and partition logs in a directory (the file backend's ``Store``).

Theory of operation
-------------------
Layout of the data directory (Kafka's, plus one directory of topic metadata)::

    .kafkad-clean-shutdown          present only between a clean close and the next open
    __kafkad_topics/<topic>.json    {"version", "name", "topic_id", "partitions", "configs"}
    __kafkad_meta/<name>            small broker metadata blobs (``write_metadata``, atomic)
    <topic>-<p>/partition.metadata  "version: 0" / "topic_id: <base64>", as in Kafka
    <topic>-<p>/log-start-offset    "0" / offset: the checkpoint of delete_before
    <topic>-<p>/<base:020d>.log     record batches (see segment.py, index.py, scan.py)
    <topic>-<p>/<base:020d>.index   sparse offset index
    <topic>-<p>/<base:020d>.timeindex   time index
    <topic>-<p>/<offset:020d>.snapshot  producer-state snapshot (opaque here)

    kafkad.properties               the data format version; .lock: held while open (datadir.py)
    meta.properties                 cluster.id and node.id, written by the broker

Opening checks and locks the directory first (``datadir.py``): kafkad never opens, and so never
deletes anything in, a directory it did not create. At the top level, besides the names above
and our own ``<topic id hex>-<p>.deleted`` directories, a ``<name>-<p>`` directory that is not
a partition of a known topic stops start-up (listed by name, left where it is): kafkad would
use it if such a topic were created. Any other entry is logged and left alone.

A topic exists if and only if its JSON file does: creating and updating write it atomically
(tmp, fsync, rename, fsync dir). Deleting a topic first closes its logs, then renames its JSON
to ``<topic>.deleting`` (fsync: from here on the topic is gone, whatever happens next), then
renames each partition directory whose ``partition.metadata`` names the topic's id to
``<topic id hex>-<p>.deleted``, removes those, and finally the ``.deleting`` record. Opening the
store finishes any deletion that has a ``.deleting`` record and removes ``*.deleted``
directories of that shape, so a half-deleted topic never comes back. A topic file of a newer
format version, or an unreadable one, stops start-up naming the file. A partition directory
whose ``partition.metadata`` names another topic id is refused (not wiped) when opened.

Kafkad before the marker deleted the JSON first and had no ``.deleting`` record, so a crash
mid-delete left ``<topic>-<p>`` directories of a topic without JSON, which it removed at its
next open. When such a directory is adopted (``datadir.py``), directories of that shape (our
``partition.metadata``, no topic of the name) are finished as those deletions, once.

Clean shutdown: ``close`` closes every log (seal, index files, fsync), then writes the marker.
``open`` reads and removes it (fsyncing the directory before any append can happen): without
it, each partition's last segment is validated batch by batch when the partition is opened.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from storage.api import (
    LogConfig,
    PartitionLog,
    StorageError,
    TopicMeta,
    TopicPartition,
    check_metadata_name,
)
from storage.clock import wall_clock_ms
from storage.segment.commit import GroupCommit
from storage.segment.datadir import (
    IGNORED,
    MARKER,
    DataDirError,
    DataDirLock,
    describe_entries,
    open_data_dir,
)
from storage.segment.files import (
    DELETED_SUFFIX,
    TMP_SUFFIX,
    fsync_dir,
    read_if_exists,
    write_atomic,
)
from storage.segment.load import Loaded, load_partition
from storage.segment.log import FileLog

log = logging.getLogger("kafkad.storage")

CLEAN_MARKER = ".kafkad-clean-shutdown"
TOPICS_DIR = "__kafkad_topics"
META_DIR = "__kafkad_meta"
PARTITION_METADATA = "partition.metadata"
TOPIC_SUFFIX = ".json"
DELETING_SUFFIX = ".deleting"
TOPIC_FORMAT_VERSION = 0
# Top-level names of ours besides partition directories (meta.properties and its meta.tmp are
# the broker's, proxy/broker.py).
ROOT_FILES = frozenset(
    {MARKER, MARKER + TMP_SUFFIX, CLEAN_MARKER, CLEAN_MARKER + TMP_SUFFIX, TOPICS_DIR, META_DIR}
    | {"meta.properties", "meta.tmp"}
)
_PARTITION_DIR = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)$")
_DELETED_DIR = re.compile(r"^[0-9a-f]{32}-\d+" + re.escape(DELETED_SUFFIX) + "$")


def _topic_json(meta: TopicMeta) -> bytes:
    return json.dumps(
        {
            "version": TOPIC_FORMAT_VERSION,
            "name": meta.name,
            "topic_id": str(meta.topic_id),
            "partitions": meta.partitions,
            "configs": dict(meta.configs),
        },
        indent=1,
        sort_keys=True,
    ).encode()


def _parse_topic(d: dict[str, Any]) -> TopicMeta:
    return TopicMeta(d["name"], uuid.UUID(d["topic_id"]), int(d["partitions"]), d["configs"])


def _partition_metadata(topic_id: uuid.UUID) -> bytes:
    b64 = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
    return f"version: 0\ntopic_id: {b64}\n".encode()


def _read_topic_file(path: Path) -> TopicMeta:
    try:
        data = json.loads(path.read_bytes())
        version = int(data.get("version", 0))
    except (OSError, ValueError, AttributeError) as exc:
        raise DataDirError(f"corrupt topic metadata file {path}: {exc}") from None
    if version > TOPIC_FORMAT_VERSION:
        raise DataDirError(
            f"topic metadata file {path} has format version {version}; this kafkad reads "
            f"version {TOPIC_FORMAT_VERSION} only"
        )
    try:
        return _parse_topic(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise DataDirError(f"corrupt topic metadata file {path}: {exc!r}") from None


def _own_partition_dir(directory: Path, topic_id: uuid.UUID) -> bool:
    return read_if_exists(directory / PARTITION_METADATA) == _partition_metadata(topic_id)


def _partition_metadata_id(directory: Path) -> uuid.UUID | None:
    """The topic id of a ``partition.metadata`` exactly as ``_partition_metadata`` writes it."""
    try:
        data = (directory / PARTITION_METADATA).read_bytes()
        b64 = data.removeprefix(b"version: 0\ntopic_id: ").removesuffix(b"\n")
        topic_id = uuid.UUID(bytes=base64.urlsafe_b64decode(b64 + b"=="))
    except (OSError, ValueError):
        return None
    return topic_id if _partition_metadata(topic_id) == data else None


def _finish_legacy_deletions(root: Path) -> None:
    """Blocking, when a kafkad directory from before the marker is adopted: that kafkad deleted
    a topic by removing its JSON first, then its partition directories, and a crash in between
    left directories of a topic without JSON, which it removed at its next open. Do the same
    for such directories whose ``partition.metadata`` is ours and names no topic of the store:
    rename them to ``<topic id hex>-<p>.deleted``, which ``_load_root`` removes."""
    names = set()
    topics_dir = root / TOPICS_DIR
    for path in topics_dir.iterdir():
        if path.suffix == TOPIC_SUFFIX:
            names.add(_read_topic_file(path).name)
    renamed = False
    for path in sorted(root.iterdir()):
        match = _PARTITION_DIR.match(path.name)
        if match is None or match["topic"] in names or not path.is_dir():
            continue
        topic_id = _partition_metadata_id(path)
        if topic_id is None:
            continue
        log.warning(
            "data dir %s: removing %s, left by an older kafkad's interrupted deletion of topic "
            "%s (id %s)",
            root,
            path.name,
            match["topic"],
            topic_id,
        )
        path.rename(root / f"{topic_id.hex}-{match['partition']}{DELETED_SUFFIX}")
        renamed = True
    if renamed:
        fsync_dir(root)


@dataclass(frozen=True)
class OpenedRoot:
    """A checked and locked data directory and what ``FileStore`` needs from it."""

    root: Path
    clean: bool
    topics: dict[str, TopicMeta]
    lock: DataDirLock


def _open_root(root: Path) -> OpenedRoot:
    """Blocking: check and lock the directory, read and remove the clean marker, load topics,
    finish interrupted topic deletions. Releases the lock if it fails."""
    lock = open_data_dir(root, _finish_legacy_deletions)
    try:
        clean, topics = _load_root(root)
    except BaseException:
        lock.release()
        raise
    return OpenedRoot(root, clean, topics, lock)


async def open_root(root: Path) -> OpenedRoot:
    """``_open_root`` in a worker thread (outside any nursery, so that its ``DataDirError``
    reaches the caller as itself, not inside an exception group)."""
    return await trio.to_thread.run_sync(_open_root, root)


def _load_root(root: Path) -> tuple[bool, dict[str, TopicMeta]]:
    topics_dir = root / TOPICS_DIR
    topics_dir.mkdir(exist_ok=True)
    meta_dir = root / META_DIR
    meta_dir.mkdir(exist_ok=True)
    for path in meta_dir.iterdir():
        if path.name.endswith(TMP_SUFFIX):
            path.unlink()  # an interrupted write_metadata; every name in here is ours
    marker = root / CLEAN_MARKER
    clean = marker.exists()
    topics: dict[str, TopicMeta] = {}
    deleting: list[tuple[Path, TopicMeta]] = []
    for path in topics_dir.iterdir():
        if path.name.endswith(TOPIC_SUFFIX + TMP_SUFFIX):
            path.unlink()
        elif path.suffix == TOPIC_SUFFIX:
            meta = _read_topic_file(path)
            topics[meta.name] = meta
        elif path.suffix == DELETING_SUFFIX:
            deleting.append((path, _read_topic_file(path)))
    for path, meta in deleting:  # a delete that crashed after its commit point
        _remove_partition_dirs(root, meta)
        path.unlink()
    unexpected: list[str] = []
    strangers: list[str] = []
    for path in root.iterdir():
        name = path.name
        if name in ROOT_FILES or name in IGNORED:
            continue
        if path.is_dir() and _DELETED_DIR.match(name):
            shutil.rmtree(path)  # renamed by _remove_partition_dirs: ours
            continue
        match = _PARTITION_DIR.match(name)
        known = topics.get(match["topic"]) if match else None
        if match is None:
            strangers.append(name)  # kafkad never uses such a name: harmless where it is
        elif not (known and path.is_dir() and int(match["partition"]) < known.partitions):
            unexpected.append(name)  # a partition-shaped name kafkad might use one day
    if unexpected:
        raise DataDirError(
            f"data dir {root} holds partition directories of topics it does not have (not "
            f"created by kafkad, or left by an older kafkad's interrupted topic deletion): "
            f"{describe_entries(root, unexpected)}; move them away to start"
        )
    if strangers:
        log.warning(
            "data dir %s: leaving alone what kafkad did not create: %s",
            root,
            describe_entries(root, strangers),
        )
    if clean:
        marker.unlink()
    fsync_dir(root)
    return clean, topics


def _prepare_partition_dir(directory: Path, topic_id: uuid.UUID) -> None:
    """Blocking: make ``directory`` the home of this topic's partition."""
    meta = directory / PARTITION_METADATA
    wanted = _partition_metadata(topic_id)
    if meta.exists() and meta.read_bytes() != wanted:
        raise DataDirError(
            f"{meta} names another topic id than {topic_id}: not removing it, move it away"
        )
    if not meta.exists():
        new_dir = not directory.exists()
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(meta, wanted)
        if new_dir:
            fsync_dir(directory.parent)


def _remove_partition_dirs(root: Path, meta: TopicMeta) -> None:
    """Blocking: rename this topic's partition directories (those whose partition.metadata
    names its id, and those whose creation a crash cut before their partition.metadata was in
    place: empty but for its tmp file) to ``<id hex>-<p>.deleted``, then remove them."""
    doomed = []
    for p in range(meta.partitions):
        directory = root / f"{meta.name}-{p}"
        if directory.is_dir() and (
            _own_partition_dir(directory, meta.topic_id)
            or set(os.listdir(directory)) <= {PARTITION_METADATA + TMP_SUFFIX}
        ):
            target = root / f"{meta.topic_id.hex}-{p}{DELETED_SUFFIX}"
            directory.rename(target)
            doomed.append(target)
    fsync_dir(root)
    for target in doomed:
        shutil.rmtree(target)


def _delete_topic_files(root: Path, meta: TopicMeta) -> None:
    """Blocking: renaming the JSON to ``<topic>.deleting`` is the commit point; then the
    partition directories go, then the record of the deletion."""
    path = root / TOPICS_DIR / f"{meta.name}{TOPIC_SUFFIX}"
    record = path.with_suffix(DELETING_SUFFIX)
    path.rename(record)
    fsync_dir(path.parent)
    _remove_partition_dirs(root, meta)
    record.unlink()
    fsync_dir(path.parent)


class FileStore:
    def __init__(
        self,
        root: Path,
        nursery: trio.Nursery,
        clock: Callable[[], int],
        clean: bool,
        topics: dict[str, TopicMeta],
        lock: DataDirLock,
    ) -> None:
        self.root = root
        self._dir_lock = lock
        self.clean_at_open = clean
        self._nursery = nursery
        self._clock = clock
        self._topics = topics
        self._logs: dict[TopicPartition, FileLog] = {}
        self._commit = GroupCommit()
        self._open_lock = trio.Lock()
        self._closed = False

    @classmethod
    async def open(
        cls, root: Path, nursery: trio.Nursery, clock: Callable[[], int] | None = None
    ) -> FileStore:
        return cls.from_root(await open_root(root), nursery, clock)

    @classmethod
    def from_root(
        cls, opened: OpenedRoot, nursery: trio.Nursery, clock: Callable[[], int] | None = None
    ) -> FileStore:
        o = opened
        return cls(o.root, nursery, clock or wall_clock_ms, o.clean, o.topics, o.lock)

    @property
    def group_commit(self) -> GroupCommit:
        return self._commit

    # -- topics ----------------------------------------------------------------------------

    def topics(self) -> list[TopicMeta]:
        return sorted(self._topics.values(), key=lambda m: m.name)

    async def _write_topic(self, meta: TopicMeta) -> None:
        path = self.root / TOPICS_DIR / f"{meta.name}.json"
        try:
            await trio.to_thread.run_sync(write_atomic, path, _topic_json(meta))
        except OSError as exc:
            raise StorageError(f"cannot persist topic {meta.name}: {exc}") from exc
        self._topics[meta.name] = meta

    async def create_topic(self, meta: TopicMeta) -> None:
        if meta.name in self._topics:
            raise ValueError(f"topic {meta.name} already exists")
        await self._write_topic(meta)

    async def update_topic(self, meta: TopicMeta) -> None:
        old = self._topics.get(meta.name)
        if old is None:
            raise ValueError(f"unknown topic {meta.name}")
        if old.topic_id != meta.topic_id:
            raise ValueError(f"topic {meta.name} has id {old.topic_id}, not {meta.topic_id}")
        await self._write_topic(meta)

    async def delete_topic(self, name: str) -> None:
        async with self._open_lock:  # no partition of it is being opened meanwhile
            meta = self._topics.get(name)
            if meta is None:
                raise ValueError(f"unknown topic {name}")
            for tp in [tp for tp in self._logs if tp.topic == name]:
                await self._logs[tp].discard()
            del self._topics[name]
            try:
                await trio.to_thread.run_sync(_delete_topic_files, self.root, meta)
            except OSError as exc:
                raise StorageError(f"deleting topic {name}: {exc}") from exc

    # -- broker metadata -------------------------------------------------------------------

    async def read_metadata(self, name: str) -> bytes | None:
        check_metadata_name(name)
        try:
            return await trio.to_thread.run_sync(read_if_exists, self.root / META_DIR / name)
        except OSError as exc:
            raise StorageError(f"cannot read metadata {name}: {exc}") from exc

    async def write_metadata(self, name: str, data: bytes) -> None:
        check_metadata_name(name)
        path = self.root / META_DIR / name
        try:
            await trio.to_thread.run_sync(write_atomic, path, data)
        except OSError as exc:
            raise StorageError(f"cannot persist metadata {name}: {exc}") from exc

    # -- partitions ------------------------------------------------------------------------

    async def open_partition(self, tp: TopicPartition, config: LogConfig) -> PartitionLog:
        async with self._open_lock:
            if self._closed:
                raise StorageError("store is closed")
            meta = self._topics.get(tp.topic)
            if meta is None or not 0 <= tp.partition < meta.partitions:
                raise ValueError(f"no partition {tp}")
            if (existing := self._logs.get(tp)) is not None:
                return existing
            directory = self.root / str(tp)

            def load() -> Loaded:
                _prepare_partition_dir(directory, meta.topic_id)
                return load_partition(directory, config.index_interval_bytes, self.clean_at_open)

            try:
                loaded = await trio.to_thread.run_sync(load)
            except OSError as exc:
                raise StorageError(f"cannot open {tp}: {exc}") from exc
            log = FileLog(
                tp,
                directory,
                config,
                loaded,
                commit=self._commit,
                spawn=self._nursery.start_soon,
                clock=self._clock,
                on_close=self._forget,
            )
            self._logs[tp] = log
            return log

    def _forget(self, log: FileLog) -> None:
        if self._logs.get(log.tp) is log:
            del self._logs[log.tp]

    # -- closing ---------------------------------------------------------------------------

    async def close(self) -> None:
        """Close every log; write the clean-shutdown marker if all of them closed cleanly."""
        if self._closed:
            return
        self._closed = True
        try:
            clean = True
            for log in list(self._logs.values()):
                try:
                    await log.close()
                except StorageError:
                    clean = False
                clean = clean and not log.failed
            if clean:
                marker = self.root / CLEAN_MARKER
                await trio.to_thread.run_sync(write_atomic, marker, b"")
        finally:
            self._dir_lock.release()

    def abandon(self) -> None:
        """Simulate ``kill -9`` (tests): close fds, write nothing, leave no marker."""
        self._closed = True
        for log in list(self._logs.values()):
            log.abandon()
        self._dir_lock.release()  # as the kernel does for a dead process
