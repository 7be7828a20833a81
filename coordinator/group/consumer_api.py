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

Durability: not yet. Consumer groups live in memory; after a restart their members rejoin
(their first heartbeat answers UNKNOWN_MEMBER_ID or GROUP_ID_NOT_FOUND and they join again
with epoch 0). Their committed offsets are durable like every group's.
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from coordinator.consumer_group import heartbeat as hb_decisions
from coordinator.consumer_group.heartbeat import Heartbeat, HeartbeatResult, failed
from coordinator.consumer_group.model import ConsumerGroup
from coordinator.group.offsets_api import OffsetsApi
from coordinator.group.state import GroupState

log = logging.getLogger("kafkad.group")
E = ErrorCode


class ConsumerGroupApi(OffsetsApi):
    @property
    def consumer_protocol_enabled(self) -> bool:
        return "consumer" in self.rebalance_protocols

    def is_consumer_group(self, group_id: str) -> bool:
        return self._is_consumer(group_id)

    async def consumer_heartbeat(self, hb: Heartbeat, version: int) -> HeartbeatResult:
        if (err := self._status()) is not E.none:
            return failed(err)
        if (
            refused := hb_decisions.validate_request(hb, version, self.consumer_config)
        ) is not None:
            return refused
        topics = self.topic_view()
        now = self.now_ms()
        g = self.consumer_groups.get(hb.group_id)
        if g is None:
            if hb.member_epoch != 0:
                return failed(E.group_id_not_found, f"Consumer group {hb.group_id} not found.")
            classic = self.groups.get(hb.group_id)
            if classic is not None and classic.state is not GroupState.DEAD:
                if classic.members or classic.state is not GroupState.EMPTY:
                    return failed(
                        E.group_id_not_found, f"Group {hb.group_id} is not a consumer group."
                    )
                del self.groups[hb.group_id]  # an Empty classic group becomes a consumer group
                log.info("group %s: the Empty classic group becomes a consumer group", hb.group_id)
            g = ConsumerGroup(hb.group_id)
        if hb.member_epoch < 0:
            result = hb_decisions.leave(g, hb, topics)
        else:
            result = hb_decisions.heartbeat(g, hb, topics, self.consumer_config, now)
        if hb.group_id not in self.consumer_groups and (g.members or g.group_epoch):
            self.consumer_groups[hb.group_id] = g
        if result.error is not E.none:
            log.debug("group %s: heartbeat of %s -> %s", hb.group_id, hb.member_id, result.error)
        self._wake.set()
        return result

    def expire_consumer_groups(self, now_ms: int) -> None:
        topics = self.topic_view()
        for g in list(self.consumer_groups.values()):
            if g.next_deadline() <= now_ms:
                fenced = hb_decisions.expire(g, topics, now_ms)
                if fenced:
                    log.info(
                        "group %s: fenced %s (session or rebalance timeout)", g.group_id, fenced
                    )

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
