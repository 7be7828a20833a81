"""The offset APIs of the group coordinator: OffsetCommit, TxnOffsetCommit, OffsetFetch,
OffsetDelete, DeleteGroups (see ``coordinator.group.runtime`` for the theory of operation)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from coordinator.group.classic import (
    ClassicGroup,
)
from coordinator.group.coordinator_base import TXN_COMMIT_VERIFY_ERRORS, GroupCoordinatorBase
from coordinator.group.offsets import CommitRequest, FetchedOffset, OffsetsStore
from coordinator.group.records import (
    GroupMetadataKey,
    encode_group_metadata_key,
)
from coordinator.group.state import COMMIT, GroupState
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


class OffsetsApi(GroupCoordinatorBase):
    # -- offsets -------------------------------------------------------------------------------

    def _check_commit(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> ErrorCode:
        g = self.groups.get(group_id)
        if g is None or g.state is GroupState.DEAD:
            if generation >= 0:
                return E.group_id_not_found  # ILLEGAL_GENERATION below OffsetCommit v9
            self.groups[group_id] = ClassicGroup(group_id, self.config)  # a simple group
            return E.none
        if generation < 0 and g.state is GroupState.EMPTY:
            return E.none
        act = COMMIT[g.state]
        if isinstance(act, ErrorCode):
            return act
        if (err := g.validate_member(member_id, instance_id)) is not E.none:
            return err
        if generation != g.generation:
            return E.illegal_generation
        return E.none

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        commits: list[CommitRequest],
    ) -> ErrorCode | dict[TopicPartition, ErrorCode]:
        """OffsetCommit: a group-level error for every partition, or one code per partition."""
        if (err := self._status()) is not E.none:
            return err
        if not group_id:
            return E.invalid_group_id
        if (err := self._check_commit(group_id, member_id, instance_id, generation)) is not E.none:
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
        if (
            err := self._check_txn_commit(group_id, member_id, instance_id, generation)
        ) is not E.none:
            return err
        results = {c.tp: OffsetsStore.validate(c) for c in commits}
        ok = [c for c in commits if results[c.tp] is E.none]
        if not ok:
            return results
        records = OffsetsStore.commit_records(group_id, ok, self.wall_ms())
        try:
            async with self._write_lock:
                p = await self._offsets_partition(group_id)
                now = self.wall_ms()
                batch = build_batch(
                    [BatchRecord(i, 0, k, v) for i, (k, v) in enumerate(records)],
                    base_timestamp=now,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    transactional=True,
                )
                appended = await p.append(
                    batch,
                    read_batch_header(batch),
                    now,
                    coordinator=True,
                    verify=lambda: verifier(transactional_id, producer_id, producer_epoch, p.tp),
                )
                if isinstance(appended, ErrorCode):
                    return TXN_COMMIT_VERIFY_ERRORS.get(appended, appended)
                for i, (k, v) in enumerate(records):
                    self.replay(k, v, appended[0] + i, producer_id)
        except StorageError as exc:
            log.error("group %s: transactional offset commit failed: %s", group_id, exc)
            return E.coordinator_not_available
        return results

    def _check_txn_commit(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> ErrorCode:
        """KIP-447 fencing (Kafka's ClassicGroup.validateOffsetCommit, transactional): no
        REBALANCE_IN_PROGRESS, and requests without group metadata are not checked."""
        g = self.groups.get(group_id)
        if g is None or g.state is GroupState.DEAD:
            if generation >= 0:
                return E.illegal_generation
            self.groups[group_id] = ClassicGroup(group_id, self.config)  # a simple group
            return E.none
        if generation < 0 and g.state is GroupState.EMPTY:
            return E.none
        if generation >= 0 or member_id or instance_id is not None:
            if (err := g.validate_member(member_id, instance_id)) is not E.none:
                return err
            if generation != g.generation:
                return E.illegal_generation
        return E.none

    def fetch_offsets(
        self, group_id: str, tps: list[TopicPartition] | None, require_stable: bool
    ) -> tuple[ErrorCode, list[FetchedOffset]]:
        if (err := self._status()) is not E.none:
            return err, []
        return E.none, self.offsets.fetch(group_id, tps, require_stable)

    async def delete_offsets(
        self,
        group_id: str,
        tps: list[TopicPartition],
        subscribed: Callable[[ClassicGroup], set[str] | None],
    ) -> ErrorCode | dict[TopicPartition, ErrorCode]:
        """OffsetDelete. ``subscribed`` names the topics a non-empty group consumes (None: the
        group's protocol is not understood, so nothing may be deleted)."""
        if (err := self._status()) is not E.none:
            return err
        g = self.groups.get(group_id)
        if g is None or g.state is GroupState.DEAD:
            return E.group_id_not_found
        topics: set[str] = set()
        if g.state is not GroupState.EMPTY:
            found = subscribed(g)
            if found is None:
                return E.non_empty_group
            topics = found
        results = {tp: E.group_subscribed_to_topic if tp.topic in topics else E.none for tp in tps}
        deletable = [tp for tp, code in results.items() if code is E.none]
        records = self.offsets.delete_records(group_id, deletable)
        if records:
            try:
                await self._append_and_replay(group_id, records)
            except StorageError:
                return E.coordinator_not_available
        return results

    async def delete_group(self, group_id: str) -> ErrorCode:
        if (err := self._status()) is not E.none:
            return err
        g = self.groups.get(group_id)
        if g is None or g.state is GroupState.DEAD:
            return E.group_id_not_found
        if g.state is not GroupState.EMPTY:
            return E.non_empty_group
        records = self.offsets.delete_records(group_id)
        records.append((encode_group_metadata_key(GroupMetadataKey(group_id)), None))
        try:
            await self._append_and_replay(group_id, records)
        except StorageError:
            return E.coordinator_not_available
        g.state = GroupState.DEAD
        return E.none
