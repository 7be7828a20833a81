"""The group coordinator's shared parts: its state, the ``__consumer_offsets`` topic, parked
requests. ``coordinator.group.runtime`` explains how they work together (theory of operation);
``OffsetsApi`` (coordinator/group/offsets_api.py) and ``GroupCoordinator`` build on this."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from coordinator.consumer_group.assignors import assignor_names
from coordinator.consumer_group.heartbeat import ConsumerGroupConfig
from coordinator.consumer_group.model import ConsumerGroup, ConsumerGroupState, TopicInfo
from coordinator.consumer_group.offsets import validate_offset_commit, validate_offset_fetch
from coordinator.consumer_group.records import (
    CONSUMER_GROUP_TYPES,
    ConsumerRecordError,
    record_type,
)
from coordinator.consumer_group.records import replay as replay_consumer_record
from coordinator.group.classic import (
    ClassicGroup,
    GroupConfig,
    JoinResult,
    SyncResult,
)
from coordinator.group.group_record import group_from_value, group_value
from coordinator.group.migration import MigrationPolicy
from coordinator.group.offsets import OffsetsStore, Record
from coordinator.group.offsets_log import OFFSETS_TOPIC, replay_partition
from coordinator.group.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    RecordFormatError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
)
from coordinator.group.state import GroupState
from coordinator.internal_topic import InternalTopic
from coordinator.placement import partition_for
from storage.api import InternalTopics, PartitionWriter, StorageError

log = logging.getLogger("kafkad.group")


OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "1048576",  # offsets.topic.segment.bytes (Kafka: 100 MiB)
}
E = ErrorCode


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    protocol_type: str
    state: GroupState | ConsumerGroupState
    group_type: str = "classic"  # or "consumer" (KIP-848)


class GroupReplaced(StorageError):
    """A classic group's record was not written: the group is no longer the one its id
    names (converted to a consumer group, or deleted, while the write waited for the lock);
    its record after the conversion's would revive it at the next load."""


class GroupCoordinatorBase:
    def __init__(
        self,
        topics: InternalTopics,
        values: Mapping[str, Any],
        wall_ms: Callable[[], int],
    ) -> None:
        self.topics = topics
        self.num_partitions: int = values["offsets.topic.num.partitions"]
        self.topic_configs = {
            **OFFSETS_TOPIC_CONFIGS,
            "segment.bytes": str(values.get("offsets.topic.segment.bytes", 1048576)),
        }
        self.offsets_topic = InternalTopic(
            topics, OFFSETS_TOPIC, self.num_partitions, self.topic_configs
        )
        self.config = GroupConfig(
            initial_rebalance_delay_ms=values["group.initial.rebalance.delay.ms"],
            min_session_timeout_ms=values["group.min.session.timeout.ms"],
            max_session_timeout_ms=values["group.max.session.timeout.ms"],
            max_size=values["group.max.size"],
        )
        self.offsets_retention_ms: int = values.get("offsets.retention.minutes", 10080) * 60_000
        self.offsets_retention_check_ms: int = values.get(
            "offsets.retention.check.interval.ms", 600_000
        )
        self.wall_ms = wall_ms
        self.groups: dict[str, ClassicGroup] = {}
        # KIP-848 consumer groups (coordinator/group/consumer_api.py), their own namespace
        # next to the classic groups: a group id is in at most one of the two
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.rebalance_protocols: tuple[str, ...] = tuple(
            values.get("group.coordinator.rebalance.protocols", "classic,consumer").split(",")
        )
        self.consumer_config = ConsumerGroupConfig(
            heartbeat_interval_ms=values.get("group.consumer.heartbeat.interval.ms", 5000),
            session_timeout_ms=values.get("group.consumer.session.timeout.ms", 45000),
            assignors=assignor_names(values.get("group.consumer.assignors", "uniform,range")),
            max_size=values.get("group.consumer.max.size", 2**31 - 1),
            regex_refresh_interval_ms=values.get(
                "group.consumer.regex.refresh.interval.ms", 600_000
            ),
        )
        # group.consumer.migration.policy (coordinator/group/migration.py)
        self.migration_policy = MigrationPolicy.parse(
            values.get("group.consumer.migration.policy", "bidirectional")
        )
        # the non-internal topics as the consumer groups see them (set by the broker)
        self.topic_view: Callable[[], Mapping[str, TopicInfo]] = dict
        self.offsets = OffsetsStore()
        self.loaded = trio.Event()
        self._wake = trio.Event()
        self._write_lock = trio.Lock()
        self._mailbox: dict[tuple[str, str, str], JoinResult | SyncResult] = {}
        self._events: dict[tuple[str, str, str], trio.Event] = {}
        self._closing = False

    @staticmethod
    def now_ms() -> int:
        return int(trio.current_time() * 1000)

    async def load(self) -> None:
        if partitions := self.offsets_topic.partitions():
            for p in partitions:
                await self._replay_partition(p)
            log.info("loaded %d group(s) from %s", len(self.groups), OFFSETS_TOPIC)
        self.loaded.set()

    async def _replay_partition(self, p: PartitionWriter) -> None:
        await replay_partition(
            p,
            self.replay,
            lambda producer_id, commit: self._complete_txn(p, producer_id, commit),
        )

    def replay(self, key: bytes, value: bytes | None, offset: int, producer_id: int = -1) -> None:
        """Apply one record of the offsets topic (at load, and live for offset records)."""
        try:
            k = decode_key(key)
            if k is None and record_type(key) in CONSUMER_GROUP_TYPES:
                replay_consumer_record(self.consumer_groups, key, value)
            elif isinstance(k, OffsetCommitKey):
                v = None if value is None else decode_offset_commit_value(value)
                if v is not None and k.group not in self.groups and not self._is_consumer(k.group):
                    # a simple group, also for a transactional offset (Kafka's replay), so a
                    # group with only pending offsets exists after a restart as it did live,
                    # and DeleteGroups can still tombstone them
                    self.groups[k.group] = ClassicGroup(k.group, self.config)
                if producer_id >= 0 and v is not None:
                    self.offsets.replay_pending(producer_id, k, v, offset)
                    return
                self.offsets.replay(k, v, offset)
            elif isinstance(k, GroupMetadataKey):
                if value is None:
                    # the group's record only (Kafka's replay of a group tombstone): its
                    # committed and pending transactional offsets have their own tombstones
                    # (DeleteGroups writes them first), and a group converted to a consumer
                    # group (online upgrade, or an Empty group replaced) keeps both
                    self.groups.pop(k.group, None)
                else:
                    gv = decode_group_metadata_value(value)
                    g = group_from_value(k.group, gv, self.config, self.now_ms())
                    if gv.current_state_timestamp >= 0:  # wall clock -> the group's monotonic
                        shift = self.wall_ms() - self.now_ms()
                        g.state_timestamp_ms = gv.current_state_timestamp - shift
                    self.groups[k.group] = g
        except (RecordFormatError, ConsumerRecordError) as exc:
            log.warning("skipping unreadable %s record at %d: %s", OFFSETS_TOPIC, offset, exc)

    def _is_consumer(self, group_id: str) -> bool:
        g = self.consumer_groups.get(group_id)
        return g is not None and not g.dead

    def consumer_commit_check(
        self, group_id: str, member_id: str, epoch: int, txn: bool, version: int
    ) -> ErrorCode | None:
        """None when ``group_id`` is not a consumer group, else Kafka's
        ConsumerGroup.validateOffsetCommit verdict (``version``: OffsetCommit's)."""
        g = self.consumer_groups.get(group_id)
        if g is None or g.dead:
            return None
        return validate_offset_commit(g, member_id, epoch, txn, version)

    def consumer_fetch_check(
        self, group_id: str, member_id: str | None, epoch: int
    ) -> ErrorCode | None:
        g = self.consumer_groups.get(group_id)
        if g is None or g.dead:
            return None
        return validate_offset_fetch(g, member_id, epoch)

    def _complete_txn(self, p: PartitionWriter, producer_id: int, commit: bool) -> None:
        """A marker of ``producer_id`` on offsets partition ``p``: complete the pending offsets
        of the groups stored there."""
        n = p.tp.partition
        count = self.offsets_topic.partition_count()
        for group in self.offsets.complete_txn(
            producer_id, commit, lambda g: partition_for(g, count) == n
        ):
            if group not in self.groups and not self._is_consumer(group):
                self.groups[group] = ClassicGroup(group, self.config)

    async def write_txn_marker(
        self,
        p: PartitionWriter,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        *,
        transaction_version: int = 0,
    ) -> int | ErrorCode:
        """Write a transaction marker on offsets partition ``p`` (in log order with the group
        writes) and materialise or drop the producer's pending offsets there (spec §5.5).
        Raises StorageError."""
        async with self._write_lock:
            written = await p.write_marker(
                producer_id,
                producer_epoch,
                commit,
                coordinator_epoch,
                self.wall_ms(),
                transaction_version=transaction_version,
            )
            if not isinstance(written, ErrorCode):
                self._complete_txn(p, producer_id, commit)
        return written

    # -- the offsets topic --------------------------------------------------------------------

    async def _offsets_partition(self, group_id: str) -> PartitionWriter:
        return await self.offsets_topic.partition_for(group_id)

    async def _append(self, group_id: str, records: list[Record]) -> int:
        """Append records as one batch to the group's partition; returns the base offset.
        Call with ``_write_lock`` held. Raises StorageError."""
        return await self.offsets_topic.append(group_id, records, self.wall_ms())

    async def _write_group(self, g: ClassicGroup, value_bytes: bytes | None = None) -> None:
        key = encode_group_metadata_key(GroupMetadataKey(g.group_id))
        if value_bytes is None:
            value_bytes = encode_group_metadata_value(group_value(g, self.wall_ms()))
        async with self._write_lock:
            if self.groups.get(g.group_id) is not g:
                raise GroupReplaced(f"group {g.group_id} was replaced")
            await self._append(g.group_id, [(key, value_bytes)])

    # -- parked requests ------------------------------------------------------------------------

    async def _after(self, g: ClassicGroup) -> None:
        """Write the group's record if asked, then hand out its answers and re-arm the timers:
        an answer never goes out before the record of the change it reports is durable. A
        failed write of an emptied group's record is only logged, as Kafka only warns (the
        previous generation in the log has no live members either)."""
        if g.persist_requested:
            g.persist_requested = False
            try:
                await self._write_group(g)
            except GroupReplaced:
                log.info("group %s: replaced; its old record not written", g.group_id)
            except StorageError as exc:
                log.error("group %s: writing its metadata failed: %s", g.group_id, exc)
        outbox, g.outbox = g.outbox, []
        for member_id, result in outbox:
            kind = "join" if isinstance(result, JoinResult) else "sync"
            key = (g.group_id, member_id, kind)
            self._mailbox[key] = result
            if (ev := self._events.get(key)) is not None:
                ev.set()
        self._wake.set()

    async def _await(self, key: tuple[str, str, str]) -> JoinResult | SyncResult:
        if key not in self._mailbox:
            ev = self._events[key] = trio.Event()
            try:
                await ev.wait()
            finally:
                if self._events.get(key) is ev:
                    del self._events[key]
        return self._mailbox.pop(key)

    def begin_shutdown(self) -> None:
        """Answer every parked request so connections can close."""
        self._closing = True
        for key, ev in list(self._events.items()):
            self._mailbox[key] = (
                JoinResult(E.not_coordinator, key[1])
                if key[2] == "join"
                else SyncResult(E.not_coordinator)
            )
            ev.set()

    def _status(self) -> ErrorCode:
        if self._closing:
            return E.not_coordinator
        if not self.loaded.is_set():
            return E.coordinator_load_in_progress
        return E.none

    async def _append_and_replay(self, group_id: str, records: list[Record]) -> None:
        async with self._write_lock:
            base = await self._append(group_id, records)
            for i, (k, v) in enumerate(records):
                self.replay(k, v, base + i)

    # -- admin ---------------------------------------------------------------------------------

    def list_groups(self) -> list[GroupSummary] | ErrorCode:
        if (err := self._status()) is not E.none:
            return err
        return [
            GroupSummary(g.group_id, g.protocol_type or "", g.state)
            for g in self.groups.values()
            if g.state is not GroupState.DEAD
        ] + [
            GroupSummary(g.group_id, "consumer", g.state, "consumer")
            for g in self.consumer_groups.values()
            if not g.dead
        ]

    def describe(self, group_id: str) -> ClassicGroup | ErrorCode | None:
        if (err := self._status()) is not E.none:
            return err
        return self.groups.get(group_id)
