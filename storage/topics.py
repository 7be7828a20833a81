"""The broker's topics: creation, deletion, growth, lookup, and the partitions they own.

Everything here that changes topics persists through the ``Store`` before it changes the
in-memory view, so a crash never leaves a topic the store does not know about. Results that
clients see as per-topic errors are returned as ``TopicError`` values, not raised.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from kio.schema.errors import ErrorCode

from storage.api import LogConfig, Store, TopicMeta, TopicPartition
from storage.partition import Partition
from storage.topic_config import (
    check_combination,
    effective_configs,
    topic_log_config,
    validate_overrides,
)

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


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


@dataclass
class Topic:
    meta: TopicMeta
    partitions: list[Partition]
    settings: dict[str, str]  # every topic config's effective value

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
        return self.meta.name in INTERNAL_TOPICS


class TopicManager:
    def __init__(self, store: Store, log_defaults: LogConfig, broker_values: Mapping[str, Any]):
        self.store = store
        self.log_defaults = log_defaults
        self.broker_values = broker_values
        self._topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}

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
        settings = {
            k: v for k, (v, _) in effective_configs(meta.configs, self.broker_values).items()
        }
        topic = Topic(meta, parts, settings)
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
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str | None]
    ) -> TopicError | None:
        """Everything CreateTopics checks before it creates anything."""
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
        if partitions < 1:
            return TopicError(
                ErrorCode.invalid_partitions, "Number of partitions must be larger than 0."
            )
        if replication_factor < 1:
            return TopicError(
                ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0."
            )
        if replication_factor > 1:
            return TopicError(
                ErrorCode.invalid_replication_factor,
                f"Unable to replicate the partition {replication_factor} time(s): "
                "The target replication factor of "
                f"{replication_factor} cannot be reached because only 1 "
                "broker(s) are registered.",
            )
        if (msg := validate_overrides(configs)) is not None:
            return TopicError(ErrorCode.invalid_config, msg)
        given = {k: v for k, v in configs.items() if v is not None}
        if (msg := check_combination(given, self.broker_values)) is not None:
            return TopicError(ErrorCode.invalid_config, msg)
        return None

    async def create(self, name: str, partitions: int, configs: Mapping[str, str]) -> Topic:
        """Create a topic that ``check_create`` accepted."""
        meta = TopicMeta(
            name=name, topic_id=uuid.uuid4(), partitions=partitions, configs=dict(configs)
        )
        await self.store.create_topic(meta)
        return await self._open(meta)

    async def auto_create(self, name: str) -> Topic | TopicError:
        """Metadata/Produce auto-creation with the broker's defaults."""
        if (existing := self._topics.get(name)) is not None:
            return existing
        err = self.check_create(
            name,
            self.broker_values["num.partitions"],
            self.broker_values["default.replication.factor"],
            {},
        )
        if err is not None:
            return err
        return await self.create(name, self.broker_values["num.partitions"], {})

    async def delete(self, name: str) -> None:
        topic = self._topics.pop(name)
        self._by_id.pop(topic.topic_id, None)
        for p in topic.partitions:
            p.deleted = True
            p.wake_waiters()  # long polls answer UNKNOWN_TOPIC_OR_PARTITION now (Kafka)
        await self.store.delete_topic(name)

    async def add_partitions(self, name: str, total: int) -> None:
        topic = self._topics[name]
        meta = replace(topic.meta, partitions=total)
        await self.store.update_topic(meta)
        for i in range(len(topic.partitions), total):
            topic.partitions.append(await self._open_partition(meta, i))
        topic.meta = meta

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

    async def alter_configs(self, name: str, overrides: Mapping[str, str]) -> None:
        """Replace a topic's overrides (persisted first), then apply them to its open
        partitions: later appends, rolls, retention and cleaning use them, no restart."""
        topic = self._topics[name]
        meta = replace(topic.meta, configs=dict(overrides))
        await self.store.update_topic(meta)
        topic.meta = meta
        topic.settings = {
            k: v for k, (v, _) in effective_configs(meta.configs, self.broker_values).items()
        }
        cfg = self._log_config(meta)
        for p in topic.partitions:
            p.update_config(cfg, self._log_append_time(meta))

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
