"""The consumer group protocol (KIP-848) in the group coordinator: ConsumerGroupHeartbeat,
ConsumerGroupDescribe, and the member-epoch checks of the offset APIs.

The decisions are ``coordinator.consumer_group`` (pure); this layer finds or creates the group,
feeds the decisions the topics and the clock, wakes the timer task, and keeps the two group
namespaces apart: a consumer heartbeat to an Empty classic group (a simple group that only has
offsets) replaces it, as Kafka's ``maybeDeleteEmptyClassicGroup`` does, and one to a classic
group with members is GROUP_ID_NOT_FOUND ("Group G is not a consumer group."), which is what
Kafka answers with ``group.consumer.migration.policy=disabled`` (the online migration between
the protocols is not implemented). A classic JoinGroup to an Empty consumer group replaces it;
to one with members it is INCONSISTENT_GROUP_PROTOCOL.

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

from kio.schema.errors import ErrorCode

from coordinator.consumer_group import heartbeat as hb_decisions
from coordinator.consumer_group import records as cg_records
from coordinator.consumer_group.heartbeat import Heartbeat, HeartbeatResult, failed
from coordinator.consumer_group.model import ConsumerGroup, MemberState
from coordinator.group.offsets_api import OffsetsApi
from coordinator.group.records import GroupMetadataKey, encode_group_metadata_key
from coordinator.group.state import GroupState
from storage.api import StorageError

log = logging.getLogger("kafkad.group")
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
                g.session_deadlines[mid] = now + self.consumer_config.session_timeout_ms
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
            if classic is not None:
                if classic.members or classic.state is not GroupState.EMPTY:
                    return failed(
                        E.group_id_not_found, f"Group {hb.group_id} is not a consumer group."
                    )
                # an Empty classic group becomes a consumer group (its record tombstoned)
                extra.append((encode_group_metadata_key(GroupMetadataKey(hb.group_id)), None))
            g = ConsumerGroup(hb.group_id)
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
                log.info("group %s: the Empty classic group becomes a consumer group", hb.group_id)
            self.consumer_groups[hb.group_id] = g
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
        g = self.consumer_groups.get(group_id)
        if g is None or g.members:
            return
        async with self._write_lock:
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
