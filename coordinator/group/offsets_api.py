"""The offset APIs of the group coordinator: OffsetCommit, TxnOffsetCommit, OffsetFetch,
OffsetDelete, DeleteGroups, the offsets of deleted topics, and offsets retention (see
``coordinator.group.runtime`` for the theory of operation).

Offsets retention follows Kafka's: every ``offsets.retention.check.interval.ms`` the runtime
calls ``expire_offsets``, which tombstones each offset whose retention
(``offsets.retention.minutes``) has run out -- counted from the commit for simple groups and
for unsubscribed topics of Stable "consumer" groups, from when the group became Empty for Empty
groups, never while a transactional offset is pending for the partition -- and deletes Empty
groups left with no offsets (and no pending ones). Groups rebalancing keep their offsets.

Deliberate differences from Kafka: TxnOffsetCommit always asks the transaction coordinator
(Kafka skips the check when the producer already has a transaction open on the offsets
partition), so a commit arriving while its transaction is already ending gets
CONCURRENT_TRANSACTIONS instead of joining it, and a zombie is fenced even there; a missing
group becomes a simple group only when some offset is written (Kafka also creates it when
every partition was refused, e.g. OFFSET_METADATA_TOO_LARGE)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from coordinator.consumer_group.records import changes as consumer_group_changes
from coordinator.group.classic import (
    ClassicGroup,
)
from coordinator.group.coordinator_base import GroupCoordinatorBase
from coordinator.group.offsets import (
    CommitRequest,
    FetchedOffset,
    OffsetAndMetadata,
    OffsetsStore,
    Record,
)
from coordinator.group.records import (
    GroupMetadataKey,
    encode_group_metadata_key,
)
from coordinator.group.state import GroupState
from coordinator.group.subscriptions import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from storage.api import StorageError, TopicPartition
from wire.records import (
    Record as BatchRecord,
)
from wire.records import (
    build_batch,
    read_batch_header,
)

log = logging.getLogger("kafkad.group")
E = ErrorCode
S = GroupState

# What TxnOffsetCommit answers for a failed transaction check, as Kafka's group coordinator
# does: AddPartitionsToTxnManager answers a fenced producer INVALID_PRODUCER_EPOCH (every client
# treats it as fatal, like PRODUCER_FENCED) and CoordinatorOperationExceptionHelper turns a
# network failure of the check into COORDINATOR_LOAD_IN_PROGRESS (clients retry without a
# coordinator lookup). Everything else -- CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS,
# NOT_COORDINATOR, INVALID_PRODUCER_ID_MAPPING, TRANSACTION_ABORTABLE -- comes back unchanged
# (wire/errors.py: TRANSACTION_ABORTABLE is INVALID_TXN_STATE below v4,
# COORDINATOR_LOAD_IN_PROGRESS is COORDINATOR_NOT_AVAILABLE below v2).
TXN_VERIFY_ERRORS = {
    E.producer_fenced: E.invalid_producer_epoch,
    E.network_exception: E.coordinator_load_in_progress,
    E.not_enough_replicas: E.coordinator_not_available,
    E.request_timed_out: E.coordinator_not_available,
    E.unknown_topic_or_partition: E.coordinator_not_available,
    E.not_leader_or_follower: E.not_coordinator,
    E.kafka_storage_error: E.not_coordinator,
}


def expiry_base(g: ClassicGroup, wall_shift_ms: int) -> Callable[[OffsetAndMetadata], int] | None:
    """Kafka's ``ClassicGroup.offsetExpirationCondition``: from when an offset's retention
    runs (wall-clock ms), or None if the group's offsets do not expire now. A simple group
    (no protocol type): from each commit. An Empty group: from when it became Empty (its state
    timestamp, kept on the monotonic clock, so shifted by ``wall_shift_ms``; the commit time if
    unknown). A Stable "consumer" group: from each commit, for topics it does not subscribe to."""
    if g.protocol_type is None:
        return lambda om: om.commit_timestamp
    if g.state is S.EMPTY:
        if g.state_timestamp_ms is None:
            return lambda om: om.commit_timestamp
        since = g.state_timestamp_ms + wall_shift_ms
        return lambda om: since
    if g.state is S.STABLE and subscribed_topics(g) is not None:
        return lambda om: om.commit_timestamp
    return None


def validate_offset_commit(
    g: ClassicGroup, member_id: str, instance_id: str | None, generation: int, txn: bool
) -> ErrorCode:
    """Kafka's ClassicGroup.validateOffsetCommit for a group that exists: member, then
    generation, then (plain commits only) REBALANCE_IN_PROGRESS in CompletingRebalance. A
    commit with generation < 0 to an Empty group is accepted whatever its member id; one
    without any group metadata is refused UNKNOWN_MEMBER_ID by a non-Empty group unless it is
    transactional (TxnOffsetCommit v0-2 carries no group metadata)."""
    if g.state is S.DEAD:
        return E.coordinator_not_available
    if generation < 0 and g.state is S.EMPTY:
        return E.none
    if generation >= 0 or member_id or instance_id is not None:
        if (err := g.validate_member(member_id, instance_id)) is not E.none:
            return err
        if generation != g.generation:
            return E.illegal_generation
    elif not txn and g.state is not S.EMPTY:
        return E.unknown_member_id
    if not txn and g.state is S.COMPLETING_REBALANCE:
        return E.rebalance_in_progress
    return E.none


class OffsetsApi(GroupCoordinatorBase):
    # -- offsets -------------------------------------------------------------------------------

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        commits: list[CommitRequest],
        version: int = 9,
    ) -> ErrorCode | dict[TopicPartition, ErrorCode]:
        """OffsetCommit: a group-level error for every partition, or one code per partition.
        For a consumer group (KIP-848) ``generation`` is the member epoch."""
        if (err := self._status()) is not E.none:
            return err
        if not group_id:
            return E.invalid_group_id
        g = self.groups.get(group_id)
        consumer = self.consumer_commit_check(group_id, member_id, generation, False, version)
        if consumer is not None:
            err = consumer
        elif g is None or g.state is GroupState.DEAD:
            # a simple group, created by the replay of its first offset record
            err = E.group_id_not_found if generation >= 0 else E.none  # v<9: ILLEGAL_GENERATION
        else:
            err = validate_offset_commit(g, member_id, instance_id, generation, False)
        if err is not E.none:
            log.debug(
                "group %s: commit by %s gen %d -> %s", group_id, member_id, generation, err.name
            )
            return err
        results = {c.tp: OffsetsStore.validate(c) for c in commits}
        ok = [c for c in commits if results[c.tp] is E.none]
        if not ok:
            return results
        records = OffsetsStore.commit_records(group_id, ok, self.wall_ms())
        try:
            await self._append_and_replay(group_id, records)
        except StorageError as exc:
            log.error("group %s: offset commit failed: %s", group_id, exc)
            return E.coordinator_not_available
        return results

    async def txn_commit_offsets(
        self,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        instance_id: str | None,
        generation: int,
        commits: list[CommitRequest],
        verifier: Callable[[str, int, int, TopicPartition], ErrorCode] | None,
    ) -> ErrorCode | dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit (spec §4.9): a group-level error, or one code per partition. The
        offsets are appended as one transactional batch (producer id/epoch, no sequence) and
        held as pending until the producer's marker lands on the group's partition."""
        if (err := self._status()) is not E.none:
            return err
        if not group_id:
            return E.invalid_group_id
        if verifier is None:
            return E.coordinator_not_available  # no transaction coordinator
        results = {c.tp: OffsetsStore.validate(c) for c in commits}
        ok = [c for c in commits if results[c.tp] is E.none]
        try:
            async with self._write_lock:
                p = await self._offsets_partition(group_id)

                def verify() -> ErrorCode:
                    assert verifier is not None
                    return verifier(transactional_id, producer_id, producer_epoch, p.tp)

                # the transaction first (Kafka: scheduleTransactionalWriteOperation verifies,
                # then runs the write), so a zombie is fenced whatever its group metadata
                if (code := verify()) is not E.none:
                    return TXN_VERIFY_ERRORS.get(code, code)
                g = self.groups.get(group_id)
                consumer = self.consumer_commit_check(group_id, member_id, generation, True, 3)
                if consumer is not None:
                    err = consumer  # KIP-447 fencing with member epochs
                elif g is None or g.state is GroupState.DEAD:
                    err = E.illegal_generation if generation >= 0 else E.none
                else:
                    err = validate_offset_commit(g, member_id, instance_id, generation, True)
                if err is not E.none or not ok:
                    return err if err is not E.none else results
                records = OffsetsStore.commit_records(group_id, ok, self.wall_ms())
                now = self.wall_ms()
                batch = build_batch(
                    [BatchRecord(i, 0, k, v) for i, (k, v) in enumerate(records)],
                    base_timestamp=now,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    transactional=True,
                )
                appended = await p.append(
                    batch, read_batch_header(batch), now, coordinator=True, verify=verify
                )
                if isinstance(appended, ErrorCode):
                    return TXN_VERIFY_ERRORS.get(appended, appended)
                for i, (k, v) in enumerate(records):
                    self.replay(k, v, appended[0] + i, producer_id)
                now_g = self.groups.get(group_id)  # a JoinGroup may have created it meanwhile
                if (now_g is None or now_g.state is GroupState.DEAD) and not self._is_consumer(
                    group_id
                ):
                    self.groups[group_id] = ClassicGroup(group_id, self.config)  # a simple group
        except StorageError as exc:
            log.error("group %s: transactional offset commit failed: %s", group_id, exc)
            return E.coordinator_not_available
        return results

    def fetch_offsets(
        self,
        group_id: str,
        tps: list[TopicPartition] | None,
        require_stable: bool,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[ErrorCode, list[FetchedOffset]]:
        if (err := self._status()) is not E.none:
            return err, []
        consumer = self.consumer_fetch_check(group_id, member_id, member_epoch)
        if consumer is not None and consumer is not E.none:
            return consumer, []
        return E.none, self.offsets.fetch(group_id, tps, require_stable)

    async def delete_offsets(
        self, group_id: str, tps: list[TopicPartition]
    ) -> ErrorCode | dict[TopicPartition, ErrorCode]:
        """OffsetDelete. An Empty group may delete any of its offsets; one with members only
        those of topics it does not subscribe to, and only if it is a "consumer" group
        (NON_EMPTY_GROUP otherwise). Members whose subscription does not parse make every topic
        subscribed (Kafka's isSubscribedToTopic)."""
        if (err := self._status()) is not E.none:
            return err
        g = self.groups.get(group_id)
        topics: set[str] = set()
        cg = self.consumer_groups.get(group_id)
        if cg is not None and not cg.dead:  # KIP-848: never NON_EMPTY_GROUP
            topics = set(cg.subscription_metadata)
            for m in cg.members.values():
                topics.update(m.subscribed_topic_names)
        elif g is None or g.state is GroupState.DEAD:
            return E.group_id_not_found
        elif g.state is not GroupState.EMPTY:
            if g.protocol_type != CONSUMER_PROTOCOL_TYPE:
                return E.non_empty_group
            found = subscribed_topics(g)
            topics = found if found is not None else {tp.topic for tp in tps}
        results = {tp: E.group_subscribed_to_topic if tp.topic in topics else E.none for tp in tps}
        deletable = [tp for tp, code in results.items() if code is E.none]
        records = self.offsets.delete_records(group_id, deletable)
        if records:
            try:
                await self._append_and_replay(group_id, records)
            except StorageError:
                return E.coordinator_not_available
        return results

    async def on_topic_deleted(self, topic: str) -> None:
        """A topic was deleted: tombstone every offset committed or pending for its partitions
        (Kafka's GroupCoordinatorService.onPartitionsDeleted). A failed write is logged, as in
        Kafka; the offsets then stay until the next deletion of the name or DeleteGroups."""
        await self.loaded.wait()
        for group, records in self.offsets.topic_deleted_records(topic).items():
            try:
                await self._append_and_replay(group, records)
            except StorageError as exc:
                log.error("group %s: deleting offsets of topic %s failed: %s", group, topic, exc)

    async def expire_offsets(self) -> int:
        """One offsets-retention pass (Kafka's ``cleanupGroupMetadata``): tombstone expired
        offsets, and delete Empty groups left with none. Each group is decided and written
        under the write lock, so a commit cannot slip in between. Returns the records written."""
        if self._status() is not E.none:
            return 0
        written = 0
        for group_id in list(self.groups):
            async with self._write_lock:
                g = self.groups.get(group_id)
                if g is None or g.state is S.DEAD:
                    continue
                now = self.wall_ms()
                base = expiry_base(g, now - self.now_ms())
                if base is None:
                    continue
                subscribed = subscribed_topics(g) or set()
                records, all_gone = self.offsets.expired_records(
                    group_id, base, subscribed, now, self.offsets_retention_ms
                )
                if all_gone and g.state is S.EMPTY:
                    records.append((encode_group_metadata_key(GroupMetadataKey(group_id)), None))
                    try:
                        await self._write_group_deletion(g, records)
                    except StorageError as exc:
                        log.error("group %s: offsets retention failed: %s", group_id, exc)
                        continue
                    log.info("group %s: deleted (Empty, no offsets left)", group_id)
                elif records and not await self._retention_write(group_id, records):
                    continue
                written += len(records)
        return written + await self._expire_consumer_offsets()

    async def _retention_write(self, group_id: str, records: list[Record]) -> bool:
        """Append retention's records (the write lock held) and replay them; False, logged, if
        the write failed."""
        try:
            at = await self._append(group_id, records)
        except StorageError as exc:
            log.error("group %s: offsets retention failed: %s", group_id, exc)
            return False
        for i, (k, v) in enumerate(records):
            self.replay(k, v, at + i)
        return True

    async def _expire_consumer_offsets(self) -> int:
        """Retention for consumer groups (Kafka's ConsumerGroup.offsetExpirationCondition):
        from each commit, for topics the group does not subscribe to; an Empty group left
        with no offsets is deleted (its records tombstoned)."""
        written = 0
        for group_id in list(self.consumer_groups):
            async with self._write_lock:
                cg = self.consumer_groups.get(group_id)
                if cg is None or cg.dead:
                    continue
                subscribed = set(cg.subscription_metadata)
                for m in cg.members.values():
                    subscribed.update(m.subscribed_topic_names)
                now = self.wall_ms()
                records, all_gone = self.offsets.expired_records(
                    group_id,
                    lambda om: om.commit_timestamp,
                    subscribed,
                    now,
                    self.offsets_retention_ms,
                )
                gone = all_gone and not cg.members
                if gone:
                    records += consumer_group_changes(cg, None)
                if not records:
                    continue
                if not await self._retention_write(group_id, records):
                    continue
                if gone:
                    self.consumer_groups.pop(group_id, None)
                    log.info("group %s: deleted (Empty, no offsets left)", group_id)
                written += len(records)
        return written

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of one group: decided and written under the write lock, so an offset
        committed meanwhile cannot outlive the group."""
        if (err := self._status()) is not E.none:
            return err
        async with self._write_lock:
            cg = self.consumer_groups.get(group_id)
            if cg is not None and not cg.dead:
                if cg.members:
                    return E.non_empty_group
                # its offsets' tombstones, then its own (replayed: the group goes)
                records = self.offsets.delete_records(group_id) + consumer_group_changes(cg, None)
                try:
                    at = await self._append(group_id, records)
                except StorageError:
                    return E.coordinator_not_available
                for i, (k, v) in enumerate(records):
                    self.replay(k, v, at + i)
                self.consumer_groups.pop(group_id, None)
                return E.none
            g = self.groups.get(group_id)
            if g is None or g.state is GroupState.DEAD:
                return E.group_id_not_found
            if g.state is not GroupState.EMPTY:
                return E.non_empty_group
            records = self.offsets.delete_records(group_id)
            records.append((encode_group_metadata_key(GroupMetadataKey(group_id)), None))
            try:
                await self._write_group_deletion(g, records)
            except StorageError:
                return E.coordinator_not_available
        return E.none

    async def _write_group_deletion(self, g: ClassicGroup, records: list[Record]) -> None:
        """Append ``records`` (the group's offset tombstones, then its own) and drop the group;
        call with the write lock held. The group is DEAD while the write is in flight, so a
        JoinGroup arriving meanwhile starts a new group, as it would after the deletion, rather
        than joining the one being deleted. Raises StorageError (the group is then kept)."""
        g.state = S.DEAD
        try:
            at = await self._append(g.group_id, records)
        except StorageError:
            if self.groups.get(g.group_id) is g:
                g.state = S.EMPTY
            raise
        for i, (k, v) in enumerate(records[:-1]):
            self.replay(k, v, at + i)
        if self.groups.get(g.group_id) is g:  # not replaced by a new group meanwhile
            key, value = records[-1]
            self.replay(key, value, at + len(records) - 1)
