"""The group coordinator's async runtime: clock, timers, parked requests, the offsets topic.

Theory of operation
-------------------
Decisions are made by ``ClassicGroup`` (coordinator/group/classic.py) and ``OffsetsStore``
(coordinator/group/offsets.py); the runtime only feeds them the time, parks the requests they
park, and reads and writes ``__consumer_offsets``. It is three layers: ``GroupCoordinatorBase``
(coordinator_base.py: state, the offsets topic, parked requests), ``OffsetsApi``
(offsets_api.py: the offset APIs and DeleteGroups) and ``GroupCoordinator`` (this module: the
classic group protocol and the timers).

* Clock: ``trio.current_time()`` in milliseconds, so trio's MockClock drives every session,
  join, sync and initial-delay timer in tests. Record timestamps (commit time, state time) are
  wall-clock (``wall_ms``).
* Timers: one background task sleeps until the earliest group deadline or until a request
  changes some deadline (``_wake``), then lets each group expire what is due; every
  ``offsets.retention.check.interval.ms`` it also runs offsets retention
  (``OffsetsApi.expire_offsets``).
* Parked JoinGroup/SyncGroup: a request waits on a ``trio.Event`` for its (group, member,
  kind) key; the group's ``outbox`` answers are moved to a mailbox and the event set.
* Writes: every change is appended to the group's partition of ``__consumer_offsets``
  (``placement.partition_for``) before it is applied and acknowledged; one lock keeps append +
  apply in log order. Offset records are applied through ``OffsetsStore.replay``, the same code
  that rebuilds the store at startup.
* ``__consumer_offsets`` is created on first write, or by a Metadata request that auto-creates
  it, whichever comes first (``TopicManager.create_internal``, with the spec registered in
  coordinator_base.py: ``offsets.topic.num.partitions`` partitions, ``cleanup.policy=compact``,
  ``segment.bytes=offsets.topic.segment.bytes``, as in Kafka, whose default is 1 MiB here):
  the log cleaner keeps the latest record per key and the active segment stays small, so the
  replay stays short. At startup it is replayed by the background task (runs of plain records
  applied as compaction would leave them, see ``offsets_log.replay_partition``); until that
  finishes, group APIs answer
  COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping

import trio
from kio.schema.errors import ErrorCode

from coordinator.append_errors import STORAGE_FAILURE
from coordinator.group.classic import (
    NEVER,
    ClassicGroup,
    JoinRequest,
    JoinResult,
    SyncResult,
)
from coordinator.group.consumer_api import ConsumerGroupApi
from coordinator.group.coordinator_base import GroupReplaced, GroupSummary
from coordinator.group.group_record import assignment_value
from coordinator.group.records import (
    encode_group_metadata_value,
)
from coordinator.group.state import Act, GroupState
from storage.api import StorageError

log = logging.getLogger("kafkad.group")
E = ErrorCode


__all__ = ["GroupCoordinator", "GroupSummary"]


class GroupCoordinator(ConsumerGroupApi):
    """The group coordinator: ``OffsetsApi``, the consumer protocol (``ConsumerGroupApi``),
    the classic group protocol and the timers of both."""

    # -- background ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Load the offsets topic, then run the group timers until cancelled."""
        await self.load()
        retention_due = self.now_ms() + self.offsets_retention_check_ms
        while True:
            deadline = min((g.next_deadline() for g in self.groups.values()), default=NEVER)
            for cg in self.consumer_groups.values():
                deadline = min(deadline, cg.next_deadline())
            deadline = min(deadline, retention_due)
            at = math.inf if deadline >= NEVER else (deadline + 1) / 1000
            with trio.move_on_at(at):
                await self._wake.wait()
            self._wake = trio.Event()
            now = self.now_ms()
            if retention_due <= now:
                retention_due = now + self.offsets_retention_check_ms
                if written := await self.expire_offsets():
                    log.info("offsets retention: %d tombstone(s) written", written)
            await self.expire_consumer_groups(now)
            for g in list(self.groups.values()):
                if g.next_deadline() <= now:
                    removed = g.expire(now)
                    if removed:
                        log.info("group %s: session expired for %s", g.group_id, removed)
                    await self._after(g)

    # -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup -------------------------------------------

    async def join(self, group_id: str, req: JoinRequest) -> JoinResult:
        if (err := self._status()) is not E.none:
            return JoinResult(err, req.member_id)
        if not group_id:
            return JoinResult(E.invalid_group_id, req.member_id)
        if not self.config.accepts_session_timeout(req.session_timeout_ms):
            return JoinResult(E.invalid_session_timeout, req.member_id)  # creates no group
        if (cg := self.consumer_groups.get(group_id)) is not None and not cg.dead:
            if cg.members:  # a classic member inside a consumer group (classic_members.py)
                inside = await self.classic_join_consumer(cg, req)
                if inside is not None:
                    return inside
                # downgraded meanwhile: the classic group it became
            else:
                try:  # an Empty consumer group becomes classic
                    await self.drop_empty_consumer_group(group_id)
                except StorageError:
                    return JoinResult(E.coordinator_not_available, req.member_id)
                if self.consumer_groups.get(group_id) is not None:  # a member joined it
                    return await self.join(group_id, req)
        g = self.groups.get(group_id)
        if g is None or g.state is GroupState.DEAD:
            if req.member_id:
                return JoinResult(E.unknown_member_id, req.member_id)
            g = self.groups[group_id] = ClassicGroup(group_id, self.config)
        self._mailbox.pop((group_id, req.member_id, "join"), None)
        outcome = g.join(req, self.now_ms())
        log.debug("group %s: join %r -> %s (%s)", group_id, req.member_id, _brief(outcome), g.state)
        if (rejoin := g.static_rejoin) is not None:  # persist the rejoined member, then answer
            g.static_rejoin, g.persist_requested = None, False
            try:
                await self._write_group(g)
            except StorageError as exc:
                log.warning(
                    "group %s: persisting a static member's rejoin failed: %s", group_id, exc
                )
                answer = g.revert_static_rejoin(rejoin, _write_failure(exc), self.now_ms())
            else:
                answer = rejoin.answer
            await self._after(g)
            return answer
        await self._after(g)
        if isinstance(outcome, JoinResult):
            return outcome
        result = await self._await((group_id, outcome[1], "join"))
        assert isinstance(result, JoinResult)
        log.debug("group %s: join of %s answered %s", group_id, outcome[1], _brief(result))
        return result

    async def sync(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
    ) -> SyncResult:
        if (err := self._status()) is not E.none:
            return SyncResult(err)
        if not group_id:
            return SyncResult(E.invalid_group_id)
        if (cg := self.classic_consumer_group(group_id)) is not None:
            return self.classic_sync_consumer(
                cg, member_id, instance_id, generation, protocol_type, protocol_name
            )
        g = self.groups.get(group_id)
        if g is None:
            return SyncResult(E.unknown_member_id)
        key = (group_id, member_id, "sync")
        self._mailbox.pop(key, None)
        outcome = g.sync(
            member_id, instance_id, generation, protocol_type, protocol_name, self.now_ms()
        )
        log.debug(
            "group %s: sync %s gen %d -> %s (%s)",
            group_id,
            member_id,
            generation,
            _brief(outcome),
            g.state,
        )
        if outcome is Act.PERSIST_ASSIGNMENT:
            gen = g.generation
            value = encode_group_metadata_value(assignment_value(g, assignments, self.wall_ms()))
            try:
                await self._write_group(g, value)
            except StorageError as exc:
                log.error("group %s: writing the assignment failed: %s", group_id, exc)
                g.fail_assignment(gen, _write_failure(exc), self.now_ms())
            else:
                g.complete_assignment(gen, assignments, self.now_ms())
        await self._after(g)
        if isinstance(outcome, SyncResult):
            return outcome
        result = await self._await(key)
        assert isinstance(result, SyncResult)
        log.debug("group %s: sync of %s answered %s", group_id, member_id, _brief(result))
        return result

    async def heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> ErrorCode:
        if (err := self._status()) is not E.none:
            return err
        if not group_id:
            return E.invalid_group_id
        if (cg := self.classic_consumer_group(group_id)) is not None:
            return self.classic_heartbeat_consumer(cg, member_id, instance_id, generation)
        g = self.groups.get(group_id)
        if g is None:
            return E.unknown_member_id
        code = g.heartbeat(member_id, instance_id, generation, self.now_ms())
        log.debug("group %s: heartbeat %s gen %d -> %s", group_id, member_id, generation, code.name)
        await self._after(g)
        return code

    async def leave(
        self, group_id: str, members: Iterable[tuple[str, str | None]]
    ) -> ErrorCode | list[ErrorCode]:
        if (err := self._status()) is not E.none:
            return err
        if not group_id:
            return E.invalid_group_id
        members = list(members)
        if (cg := self.classic_consumer_group(group_id)) is not None:
            left = await self.classic_leave_consumer(cg, members)
            if left is not None:
                return left
            # downgraded meanwhile: leave the classic group it became
        g = self.groups.get(group_id)
        if g is None:
            return E.unknown_member_id
        codes = [g.leave(mid, iid, self.now_ms()) for mid, iid in members]
        log.debug("group %s: leave -> %s", group_id, [c.name for c in codes])
        await self._after(g)
        return codes


def _write_failure(exc: StorageError) -> ErrorCode:
    """The code for members whose classic group's record could not be written: a group
    converted to a consumer group meanwhile is rejoined there (Kafka answers the requests
    parked at the conversion REBALANCE_IN_PROGRESS)."""
    return E.rebalance_in_progress if isinstance(exc, GroupReplaced) else STORAGE_FAILURE


def _brief(outcome: object) -> str:
    """A short form of a join/sync decision for DEBUG logs."""
    if isinstance(outcome, JoinResult):
        return f"{outcome.error.name} gen {outcome.generation} leader {outcome.leader}"
    if isinstance(outcome, SyncResult):
        return outcome.error.name
    if isinstance(outcome, tuple):
        return f"{outcome[0].name} {outcome[1]}"
    return str(getattr(outcome, "name", outcome))
