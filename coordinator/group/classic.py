"""One classic group: members, generation, timers, and the decisions of the group protocol.

Theory of operation
-------------------
``ClassicGroup`` is pure: every method takes ``now_ms`` (the runtime's monotonic clock) and
returns values. It never awaits, reads a clock or touches storage. Requests that Kafka parks
(JoinGroup until the join phase completes, SyncGroup until the leader's assignment is
persisted) return ``Act.AWAIT_JOIN``/``Act.AWAIT_SYNC``; their answers are later put in
``outbox`` as ``(member id, JoinResult | SyncResult)`` for the runtime to hand to the parked
request. The state tables live in ``coordinator.group.state``. ``group.max.size`` is checked
first, as Kafka's ``acceptJoiningMember`` does.

Timers are deadlines on the group, checked by ``expire(now_ms)``:
* each member's session deadline (reset by every JoinGroup, SyncGroup and Heartbeat, when the
  join phase completes and when a parked SyncGroup is answered); a member with a parked
  JoinGroup or SyncGroup is kept alive, as in Kafka;
* members that got MEMBER_ID_REQUIRED (KIP-394) must rejoin within their session timeout; one
  that does not may be the last the join phase waited for, which then completes;
* the join phase ends when every member rejoined, or at the rebalance timeout: dynamic members
  that did not rejoin are removed, static ones (KIP-345) stay and are listed to the leader;
  if nobody rejoined it waits another rebalance timeout;
* the rebalance timeout is the largest of the members'; the first rebalance of an Empty group
  ends after ``group.initial.rebalance.delay.ms`` (extended by that delay while new members
  keep arriving, never past the rebalance timeout);
* after the join phase, members that do not send SyncGroup within the rebalance timeout are
  removed and the group rebalances.

Persistence: the group metadata record (``GroupMetadataValue``) is written when the leader's
assignment is accepted (before the group goes STABLE), when a join phase ends with no members
(EMPTY, new generation) and when a static member is replaced in a STABLE group.
``coordinator.group.group_record`` converts; a group loaded from its record is STABLE with its
members (their session timers start at load) or EMPTY.

Deliberate differences from Kafka: Kafka's 5-minute timeout for new members parked in a join
phase is not kept (the rebalance timeout bounds every join phase here); the protocol vote
breaks ties by the first member's preference.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from coordinator.group.members import (
    NEVER,
    GroupConfig,
    JoinRequest,
    JoinResult,
    Member,
    SyncResult,
)
from coordinator.group.state import (
    HEARTBEAT,
    JOIN_EXISTING,
    LEAVE,
    SYNC,
    VALID_PREVIOUS,
    Act,
    GroupState,
    JoinKind,
)

S = GroupState
E = ErrorCode
__all__ = ["NEVER", "ClassicGroup", "GroupConfig", "JoinRequest", "JoinResult", "SyncResult"]


@dataclass(frozen=True, slots=True)
class StaticRejoin:
    """What a static member's rejoin in STABLE replaced, to undo it if persisting fails
    (Kafka's ``updateStaticMemberThenRebalanceOrCompleteJoin`` append callback)."""

    instance_id: str
    old_member_id: str
    new_member_id: str
    protocols: tuple[tuple[str, bytes], ...]
    rebalance_timeout_ms: int
    session_timeout_ms: int
    leader_before: str
    answer: JoinResult


@dataclass
class ClassicGroup:
    group_id: str
    config: GroupConfig = field(default_factory=GroupConfig)
    state: GroupState = S.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> deadline
    pending_sync: set[str] = field(default_factory=set)
    join_deadline: int = NEVER
    initial_delay_deadline: int = NEVER
    initial_delay_left_ms: int = 0
    new_member_added: bool = False
    sync_deadline: int = NEVER
    state_timestamp_ms: int | None = None  # monotonic; None: unknown
    outbox: list[tuple[str, JoinResult | SyncResult]] = field(default_factory=list)
    persist_requested: bool = False  # the runtime must write the group's record
    # a static member's rejoin while STABLE that the runtime must persist before answering
    # (``complete_static_rejoin`` / ``revert_static_rejoin``)
    static_rejoin: StaticRejoin | None = None

    # -- state ------------------------------------------------------------------------------

    def transition(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise AssertionError(f"{self.group_id}: {self.state} -> {target} is not legal")
        self.state = target
        self.state_timestamp_ms = now_ms

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: Sequence[tuple[str, bytes]]) -> bool:
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str | None:
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(name for name, _ in m.protocols if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        if not votes:
            return None
        best = max(votes.values())
        first = next(iter(self.members.values()))
        return next(n for n, _ in first.protocols if votes.get(n) == best)

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's ClassicGroup.validateMember: known member, static member not fenced."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                return E.unknown_member_id
            if existing != member_id:
                return E.fenced_instance_id
            return E.none
        return E.none if member_id in self.members else E.unknown_member_id

    # -- members ----------------------------------------------------------------------------

    def add_member(self, m: Member, now_ms: int) -> None:
        if not self.members:
            self.protocol_type = m.protocol_type
        self.members[m.member_id] = m
        if m.group_instance_id is not None:
            self.static_members[m.group_instance_id] = m.member_id
        if self.leader_id is None:
            self.leader_id = m.member_id
        m.session_deadline = now_ms + m.session_timeout_ms

    def remove_member(self, member_id: str) -> None:
        m = self.members.pop(member_id)
        if m.group_instance_id is not None:
            self.static_members.pop(m.group_instance_id, None)
        self.pending_sync.discard(member_id)
        if m.awaiting_join:
            self.outbox.append((member_id, JoinResult(E.unknown_member_id, member_id)))
        if m.awaiting_sync:
            self.outbox.append((member_id, SyncResult(E.unknown_member_id)))
        if self.leader_id == member_id:
            joined = [k for k, v in self.members.items() if v.awaiting_join]
            rest = joined or list(self.members)
            self.leader_id = rest[0] if rest else None

    def _update_member(self, m: Member, req: JoinRequest) -> None:
        m.protocols = req.protocols
        m.rebalance_timeout_ms = req.rebalance_timeout_ms
        m.session_timeout_ms = req.session_timeout_ms
        m.client_id, m.client_host = req.client_id, req.client_host

    # -- JoinGroup --------------------------------------------------------------------------

    def join(self, req: JoinRequest, now_ms: int) -> JoinResult | tuple[Act, str]:
        """A JoinGroup. Returns an immediate answer, or (AWAIT_JOIN, member id) when parked."""
        if not self.config.accepts_session_timeout(req.session_timeout_ms):
            return JoinResult(E.invalid_session_timeout, req.member_id)
        if not self._accept_joining_member(req.member_id):
            if req.member_id in self.members:
                self.remove_member(req.member_id)
            self.pending_members.pop(req.member_id, None)
            return JoinResult(E.group_max_size_reached, "")
        if self.state is S.DEAD:
            return JoinResult(E.coordinator_not_available, req.member_id)
        if not self.supports(req.protocol_type, req.protocols):
            return JoinResult(E.inconsistent_group_protocol, req.member_id)
        if req.member_id == "":
            return self._join_new(req, now_ms)
        return self._join_existing(req, now_ms)

    def _accept_joining_member(self, member_id: str) -> bool:
        """Kafka's acceptJoiningMember (``group.max.size``). While the group prepares a
        rebalance, members already parked in JoinGroup are accepted and others only while fewer
        than the maximum are parked, so a group over the maximum (after the config was lowered)
        sheds its last rejoiners; otherwise members are accepted and new ones only while the
        group has fewer members than the maximum."""
        if self.state in (S.EMPTY, S.DEAD):
            return True
        m = self.members.get(member_id)
        if self.state is S.PREPARING_REBALANCE:
            parked = sum(1 for x in self.members.values() if x.awaiting_join)
            return (m is not None and m.awaiting_join) or parked < self.config.max_size
        return m is not None or len(self.members) < self.config.max_size

    def _join_new(self, req: JoinRequest, now_ms: int) -> JoinResult | tuple[Act, str]:
        new_id = f"{req.group_instance_id or req.client_id}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            old_id = self.static_members.get(req.group_instance_id)
            if old_id is not None:
                return self._replace_static(old_id, new_id, req, now_ms)
        if req.group_instance_id is None and req.require_known_member_id:
            self.pending_members[new_id] = now_ms + req.session_timeout_ms
            return JoinResult(E.member_id_required, new_id)
        return self._add_and_rebalance(new_id, req, now_ms)

    def _add_and_rebalance(self, member_id: str, req: JoinRequest, now_ms: int) -> tuple[Act, str]:
        m = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            req.protocols,
            awaiting_join=True,
        )
        self.add_member(m, now_ms)
        self.new_member_added = True
        self._rebalance_or_complete(now_ms)
        return Act.AWAIT_JOIN, member_id

    def _join_existing(self, req: JoinRequest, now_ms: int) -> JoinResult | tuple[Act, str]:
        if req.member_id in self.pending_members:
            del self.pending_members[req.member_id]
            return self._add_and_rebalance(req.member_id, req, now_ms)
        if (err := self.validate_member(req.member_id, req.group_instance_id)) is not E.none:
            return JoinResult(err, req.member_id)
        m = self.members[req.member_id]
        if m.protocols != req.protocols:
            kind = JoinKind.CHANGED
        else:
            kind = JoinKind.SAME_LEADER if self.is_leader(m.member_id) else JoinKind.SAME_FOLLOWER
        act = JOIN_EXISTING[(self.state, kind)]
        if isinstance(act, ErrorCode):
            return JoinResult(act, req.member_id)
        m.session_deadline = now_ms + req.session_timeout_ms
        if act is Act.CURRENT_GENERATION:
            return self._current_generation(m, leader=self.leader_id or "")
        self._update_member(m, req)
        m.awaiting_join = True
        if act is Act.REBALANCE:
            self.prepare_rebalance(now_ms)
        else:
            self.maybe_complete_join(now_ms)
        return Act.AWAIT_JOIN, m.member_id

    def _rename_static(self, instance_id: str, old_id: str, new_id: str) -> None:
        m = self.members.pop(old_id)
        m.member_id = new_id
        self.members[new_id] = m
        self.static_members[instance_id] = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        if self.leader_id == old_id:
            self.leader_id = new_id

    def revert_static_rejoin(
        self, rejoin: StaticRejoin, code: ErrorCode, now_ms: int
    ) -> JoinResult:
        """Persisting ``rejoin`` failed: the member gets its old id and settings back (the old
        id is what the log still holds), unless the instance has moved on since, and the
        JoinGroup is answered ``code`` with no member id, as Kafka does."""
        m = self.members.get(rejoin.new_member_id)
        if m is not None and self.static_members.get(rejoin.instance_id) == rejoin.new_member_id:
            m.protocols = rejoin.protocols
            m.rebalance_timeout_ms = rejoin.rebalance_timeout_ms
            m.session_timeout_ms = rejoin.session_timeout_ms
            m.session_deadline = now_ms + m.session_timeout_ms
            self._rename_static(rejoin.instance_id, rejoin.new_member_id, rejoin.old_member_id)
        return JoinResult(
            code,
            "",
            self.generation,
            self.protocol_type,
            self.protocol_name,
            rejoin.leader_before,
        )

    def _current_generation(self, m: Member, leader: str) -> JoinResult:
        lead = self.is_leader(m.member_id)
        return JoinResult(
            E.none,
            m.member_id,
            self.generation,
            self.protocol_type,
            self.protocol_name,
            leader,
            self._member_list() if lead else (),
            skip_assignment=False,
        )

    def _replace_static(
        self, old_id: str, new_id: str, req: JoinRequest, now_ms: int
    ) -> JoinResult | tuple[Act, str]:
        """KIP-345: a static member came back with a new member id; the old one is fenced."""
        current_leader = self.leader_id or ""
        m = self.members[old_id]
        if m.awaiting_join:
            self.outbox.append((old_id, JoinResult(E.fenced_instance_id, old_id)))
        if m.awaiting_sync:
            self.outbox.append((old_id, SyncResult(E.fenced_instance_id)))
            m.awaiting_sync = False
        old_settings = (m.protocols, m.rebalance_timeout_ms, m.session_timeout_ms)
        self._rename_static(req.group_instance_id or "", old_id, new_id)
        old_selected = self.select_protocol()
        self._update_member(m, req)
        m.session_deadline = now_ms + req.session_timeout_ms
        if self.state is S.STABLE:
            if self.select_protocol() != old_selected or self.protocol_name != old_selected:
                m.awaiting_join = True
                self.prepare_rebalance(now_ms)
                return Act.AWAIT_JOIN, new_id
            if req.supports_skip_assignment:
                # KIP-814 (v9+): a rejoining leader is told it leads, with the members, and that
                # it need not assign again
                lead = self.is_leader(new_id)
                result = self._current_generation(m, leader=self.leader_id or "")
                answer = replace(result, skip_assignment=lead)
            else:
                # older versions: the leader id from before the replacement and no member list,
                # so a restarted leader acts as a follower and keeps the current assignment
                answer = replace(self._current_generation(m, leader=current_leader), members=())
            # the runtime sends this answer only once the group's record with the new member
            # id is durable, and undoes the rejoin if that write fails (``static_rejoin``)
            self.persist_requested = True
            self.static_rejoin = StaticRejoin(
                req.group_instance_id or "", old_id, new_id, *old_settings, current_leader, answer
            )
            return answer
        m.awaiting_join = True
        if self.state is S.COMPLETING_REBALANCE:
            self.prepare_rebalance(now_ms)
        else:
            self.maybe_complete_join(now_ms)
        return Act.AWAIT_JOIN, new_id

    def _member_list(self) -> tuple[tuple[str, str | None, bytes], ...]:
        return tuple(
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    def _rebalance_or_complete(self, now_ms: int) -> None:
        if self.state in (S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            self.prepare_rebalance(now_ms)
        elif self.state is S.PREPARING_REBALANCE:
            self.maybe_complete_join(now_ms)

    # -- rebalance --------------------------------------------------------------------------

    def prepare_rebalance(self, now_ms: int) -> None:
        if self.state is S.COMPLETING_REBALANCE:
            # members parked in SyncGroup learn that the generation is over; no assignment of
            # it is kept
            self._reset_assignments(E.rebalance_in_progress, now_ms)
        self.pending_sync.clear()
        self.sync_deadline = NEVER
        initial = self.state is S.EMPTY
        self.transition(S.PREPARING_REBALANCE, now_ms)
        timeout = self.rebalance_timeout_ms
        if initial and self.config.initial_rebalance_delay_ms > 0:
            delay = min(self.config.initial_rebalance_delay_ms, timeout)
            self.initial_delay_deadline = now_ms + delay
            self.initial_delay_left_ms = max(timeout - delay, 0)
            self.new_member_added = False
            self.join_deadline = NEVER
        else:
            self.initial_delay_deadline = NEVER
            self.join_deadline = now_ms + timeout
            self.maybe_complete_join(now_ms)

    def _reset_sync(self, member_id: str, code: ErrorCode, now_ms: int) -> None:
        m = self.members.get(member_id)
        if m is not None and m.awaiting_sync:
            self._answer_sync(m, SyncResult(code), now_ms)

    def _answer_sync(self, m: Member, result: SyncResult, now_ms: int) -> None:
        """Answer a parked SyncGroup; the member's session starts again from now (Kafka's
        propagateAssignment), however long the leader took."""
        m.awaiting_sync = False
        m.session_deadline = now_ms + m.session_timeout_ms
        self.outbox.append((m.member_id, result))

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def maybe_complete_join(self, now_ms: int) -> None:
        if (
            self.state is S.PREPARING_REBALANCE
            and self.initial_delay_deadline == NEVER
            and self.all_joined()
        ):
            self.complete_join(now_ms)

    def complete_join(self, now_ms: int) -> None:
        """End the join phase (Kafka's completeClassicGroupJoin): drop the dynamic members that
        did not rejoin (static ones stay, KIP-345), keep or elect a leader among those that
        did, start a new generation. If no member rejoined, wait another rebalance timeout."""
        for mid in [
            k
            for k, m in self.members.items()
            if not m.awaiting_join and m.group_instance_id is None
        ]:
            self.remove_member(mid)
        self.pending_members.clear()
        self.join_deadline = self.initial_delay_deadline = NEVER
        leader = self.members.get(self.leader_id or "")
        if leader is not None and not leader.awaiting_join:
            joined = next((k for k, m in self.members.items() if m.awaiting_join), None)
            if joined is None:  # only silent static members: give them time to come back
                self.join_deadline = now_ms + self.rebalance_timeout_ms
                return
            self.leader_id = joined
        self.generation += 1
        if not self.members:
            self.protocol_name = None
            self.leader_id = None
            self.transition(S.EMPTY, now_ms)
            self.persist_requested = True
            return
        self.protocol_name = self.select_protocol()
        self.transition(S.COMPLETING_REBALANCE, now_ms)
        self.pending_sync = set(self.members)
        self.sync_deadline = now_ms + self.rebalance_timeout_ms
        for m in self.members.values():
            if m.awaiting_join:
                m.awaiting_join = False
                self.outbox.append((m.member_id, self._current_generation(m, self.leader_id or "")))
            m.session_deadline = now_ms + m.session_timeout_ms

    # -- SyncGroup ----------------------------------------------------------------------------

    def sync(
        self,
        member_id: str,
        instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol_name: str | None,
        now_ms: int,
    ) -> SyncResult | Act:
        if self.state is S.DEAD:
            return SyncResult(E.coordinator_not_available)
        if (err := self.validate_member(member_id, instance_id)) is not E.none:
            return SyncResult(err)
        if generation != self.generation:
            return SyncResult(E.illegal_generation)
        if (protocol_type is not None and protocol_type != self.protocol_type) or (
            protocol_name is not None and protocol_name != self.protocol_name
        ):
            return SyncResult(E.inconsistent_group_protocol)
        act = SYNC[(self.state, self.is_leader(member_id))]
        if isinstance(act, ErrorCode):
            return SyncResult(act)
        m = self.members[member_id]
        m.session_deadline = now_ms + m.session_timeout_ms
        self.pending_sync.discard(member_id)
        if not self.pending_sync:
            self.sync_deadline = NEVER
        if act is Act.CURRENT_ASSIGNMENT:
            return self._sync_result(m)
        m.awaiting_sync = True
        return act

    def _sync_result(self, m: Member) -> SyncResult:
        return SyncResult(E.none, self.protocol_type, self.protocol_name, m.assignment)

    def complete_assignment(
        self, generation: int, assignments: Mapping[str, bytes], now_ms: int
    ) -> None:
        """The leader's assignment is persisted: go STABLE and answer parked SyncGroups."""
        if self.state is not S.COMPLETING_REBALANCE or generation != self.generation:
            return
        for mid, m in self.members.items():
            m.assignment = assignments.get(mid, b"")
        self.transition(S.STABLE, now_ms)
        for m in self.members.values():
            if m.awaiting_sync:
                self._answer_sync(m, self._sync_result(m), now_ms)

    def fail_assignment(self, generation: int, code: ErrorCode, now_ms: int) -> None:
        """Persisting the assignment failed: every assignment is reset, parked SyncGroups
        (the leader's too) get ``code``, and the group rebalances (Kafka's
        ``resetAndPropagateAssignmentWithError`` then ``maybePrepareRebalanceOrCompleteJoin``)."""
        if self.state is not S.COMPLETING_REBALANCE or generation != self.generation:
            return
        self._reset_assignments(code, now_ms)
        self.prepare_rebalance(now_ms)

    def _reset_assignments(self, code: ErrorCode, now_ms: int) -> None:
        for mid, m in self.members.items():
            m.assignment = b""
            self._reset_sync(mid, code, now_ms)

    # -- Heartbeat, LeaveGroup ---------------------------------------------------------------

    def heartbeat(
        self, member_id: str, instance_id: str | None, generation: int, now_ms: int
    ) -> ErrorCode:
        if self.state is S.DEAD:
            return E.coordinator_not_available
        if (err := self.validate_member(member_id, instance_id)) is not E.none:
            return err
        if generation != self.generation:
            return E.illegal_generation
        code = HEARTBEAT[self.state]
        m = self.members.get(member_id)
        if m is not None:
            m.session_deadline = now_ms + m.session_timeout_ms
        return code

    def leave(self, member_id: str, instance_id: str | None, now_ms: int) -> ErrorCode:
        """One member of a LeaveGroup (Kafka's classicGroupLeave)."""
        if self.state is S.DEAD:
            return E.coordinator_not_available
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                return E.unknown_member_id
            if member_id and existing != member_id:
                return E.fenced_instance_id
            member_id = existing
        elif member_id in self.pending_members:
            self._remove_pending(member_id, now_ms)
            return E.none
        elif member_id not in self.members:
            return E.unknown_member_id
        self.remove_member(member_id)
        self._after_removal(now_ms)
        return E.none

    def _remove_pending(self, member_id: str, now_ms: int) -> None:
        """A member that got MEMBER_ID_REQUIRED left or did not come back in time (Kafka's
        removePendingMemberAndUpdateClassicGroup): the join phase may be complete without it."""
        del self.pending_members[member_id]
        if self.state is S.PREPARING_REBALANCE and self.all_joined():
            self.complete_join(now_ms)

    def _after_removal(self, now_ms: int) -> None:
        act = LEAVE[self.state]
        if act is Act.REBALANCE:
            self.prepare_rebalance(now_ms)
        elif act is Act.CHECK_JOIN_COMPLETE:
            self.maybe_complete_join(now_ms)

    # -- timers -------------------------------------------------------------------------------

    def next_deadline(self) -> int:
        return min(
            [self.join_deadline, self.initial_delay_deadline, self.sync_deadline]
            + list(self.pending_members.values())
            + [
                m.session_deadline
                for m in self.members.values()
                if not (m.awaiting_join or m.awaiting_sync)
            ]
        )

    def expire(self, now_ms: int) -> list[str]:
        """Everything whose deadline passed; returns the member ids removed."""
        removed: list[str] = []
        for mid, deadline in list(self.pending_members.items()):
            if deadline <= now_ms:
                self._remove_pending(mid, now_ms)
        for mid, m in list(self.members.items()):
            if m.session_deadline <= now_ms and not (m.awaiting_join or m.awaiting_sync):
                self.remove_member(mid)
                removed.append(mid)
                self._after_removal(now_ms)
        if self.state is S.PREPARING_REBALANCE and self.initial_delay_deadline <= now_ms:
            if self.new_member_added and self.initial_delay_left_ms > 0:
                delay = min(self.config.initial_rebalance_delay_ms, self.initial_delay_left_ms)
                self.initial_delay_left_ms -= delay
                self.initial_delay_deadline = now_ms + delay
                self.new_member_added = False
            else:
                self.initial_delay_deadline = NEVER
                self.complete_join(now_ms)
        if self.state is S.PREPARING_REBALANCE and self.join_deadline <= now_ms:
            self.complete_join(now_ms)
        if self.sync_deadline <= now_ms:
            self.sync_deadline = NEVER
            late = [mid for mid in self.pending_sync if mid in self.members]
            self.pending_sync.clear()
            if late and self.state in (S.COMPLETING_REBALANCE, S.STABLE):
                for mid in late:
                    self.remove_member(mid)
                    removed.append(mid)
                self.prepare_rebalance(now_ms)
        return removed
