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

Other files there (``meta.properties``, written by the broker) are left alone.

A topic exists if and only if its JSON file does: creating and updating write it atomically
(tmp, fsync, rename, fsync dir). Deleting a topic first closes its logs, then removes the JSON
(fsync: from here on the topic is gone, whatever happens next), then renames each partition
directory to ``<topic id hex>-<p>.deleted`` and removes it. Opening the store removes any
``*.deleted`` directory and any partition directory whose topic has no JSON (a delete that
crashed midway), so a half-deleted topic never comes back. A partition directory whose
``partition.metadata`` names another topic id (an older topic of the same name) is wiped
before use.

Clean shutdown: ``close`` closes every log (seal, index files, fsync), then writes the marker.
``open`` reads and removes it (fsyncing the directory before any append can happen): without
it, each partition's last segment is validated batch by batch when the partition is opened.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

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
from storage.segment.files import (
    DELETED_SUFFIX,
    TMP_SUFFIX,
    fsync_dir,
    read_if_exists,
    write_atomic,
)
from storage.segment.load import Loaded, load_partition
from storage.segment.log import FileLog

CLEAN_MARKER = ".kafkad-clean-shutdown"
TOPICS_DIR = "__kafkad_topics"
META_DIR = "__kafkad_meta"
PARTITION_METADATA = "partition.metadata"
_PARTITION_DIR = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)$")


def _topic_json(meta: TopicMeta) -> bytes:
    return json.dumps(
        {
            "version": 0,
            "name": meta.name,
            "topic_id": str(meta.topic_id),
            "partitions": meta.partitions,
            "configs": dict(meta.configs),
        },
        indent=1,
        sort_keys=True,
    ).encode()


def _parse_topic(data: bytes) -> TopicMeta:
    d = json.loads(data)
    return TopicMeta(d["name"], uuid.UUID(d["topic_id"]), int(d["partitions"]), d["configs"])


def _partition_metadata(topic_id: uuid.UUID) -> bytes:
    b64 = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
    return f"version: 0\ntopic_id: {b64}\n".encode()


def _open_root(root: Path) -> tuple[bool, dict[str, TopicMeta]]:
    """Blocking: read and remove the clean marker, load topics, remove half-deleted data."""
    root.mkdir(parents=True, exist_ok=True)
    topics_dir = root / TOPICS_DIR
    topics_dir.mkdir(exist_ok=True)
    meta_dir = root / META_DIR
    meta_dir.mkdir(exist_ok=True)
    for path in meta_dir.iterdir():
        if path.name.endswith(TMP_SUFFIX):
            path.unlink()
    marker = root / CLEAN_MARKER
    clean = marker.exists()
    topics: dict[str, TopicMeta] = {}
    for path in topics_dir.iterdir():
        if path.name.endswith(TMP_SUFFIX):
            path.unlink()
        elif path.suffix == ".json":
            meta = _parse_topic(path.read_bytes())
            topics[meta.name] = meta
    for path in root.iterdir():
        match = _PARTITION_DIR.match(path.name)
        if path.is_dir() and (
            path.name.endswith(DELETED_SUFFIX)
            or (
                match is not None
                and match["topic"] not in topics
                and (path / PARTITION_METADATA).exists()
            )
        ):
            shutil.rmtree(path)
    if clean:
        marker.unlink()
    fsync_dir(root)
    return clean, topics


def _prepare_partition_dir(directory: Path, topic_id: uuid.UUID) -> None:
    """Blocking: make ``directory`` the home of this topic's partition."""
    meta = directory / PARTITION_METADATA
    wanted = _partition_metadata(topic_id)
    if meta.exists() and meta.read_bytes() != wanted:
        shutil.rmtree(directory)  # left over from an earlier topic of the same name
    if not meta.exists():
        new_dir = not directory.exists()
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(meta, wanted)
        if new_dir:
            fsync_dir(directory.parent)


def _delete_topic_files(root: Path, meta: TopicMeta) -> None:
    """Blocking: the JSON goes first (the commit point), then the partition directories."""
    path = root / TOPICS_DIR / f"{meta.name}.json"
    path.unlink(missing_ok=True)
    fsync_dir(path.parent)
    doomed = []
    for p in range(meta.partitions):
        directory = root / f"{meta.name}-{p}"
        if directory.exists():
            target = root / f"{meta.topic_id.hex}-{p}{DELETED_SUFFIX}"
            directory.rename(target)
            doomed.append(target)
    fsync_dir(root)
    for target in doomed:
        shutil.rmtree(target)


class FileStore:
    def __init__(
        self,
        root: Path,
        nursery: trio.Nursery,
        clock: Callable[[], int],
        clean: bool,
        topics: dict[str, TopicMeta],
    ) -> None:
        self.root = root
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
        clean, topics = await trio.to_thread.run_sync(_open_root, root)
        return cls(root, nursery, clock or wall_clock_ms, clean, topics)

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

    def open_logs(self) -> list[FileLog]:
        return list(self._logs.values())

    # -- closing ---------------------------------------------------------------------------

    async def close(self) -> None:
        """Close every log; write the clean-shutdown marker if all of them closed cleanly."""
        if self._closed:
            return
        self._closed = True
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

    def abandon(self) -> None:
        """Simulate ``kill -9`` (tests): close fds, write nothing, leave no marker."""
        self._closed = True
        for log in list(self._logs.values()):
            log.abandon()
