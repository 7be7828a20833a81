"""Offset commits and fetches against a consumer group: Kafka's ConsumerGroup
``validateOffsetCommit`` / ``validateOffsetFetch``.

A member commits with its member id and member epoch (OffsetCommit v9+, TxnOffsetCommit v3+
carry them as member id and generation id). A commit from a member whose epoch is not the
group's record of it is STALE_MEMBER_EPOCH: the member must heartbeat to learn its epoch
before committing again. This is what fences a zombie transactional consumer (KIP-447 with
member epochs): its TxnOffsetCommit carries a member id the group no longer knows
(UNKNOWN_MEMBER_ID) or an epoch it has moved past (STALE_MEMBER_EPOCH, which the producer
treats as CommitFailed). A member using the classic protocol (online migration) commits with
its generation, which is its member epoch; a mismatch is ILLEGAL_GENERATION, as in a classic
group. A commit with epoch -1 is accepted only while the group has no
members (the admin client, or a consumer outside group management).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.consumer_group.model import ConsumerGroup

E = ErrorCode


def validate_offset_commit(
    g: ConsumerGroup, member_id: str, member_epoch: int, txn: bool, version: int
) -> ErrorCode:
    """``version`` is OffsetCommit's; a plain commit below v9 cannot carry a member epoch
    (UNSUPPORTED_VERSION for a consumer-protocol member, as Kafka answers)."""
    if member_epoch < 0 and not g.members:
        return E.none
    m = g.members.get(member_id)
    if m is None:
        return E.unknown_member_id
    if not txn and m.classic is None and version < 9:
        return E.unsupported_version
    if member_epoch != m.member_epoch:  # a classic member's generation is its member epoch
        return E.illegal_generation if m.classic is not None else E.stale_member_epoch
    return E.none


def validate_offset_fetch(g: ConsumerGroup, member_id: str | None, member_epoch: int) -> ErrorCode:
    """OffsetFetch v9+ may name the member and its epoch (the new consumer does, with
    ``require_stable``); without them the fetch is accepted."""
    if member_id is None and member_epoch < 0:
        return E.none
    m = g.members.get(member_id or "")
    if m is None:
        return E.unknown_member_id
    if member_epoch != m.member_epoch:
        return E.illegal_generation if m.classic is not None else E.stale_member_epoch
    return E.none
