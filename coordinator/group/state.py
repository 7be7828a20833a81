"""The classic group protocol's states and, as tables, what each request does in each state.

Theory of operation
-------------------
A classic group (JoinGroup/SyncGroup/Heartbeat/LeaveGroup, KIP-62/KIP-345/KIP-394) moves
through five states; the paragraphs are Kafka's (``ClassicGroupState.java``), condensed.

EMPTY: the group has no members, but may have committed offsets (a "simple" group created by
  an OffsetCommit with generation -1 is also Empty).
  *Action*: JoinGroup from a new member starts a rebalance; OffsetCommit with generation -1 is
  accepted; Heartbeat/SyncGroup answer UNKNOWN_MEMBER_ID.
  *Transition*: first member joins -> PREPARING_REBALANCE; group deleted -> DEAD.

PREPARING_REBALANCE: the group waits for members to (re)join.
  *Action*: Heartbeat and SyncGroup answer REBALANCE_IN_PROGRESS; JoinGroups are parked until
  every known member has joined or the rebalance timeout (the largest of the members') runs
  out. The first rebalance of an Empty group also waits ``group.initial.rebalance.delay.ms``
  (extended while new members keep arriving, never past the rebalance timeout).
  *Transition*: joins complete with members -> COMPLETING_REBALANCE (generation + 1, members
  that did not rejoin are removed, a protocol is selected, a leader kept or chosen); joins
  complete with none -> EMPTY (generation + 1); group deleted -> DEAD.

COMPLETING_REBALANCE: the group waits for the leader's assignment (SyncGroup).
  *Action*: SyncGroups are parked until the leader's arrives; Heartbeat answers NONE; a member
  rejoining with unchanged metadata gets the current generation again; OffsetCommit answers
  REBALANCE_IN_PROGRESS.
  *Transition*: leader's SyncGroup persisted -> STABLE; a member joins with new metadata,
  leaves or dies, or the sync timeout removes members that never synced -> PREPARING_REBALANCE.

STABLE: every member has its assignment.
  *Action*: Heartbeat NONE; SyncGroup answers the member's assignment at once; a follower
  rejoining with unchanged metadata gets the current generation; OffsetCommit accepted from
  members of the current generation.
  *Transition*: a member joins (new, the leader, or changed metadata), leaves or dies ->
  PREPARING_REBALANCE; a static member rejoining with a new member id and unchanged protocol
  stays STABLE (KIP-345).

DEAD: the group has been deleted (DeleteGroups) or unloaded; nothing is accepted. A later
  JoinGroup or OffsetCommit creates a new group of the same name.

The tables below decide a request once the common checks (group exists, member known,
instance id not fenced, generation) passed. Missing pairs are not possible by construction.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from kio.schema.errors import ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = GroupState
E = ErrorCode

# target -> the states it may be entered from (Kafka's validPreviousStates).
VALID_PREVIOUS: Final[Mapping[GroupState, frozenset[GroupState]]] = MappingProxyType(
    {
        S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
        S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
        S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
        S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
        S.DEAD: frozenset(GroupState),
    }
)


class Act(enum.Enum):
    """What a request does when it is not simply answered with an error code."""

    AWAIT_JOIN = "park the JoinGroup until the join phase completes"
    REBALANCE = "update the member and start a rebalance, then park the JoinGroup"
    CURRENT_GENERATION = "answer the JoinGroup at once with the current generation"
    AWAIT_SYNC = "park the SyncGroup until the leader's assignment is persisted"
    PERSIST_ASSIGNMENT = "leader's SyncGroup: persist the assignment, then go STABLE"
    CURRENT_ASSIGNMENT = "answer the SyncGroup at once with the member's assignment"
    CHECK_JOIN_COMPLETE = "remove the member, then complete the join phase if all joined"
    CHECK_MEMBER = "check member id, instance id and generation"


class JoinKind(enum.Enum):
    """A JoinGroup from a member the group already has."""

    SAME_FOLLOWER = "unchanged protocols, not the leader"
    SAME_LEADER = "unchanged protocols, the leader"
    CHANGED = "protocols changed"


# JoinGroup from a known member (Kafka's classicGroupJoinExistingMember).
JOIN_EXISTING: Final[Mapping[tuple[GroupState, JoinKind], Act | ErrorCode]] = MappingProxyType(
    {
        **{(S.EMPTY, k): E.unknown_member_id for k in JoinKind},
        **{(S.DEAD, k): E.coordinator_not_available for k in JoinKind},
        **{(S.PREPARING_REBALANCE, k): Act.AWAIT_JOIN for k in JoinKind},
        (S.COMPLETING_REBALANCE, JoinKind.SAME_FOLLOWER): Act.CURRENT_GENERATION,
        (S.COMPLETING_REBALANCE, JoinKind.SAME_LEADER): Act.CURRENT_GENERATION,
        (S.COMPLETING_REBALANCE, JoinKind.CHANGED): Act.REBALANCE,
        (S.STABLE, JoinKind.SAME_FOLLOWER): Act.CURRENT_GENERATION,
        (S.STABLE, JoinKind.SAME_LEADER): Act.REBALANCE,
        (S.STABLE, JoinKind.CHANGED): Act.REBALANCE,
    }
)

# Heartbeat from a known member of the current generation.
HEARTBEAT: Final[Mapping[GroupState, ErrorCode]] = MappingProxyType(
    {
        S.EMPTY: E.unknown_member_id,
        S.PREPARING_REBALANCE: E.rebalance_in_progress,
        S.COMPLETING_REBALANCE: E.none,  # members may heartbeat between join and sync
        S.STABLE: E.none,
        S.DEAD: E.coordinator_not_available,
    }
)

# SyncGroup from a known member of the current generation; (state, is leader).
SYNC: Final[Mapping[tuple[GroupState, bool], Act | ErrorCode]] = MappingProxyType(
    {
        **{(S.EMPTY, lead): E.unknown_member_id for lead in (False, True)},
        **{(S.DEAD, lead): E.coordinator_not_available for lead in (False, True)},
        **{(S.PREPARING_REBALANCE, lead): E.rebalance_in_progress for lead in (False, True)},
        (S.COMPLETING_REBALANCE, False): Act.AWAIT_SYNC,
        (S.COMPLETING_REBALANCE, True): Act.PERSIST_ASSIGNMENT,
        **{(S.STABLE, lead): Act.CURRENT_ASSIGNMENT for lead in (False, True)},
    }
)

# LeaveGroup of a known member (the member is removed first in every non-error case).
LEAVE: Final[Mapping[GroupState, Act | ErrorCode]] = MappingProxyType(
    {
        S.EMPTY: E.unknown_member_id,
        S.DEAD: E.coordinator_not_available,
        S.PREPARING_REBALANCE: Act.CHECK_JOIN_COMPLETE,
        S.COMPLETING_REBALANCE: Act.REBALANCE,
        S.STABLE: Act.REBALANCE,
    }
)
