"""The consumer group protocol (KIP-848) in the group coordinator: ConsumerGroupHeartbeat,
ConsumerGroupDescribe, and the member-epoch checks of the offset APIs.

The decisions are ``coordinator.consumer_group`` (pure); this layer finds or creates the group,
feeds the decisions the topics and the clock, wakes the timer task, and keeps the two group
namespaces apart: a consumer heartbeat to an Empty classic group (a simple group that only has
offsets) replaces it, as Kafka's ``maybeDeleteEmptyClassicGroup`` does; one joining a classic
group with members upgrades it when ``group.consumer.migration.policy`` allows
(coordinator/group/migration.py), else it is GROUP_ID_NOT_FOUND ("Group G is not a consumer
group."). A classic JoinGroup to an Empty consumer group replaces it; classic requests to one
with members are served inside it (coordinator/group/classic_members.py), and when the last
consumer-protocol member leaves or is fenced, the group is downgraded back to a classic group
(the policy permitting).

Durability: a decision runs on the live group under the offsets topic's write lock; the
records that turn the stored group into the new one (``consumer_group.records.changes``,
Kafka's record formats) are appended before the answer goes out. If the append fails the group
is put back as it was and the heartbeat answered COORDINATOR_NOT_AVAILABLE, so what members
were told is always what the log holds. At start-up the records are replayed; every member
gets a fresh session timeout (and a member still revoking, a fresh rebalance timeout), as
Kafka schedules them when a coordinator loads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import TypeVar

from kio.schema.errors import ErrorCode

from coordinator.consumer_group import heartbeat as hb_decisions
from coordinator.consumer_group import records as cg_records
from coordinator.consumer_group.heartbeat import Heartbeat, HeartbeatResult, failed
from coordinator.consumer_group.model import ConsumerGroup, MemberState
from coordinator.group import classic_members, migration
from coordinator.group.classic import ClassicGroup, JoinRequest, JoinResult, SyncResult
from coordinator.group.group_record import group_value
from coordinator.group.offsets_api import OffsetsApi
from coordinator.group.records import (
    GroupMetadataKey,
    encode_group_metadata_key,
    encode_group_metadata_value,
)
from coordinator.group.state import GroupState
from storage.api import StorageError

log = logging.getLogger("kafkad.group")
_T = TypeVar("_T")
E = ErrorCode
# A timer whose fencing records could not be written is tried again after this long, not at
# once (the deadline has passed, so the timer task would otherwise spin on a failing log);
# Kafka's CoordinatorTimer reschedules a failed timeout operation after 500 ms.
TIMER_RETRY_BACKOFF_MS = 500


class ConsumerGroupApi(OffsetsApi):
    @property
    def consumer_protocol_enabled(self) -> bool:
        return "consumer" in self.rebalance_protocols

    def is_consumer_group(self, group_id: str) -> bool:
        return self._is_consumer(group_id)

    async def load(self) -> None:
        await super().load()
        now = self.now_ms()
        for g in self.consumer_groups.values():
            for mid, m in g.members.items():
                timeout = self.consumer_config.session_timeout_ms
                if m.classic is not None:  # a member using the classic protocol: its own
                    timeout = m.classic.session_timeout_ms
                g.session_deadlines[mid] = now + timeout
                if m.state is MemberState.UNREVOKED_PARTITIONS:
                    g.rebalance_deadlines[mid] = (m.member_epoch, now + m.rebalance_timeout_ms)
            simple = self.groups.get(g.group_id)  # made by the replay of an offset record
            if simple is not None and not simple.members:
                del self.groups[g.group_id]
        if self.consumer_groups:
            log.info("loaded %d consumer group(s)", len(self.consumer_groups))

    async def consumer_heartbeat(self, hb: Heartbeat, version: int) -> HeartbeatResult:
        if (err := self._status()) is not E.none:
            return failed(err)
        if (
            refused := hb_decisions.validate_request(hb, version, self.consumer_config)
        ) is not None:
            return refused
        async with self._write_lock:
            return await self._consumer_heartbeat(hb)

    async def _consumer_heartbeat(self, hb: Heartbeat) -> HeartbeatResult:
        topics = self.topic_view()
        now = self.now_ms()
        g = self.consumer_groups.get(hb.group_id)
        extra: list[cg_records.Record] = []
        upgraded: ClassicGroup | None = None
        stored = None if g is None else cg_records.snapshot(g)
        if g is None:
            classic = self.groups.get(hb.group_id)
            if classic is not None and classic.state is GroupState.DEAD:
                classic = None
            if hb.member_epoch != 0:  # Kafka's getOrMaybeCreateConsumerGroup / consumerGroup
                if classic is not None:
                    return failed(
                        E.group_id_not_found, f"Group {hb.group_id} is not a consumer group."
                    )
                if hb.member_epoch < 0:  # a leave: consumerGroup() -> group()
                    return failed(E.group_id_not_found, f"Group {hb.group_id} not found.")
                return failed(E.group_id_not_found, f"Consumer group {hb.group_id} not found.")
            g = ConsumerGroup(hb.group_id)
            if classic is not None:
                if classic.members or classic.state is not GroupState.EMPTY:
                    if not migration.can_upgrade(
                        classic, self.migration_policy, self.consumer_config.max_size
                    ):
                        return failed(
                            E.group_id_not_found, f"Group {hb.group_id} is not a consumer group."
                        )
                    converted = migration.from_classic(classic, topics, now)
                    if converted is None:
                        return failed(E.group_id_not_found, migration.upgrade_refusal(hb.group_id))
                    g, upgraded = converted, classic
                # the classic group becomes a consumer group (its record tombstoned)
                extra.append((encode_group_metadata_key(GroupMetadataKey(hb.group_id)), None))
        elif hb.member_epoch == hb_decisions.LEAVE:
            leaving = (
                g.static_member(hb.instance_id) if hb.instance_id else g.members.get(hb.member_id)
            )
            if (
                leaving is not None
                and leaving.member_id == hb.member_id
                and migration.should_downgrade(
                    g, {leaving.member_id}, self.migration_policy, self.config.max_size
                )
            ):
                return await self._downgrade(g, {leaving.member_id}, hb)
        if hb.member_epoch < 0:
            result = hb_decisions.leave(g, hb, topics)
        else:
            result = hb_decisions.heartbeat(
                g, hb, topics, self.consumer_config, now, wall_ms=self.wall_ms()
            )
        if result.error is not E.none and stored is not None:
            g.__dict__.update(stored.__dict__)  # a refusal changes nothing
        written = extra + cg_records.changes(stored, g) if result.error is E.none else []
        if written:
            try:
                await self._append(hb.group_id, written)
            except StorageError as exc:
                log.error("group %s: writing a heartbeat's records failed: %s", hb.group_id, exc)
                if stored is not None:
                    g.__dict__.update(stored.__dict__)
                return failed(E.coordinator_not_available)
            if extra:
                self.groups.pop(hb.group_id, None)
                log.info("group %s: the classic group becomes a consumer group", hb.group_id)
            self.consumer_groups[hb.group_id] = g
            if upgraded is not None:
                migration.answer_parked(upgraded)
                await self._after(upgraded)
        if result.error is not E.none:
            log.debug("group %s: heartbeat of %s -> %s", hb.group_id, hb.member_id, result.error)
        self._wake.set()
        return result

    async def expire_consumer_groups(self, now_ms: int) -> None:
        topics = self.topic_view()
        for g in list(self.consumer_groups.values()):
            if g.next_deadline() > now_ms:
                continue
            async with self._write_lock:
                if self.consumer_groups.get(g.group_id) is not g:
                    continue  # downgraded or replaced while this waited for the lock
                due = next(
                    (
                        mid
                        for mid in g.due_members(now_ms)
                        if migration.should_downgrade(
                            g, {mid}, self.migration_policy, self.config.max_size
                        )
                    ),
                    None,
                )
                if due is not None:
                    await self._downgrade(g, {due}, None)
                    continue
                stored = cg_records.snapshot(g)
                fenced = hb_decisions.expire(g, topics, now_ms)
                if not fenced:
                    continue
                try:
                    await self._append(g.group_id, cg_records.changes(stored, g))
                except StorageError as exc:  # kept; tried again after a backoff
                    log.error("group %s: fencing %s failed: %s", g.group_id, fenced, exc)
                    g.__dict__.update(stored.__dict__)
                    g.retry_at = now_ms + TIMER_RETRY_BACKOFF_MS
                    continue
                g.retry_at = 0
                log.info("group %s: fenced %s (session or rebalance timeout)", g.group_id, fenced)

    async def drop_empty_consumer_group(self, group_id: str) -> None:
        """A classic JoinGroup takes over an Empty consumer group's id: tombstone it first."""
        async with self._write_lock:
            g = self.consumer_groups.get(group_id)
            if g is None or g.members:  # a member joined while this waited for the lock
                return
            await self._append(group_id, cg_records.changes(g, None))
            self.consumer_groups.pop(group_id, None)

    def describe_consumer_group(self, group_id: str) -> ConsumerGroup | tuple[ErrorCode, str]:
        if (err := self._status()) is not E.none:
            return err, ""
        g = self.consumer_groups.get(group_id)
        if g is not None and not g.dead:
            return g
        classic = self.groups.get(group_id)
        if classic is not None and classic.state is not GroupState.DEAD:
            return E.group_id_not_found, f"Group {group_id} is not a consumer group."
        return E.group_id_not_found, f"Group {group_id} not found."

    def preferred_assignor(self, g: ConsumerGroup) -> str:
        return hb_decisions.preferred_assignor(g, self.consumer_config)

    # -- online migration: downgrade, and classic members inside a consumer group --------------

    async def _downgrade(
        self, g: ConsumerGroup, leaving: Collection[str], hb: Heartbeat | None
    ) -> HeartbeatResult:
        """The ``leaving`` members leave (``hb``), are fenced or removed (None), leaving only
        classic-protocol members: the group becomes a classic group and rebalances. Call under
        the write lock."""
        names = {t.topic_id: t.name for t in self.topic_view().values()}
        now = self.now_ms()
        classic = migration.to_classic(g, leaving, names, self.config, now)
        if classic is None:
            return failed(
                E.group_id_not_found,
                f"Cannot downgrade the consumer group {g.group_id}: malformed protocol metadata.",
            )
        records = cg_records.changes(g, None)
        records.append(
            (
                encode_group_metadata_key(GroupMetadataKey(g.group_id)),
                encode_group_metadata_value(group_value(classic, self.wall_ms())),
            )
        )
        try:
            await self._append(g.group_id, records)
        except StorageError as exc:
            log.error("group %s: downgrading to a classic group failed: %s", g.group_id, exc)
            return failed(E.coordinator_not_available)
        self.consumer_groups.pop(g.group_id, None)
        self.groups[g.group_id] = classic
        classic.prepare_rebalance(now)
        log.info(
            "group %s: downgraded to a classic group (%s left)", g.group_id, ", ".join(leaving)
        )
        self._wake.set()
        if hb is None:
            return HeartbeatResult(member_id="", member_epoch=hb_decisions.LEAVE)
        return HeartbeatResult(member_id=hb.member_id, member_epoch=hb.member_epoch)

    async def _downgrade_replacing(
        self, g: ConsumerGroup, replaced: str, req: JoinRequest
    ) -> JoinResult:
        """A classic static member replaces the last consumer-protocol member: the group
        becomes a classic group, Stable, the joiner holding the replaced member's target
        assignment. Call under the write lock."""
        stored = cg_records.snapshot(g)
        now = self.now_ms()
        result = classic_members.join(g, req, self.topic_view(), self.consumer_config, now)
        joining = g.members.get(result.member_id)
        g.__dict__.update(stored.__dict__)  # the classic group is built from the group before
        if result.error is not E.none or joining is None:
            return result
        names = {t.topic_id: t.name for t in self.topic_view().values()}
        classic = migration.to_classic(g, {replaced}, names, self.config, now, joining)
        if classic is None:
            return JoinResult(E.group_id_not_found, req.member_id)
        records = cg_records.changes(g, None)
        records.append(
            (
                encode_group_metadata_key(GroupMetadataKey(g.group_id)),
                encode_group_metadata_value(group_value(classic, self.wall_ms())),
            )
        )
        try:
            await self._append(g.group_id, records)
        except StorageError as exc:
            log.error("group %s: downgrading to a classic group failed: %s", g.group_id, exc)
            return JoinResult(E.coordinator_not_available, req.member_id)
        self.consumer_groups.pop(g.group_id, None)
        self.groups[g.group_id] = classic
        log.info("group %s: downgraded to a classic group (%s replaced)", g.group_id, replaced)
        self._wake.set()
        return result

    def classic_consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group with members that classic requests to ``group_id`` go to."""
        g = self.consumer_groups.get(group_id)
        return g if g is not None and not g.dead and g.members else None

    async def _classic_change(self, g: ConsumerGroup, decide: Callable[[], _T]) -> _T | None:
        """Run a classic member's decision on ``g`` and write its records; None (the group
        put back) when the write fails. Call under the write lock."""
        stored = cg_records.snapshot(g)
        result = decide()
        if written := cg_records.changes(stored, g):
            try:
                await self._append(g.group_id, written)
            except StorageError as exc:
                log.error("group %s: writing a classic member's change failed: %s", g.group_id, exc)
                g.__dict__.update(stored.__dict__)
                return None
        self._wake.set()
        return result

    async def classic_join_consumer(self, g: ConsumerGroup, req: JoinRequest) -> JoinResult | None:
        """None: ``g`` was downgraded while this waited for the lock (a classic group now)."""
        topics = self.topic_view()
        async with self._write_lock:
            if self.consumer_groups.get(g.group_id) is not g:
                return None
            replaced = g.static_members.get(req.group_instance_id or "")
            if (
                replaced is not None
                and not req.member_id
                and migration.should_downgrade_replacing(
                    g, replaced, self.migration_policy, self.config.max_size
                )
            ):
                return await self._downgrade_replacing(g, replaced, req)
            stored = cg_records.snapshot(g)
            result = classic_members.join(g, req, topics, self.consumer_config, self.now_ms())
            if result.error is not E.none:
                g.__dict__.update(stored.__dict__)  # a refusal changes nothing
            elif written := cg_records.changes(stored, g):
                try:
                    await self._append(g.group_id, written)
                except StorageError as exc:
                    log.error("group %s: writing a classic join failed: %s", g.group_id, exc)
                    g.__dict__.update(stored.__dict__)
                    return JoinResult(E.coordinator_not_available, req.member_id)
            self._wake.set()
        log.debug("group %s: classic join %r -> %s", g.group_id, req.member_id, result.error.name)
        return result

    def classic_sync_consumer(
        self,
        g: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> SyncResult:
        names = {t.topic_id: t.name for t in self.topic_view().values()}
        result = classic_members.sync(
            g,
            member_id,
            instance_id,
            generation,
            protocol_type,
            protocol_name,
            names,
            self.now_ms(),
        )
        self._wake.set()
        return result

    def classic_heartbeat_consumer(
        self, g: ConsumerGroup, member_id: str, instance_id: str | None, generation: int
    ) -> ErrorCode:
        code = classic_members.heartbeat(g, member_id, instance_id, generation, self.now_ms())
        self._wake.set()
        return code

    async def classic_leave_consumer(
        self, g: ConsumerGroup, members: list[tuple[str, str | None]]
    ) -> list[ErrorCode] | ErrorCode | None:
        """None: ``g`` was downgraded while this waited for the lock (a classic group now)."""
        topics = self.topic_view()
        async with self._write_lock:
            if self.consumer_groups.get(g.group_id) is not g:
                return None
            decided = classic_members.leaving(g, members)
            removed = {mid for _, mid in decided if mid is not None}
            if removed and migration.should_downgrade(
                g, removed, self.migration_policy, self.config.max_size
            ):
                # only classic-protocol members stay (the last consumer-protocol ones removed,
                # say by an admin by instance id): the group becomes a classic group, as
                # Kafka's consumerGroupFenceMembers
                downgraded = await self._downgrade(g, removed, None)
                if downgraded.error is not E.none:
                    return downgraded.error
                return [code for code, _ in decided]
            result = await self._classic_change(
                g, lambda: classic_members.leave(g, members, topics)
            )
        if result is None:
            return E.coordinator_not_available
        return [code for _, code in result]
