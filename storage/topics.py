"""The broker's topics: creation, deletion, growth, lookup, and the partitions they own.

Everything here that changes topics persists through the ``Store`` before it changes the
in-memory view, so a crash never leaves a topic the store does not know about. Results that
clients see as per-topic errors are returned as ``TopicError`` values, not raised.

Creation and deletion are atomic per name: the checks and the store writes of one change run
under one lock (``_changing``), so of several concurrent creators of a name exactly one
succeeds and the rest get TOPIC_ALREADY_EXISTS, and the topic's metadata is written once, as
with Kafka's single-threaded controller. Explicit CreateTopics, Metadata auto-creation and the
coordinators' internal topics all go through ``create``.

Internal topics (``__consumer_offsets``, ``__transaction_state``) are created by
``create_internal`` with the spec their coordinator registered (``register_internal``: its
partition count and topic configs), whoever asks first: the coordinator's first write or a
Metadata request that auto-creates it (Kafka's ``AutoTopicCreationManager.creatableTopic``).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from storage.api import (
    INTERNAL_TOPICS,
    KAFKA_INTERNAL_TOPICS,
    LogConfig,
    StorageError,
    Store,
    TopicMeta,
    TopicPartition,
)
from storage.partition import Partition
from storage.topic_config import (
    check_combination,
    effective_configs,
    topic_log_config,
    validate_overrides,
)

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
log = logging.getLogger("kafkad.topics")


@dataclass(frozen=True, slots=True)
class TopicError:
    code: ErrorCode
    message: str


def topic_name_error(name: str) -> str | None:
    """Kafka's Topic.validate: why ``name`` is not a legal topic name, or None."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL.match(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'"
        )
    return None


@dataclass(frozen=True, slots=True)
class InternalTopicSpec:
    """How a coordinator wants its internal topic created."""

    partitions: int
    configs: Mapping[str, str]


@dataclass
class Topic:
    meta: TopicMeta
    partitions: list[Partition]
    # every topic config's effective value; read-only: a config change replaces the mapping
    # (``TopicManager._reconfigure``), which is what storage/log_validator.py's cache keys on
    settings: Mapping[str, str]

    def int_setting(self, name: str) -> int:
        return int(self.settings[name])

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def topic_id(self) -> uuid.UUID:
        return self.meta.topic_id

    @property
    def internal(self) -> bool:
        """Kafka's ``Topic.isInternal`` (``__share_group_state`` too)."""
        return self.meta.name in KAFKA_INTERNAL_TOPICS


class TopicManager:
    def __init__(self, store: Store, log_defaults: LogConfig, broker_values: Mapping[str, Any]):
        self.store = store
        self.log_defaults = log_defaults
        self.broker_values = broker_values
        self._topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._internal: dict[str, InternalTopicSpec] = {}
        self._changing = trio.Lock()  # one creation or deletion at a time: check + write

    def register_internal(self, name: str, partitions: int, configs: Mapping[str, str]) -> None:
        """A coordinator's internal topic: created with these partitions and configs whoever
        asks first (``create_internal``, or Metadata auto-creation)."""
        assert name in INTERNAL_TOPICS, name
        self._internal[name] = InternalTopicSpec(partitions, dict(configs))

    async def load(self) -> None:
        for meta in self.store.topics():
            if meta.name in INTERNAL_TOPICS and "cleanup.policy" not in meta.configs:
                # created before the log cleaner existed (retention.ms=-1): compact it now
                meta = replace(meta, configs={**meta.configs, "cleanup.policy": "compact"})
                await self.store.update_topic(meta)
            await self._open(meta)

    def _log_config(self, meta: TopicMeta) -> LogConfig:
        return topic_log_config(self.log_defaults, meta.configs)

    def _log_append_time(self, meta: TopicMeta) -> bool:
        kind = meta.configs.get(
            "message.timestamp.type", self.broker_values.get("log.message.timestamp.type")
        )
        return kind == "LogAppendTime"

    async def _open_partition(self, meta: TopicMeta, index: int) -> Partition:
        tp = TopicPartition(meta.name, index)
        cfg = self._log_config(meta)
        log = await self.store.open_partition(tp, cfg)
        partition = Partition(tp, meta.topic_id, log, cfg, self._log_append_time(meta))
        await partition.load_producer_state()
        return partition

    async def _open(self, meta: TopicMeta) -> Topic:
        parts = [await self._open_partition(meta, i) for i in range(meta.partitions)]
        topic = Topic(meta, parts, self._settings(meta))
        self._topics[meta.name] = topic
        self._by_id[meta.topic_id] = topic
        return topic

    # -- lookups -------------------------------------------------------------------------

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(list(self._topics.values()))

    def get(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def partition(self, topic: str, index: int) -> Partition | None:
        t = self._topics.get(topic)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    def names(self) -> list[str]:
        return sorted(self._topics)

    # -- changes -------------------------------------------------------------------------

    def check_create(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
        layout_error: TopicError | None = None,
        trusted_configs: bool = False,
    ) -> TopicError | None:
        """Everything CreateTopics checks before it creates anything, in the order of Kafka's
        ``ReplicationControlManager.createTopics``: the name (legal, not taken, no collision),
        the configs, then the layout: ``layout_error`` (the caller's verdict on a manual
        assignment) if given, else the replication factor, then the partition count.
        ``trusted_configs``: a coordinator's own configs, not checked
        (``offsets.topic.segment.bytes`` may be below the 1 MiB a client may ask for)."""
        if (msg := topic_name_error(name)) is not None:
            return TopicError(ErrorCode.invalid_topic_exception, msg)
        if name in self._topics:
            return TopicError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        folded = name.replace(".", "_")
        for other in self._topics:
            if other.replace(".", "_") == folded:
                return TopicError(
                    ErrorCode.invalid_topic_exception,
                    f"Topic '{name}' collides with existing topic: {other}",
                )
        if not trusted_configs:
            if (msg := validate_overrides(configs)) is not None:
                return TopicError(ErrorCode.invalid_config, msg)
            given = {k: v for k, v in configs.items() if v is not None}
            if (msg := check_combination(given, self.broker_values)) is not None:
                return TopicError(ErrorCode.invalid_config, msg)
        if layout_error is not None:
            return layout_error
        if replication_factor < 1:
            return TopicError(
                ErrorCode.invalid_replication_factor,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        if partitions < 1:
            return TopicError(
                ErrorCode.invalid_partitions,
                "Number of partitions was set to an invalid non-positive value.",
            )
        if replication_factor > 1:
            return TopicError(
                ErrorCode.invalid_replication_factor,
                f"Unable to replicate the partition {replication_factor} time(s): "
                "The target replication factor of "
                f"{replication_factor} cannot be reached because only 1 "
                "broker(s) are registered.",
            )
        return None

    async def create(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str | None],
        replication_factor: int = 1,
        layout_error: TopicError | None = None,
        trusted_configs: bool = False,
    ) -> Topic | TopicError:
        """Check and create a topic, atomically per name (see the module docstring)."""
        async with self._changing:
            err = self.check_create(
                name, partitions, replication_factor, configs, layout_error, trusted_configs
            )
            if err is not None:
                return err
            given = {k: v for k, v in configs.items() if v is not None}
            meta = TopicMeta(name=name, topic_id=uuid.uuid4(), partitions=partitions, configs=given)
            await self.store.create_topic(meta)
            topic = await self._open(meta)
        log.info("created topic %s with %d partition(s)", name, partitions)
        return topic

    async def auto_create(self, name: str) -> Topic | TopicError:
        """Metadata auto-creation: an internal topic with its coordinator's spec, any other
        with the broker's defaults. A topic created meanwhile by someone else is returned."""
        spec = self._internal.get(name)
        made = await self.create(
            name,
            self.broker_values["num.partitions"] if spec is None else spec.partitions,
            {} if spec is None else spec.configs,
            self.broker_values["default.replication.factor"],
            trusted_configs=spec is not None,
        )
        if isinstance(made, TopicError) and (existing := self._topics.get(name)) is not None:
            return existing
        return made

    async def create_internal(self, name: str) -> Topic:
        """The internal topic ``name`` (registered), created now if nobody has yet. Raises
        StorageError if it cannot be created."""
        assert name in self._internal, f"{name} is not registered"
        made = await self.auto_create(name)
        if isinstance(made, TopicError):
            raise StorageError(f"cannot create {name}: {made.message}")
        return made

    async def delete(self, name: str) -> TopicError | None:
        """Delete a topic, atomically per name like ``create``."""
        async with self._changing:
            topic = self._topics.pop(name, None)
            if topic is None:
                return TopicError(
                    ErrorCode.unknown_topic_or_partition,
                    "This server does not host this topic-partition.",
                )
            self._by_id.pop(topic.topic_id, None)
            for p in topic.partitions:
                p.deleted = True
                p.wake_waiters()  # long polls answer UNKNOWN_TOPIC_OR_PARTITION now (Kafka)
            await self.store.delete_topic(name)
            return None

    async def add_partitions(self, name: str, total: int) -> TopicError | None:
        """Grow a topic to ``total`` partitions, under the lock of ``create``/``delete``: a
        topic deleted or grown meanwhile is refused as Kafka's controller would, and the
        topic's metadata file is never written by two changes at once (or after a delete)."""
        async with self._changing:
            topic = self._topics.get(name)
            if topic is None:
                return TopicError(
                    ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist."
                )
            if total <= len(topic.partitions):
                return TopicError(
                    ErrorCode.invalid_partitions,
                    f"Topic currently has {len(topic.partitions)} partitions, which is "
                    f"higher than or equal to the requested {total}.",
                )
            meta = replace(topic.meta, partitions=total)
            await self.store.update_topic(meta)
            for i in range(len(topic.partitions), total):
                topic.partitions.append(await self._open_partition(meta, i))
            topic.meta = meta
            return None

    def check_alter(self, name: str, overrides: Mapping[str, str | None]) -> TopicError | None:
        """Everything AlterConfigs/IncrementalAlterConfigs check for a topic's new overrides."""
        if name not in self._topics:
            return TopicError(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist")
        if (msg := validate_overrides(overrides)) is not None:
            return TopicError(ErrorCode.invalid_config, msg)
        given = {k: v for k, v in overrides.items() if v is not None}
        if (msg := check_combination(given, self.broker_values)) is not None:
            return TopicError(ErrorCode.invalid_config, msg)
        return None

    async def alter_configs(
        self,
        name: str,
        overrides: Mapping[str, str]
        | Callable[[Mapping[str, str]], Mapping[str, str] | TopicError],
    ) -> TopicError | None:
        """Replace a topic's overrides (persisted first), then apply them to its open
        partitions: later appends, rolls, retention and cleaning use them, no restart. Under
        the lock of ``create``/``delete`` (a topic deleted meanwhile is refused). A callable
        ``overrides`` computes the new overrides from the current ones under the lock
        (IncrementalAlterConfigs: concurrent changes apply one after the other, none lost)."""
        async with self._changing:
            topic = self._topics.get(name)
            if topic is None:
                return TopicError(
                    ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist"
                )
            if callable(overrides):
                computed = overrides(topic.meta.configs)
                if isinstance(computed, TopicError):
                    return computed
                overrides = computed
            meta = replace(topic.meta, configs=dict(overrides))
            await self.store.update_topic(meta)
            topic.meta = meta
            self._reconfigure(topic)
            return None

    def set_log_defaults(self, log_defaults: LogConfig) -> None:
        """New broker-wide log defaults (dynamic broker configs): every open partition's
        config is recomputed (its topic's overrides over them) and applied at once."""
        self.log_defaults = log_defaults
        for topic in self._topics.values():
            self._reconfigure(topic)

    def _reconfigure(self, topic: Topic) -> None:
        """The topic's shown settings and its partitions' log config recomputed from its
        overrides over the broker's defaults, applied at once."""
        meta = topic.meta
        topic.settings = self._settings(meta)
        cfg = self._log_config(meta)
        for p in topic.partitions:
            p.update_config(cfg, self._log_append_time(meta))

    def _settings(self, meta: TopicMeta) -> Mapping[str, str]:
        """Every topic config's effective value: the topic's overrides over the broker's, as a
        new read-only mapping (never edited in place: see ``Topic.settings``)."""
        eff = effective_configs(meta.configs, self.broker_values)
        return MappingProxyType({k: v for k, (v, _) in eff.items()})

    async def take_snapshots(self) -> None:
        """Producer-state snapshots of every partition (clean shutdown)."""
        for topic in list(self._topics.values()):
            for p in topic.partitions:
                if not p.deleted:
                    await p.take_snapshot()

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        removed = 0
        for topic in list(self._topics.values()):
            for p in topic.partitions:
                removed += len(p.remove_expired_producers(now_ms, expiration_ms))
        return removed

    async def apply_retention(self, now_ms: int) -> int:
        deleted = 0
        for topic in list(self._topics.values()):
            for p in topic.partitions:
                if not p.deleted:
                    deleted += await p.apply_retention(now_ms)
        return deleted
