"""The decisions of proxy/fetch_session.py (Kafka's FetchSession.scala), without a broker."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

import pytest
from kio.schema.errors import ErrorCode

from proxy.fetch_session import (
    EVICTION_MS,
    NUM_SHARDS,
    FetchSessionCache,
    Kind,
    PartitionRequest,
    TopicIdPartition,
    next_epoch,
)
from wire.values import INT_MAX

T1 = uuid.UUID(int=11)
T2 = uuid.UUID(int=22)
NAMES = {T1: "a", T2: "b"}
V = 17  # a topic-id version
OLD = 12  # a name version


def resolve(topic_id: uuid.UUID) -> str | None:
    return NAMES.get(topic_id)


def tp(topic_id: uuid.UUID, partition: int) -> TopicIdPartition:
    return TopicIdPartition(topic_id, resolve(topic_id), partition)


def want(offset: int = 0, max_bytes: int = 100) -> PartitionRequest:
    return PartitionRequest(offset, max_bytes)


@dataclass
class Ans:
    error_code: ErrorCode = ErrorCode.none
    high_watermark: int = 10
    log_start_offset: int = 0
    records: bytes | None = b""


def cache(slots: int = 1000) -> FetchSessionCache:
    return FetchSessionCache(slots, random.Random(7))


def full(c: FetchSessionCache, parts: list[TopicIdPartition], now: int = 0, **kw: object) -> int:
    ctx = c.new_context(V, 0, 0, bool(kw.get("privileged")), [(p, want()) for p in parts], [],
                        resolve, now)  # fmt: skip
    assert ctx.kind is Kind.FULL
    _, session_id, _ = ctx.respond([(p, Ans()) for p in parts], now)
    return session_id


def test_next_epoch_wraps_to_one_and_final_stays_final() -> None:
    assert [next_epoch(0), next_epoch(5), next_epoch(INT_MAX), next_epoch(-1)] == [1, 6, 1, -1]


def test_sessionless_fetch_answers_everything_with_session_id_zero() -> None:
    c = cache()
    parts = [(tp(T1, 0), want())]
    ctx = c.new_context(V, 0, -1, False, parts, [], resolve, 0)
    assert ctx.kind is Kind.SESSIONLESS and ctx.partitions() == parts
    assert ctx.respond([(tp(T1, 0), Ans())], 0) == (ErrorCode.none, 0, [(tp(T1, 0), Ans())])
    assert len(c) == 0


def test_full_fetch_creates_a_session_in_the_first_shard_at_epoch_one() -> None:
    c = cache()
    sid = full(c, [tp(T1, 0), tp(T1, 1)])
    assert 1 <= sid < INT_MAX // NUM_SHARDS  # round-robin starts at shard 0
    session = c.get(sid)
    assert session is not None and session.epoch == 1 and len(session.partitions) == 2
    assert c.shard_of(full(c, [tp(T1, 0)])) is c.shards[1]  # the next one goes to shard 1


def test_incremental_fetch_leaves_out_unchanged_partitions_and_moves_data_to_the_back() -> None:
    c = cache()
    sid = full(c, [tp(T1, 0), tp(T1, 1), tp(T2, 0)])
    ctx = c.new_context(V, sid, 1, False, [], [], resolve, 1)
    assert ctx.kind is Kind.INCREMENTAL
    assert [p for p, _ in ctx.partitions()] == [tp(T1, 0), tp(T1, 1), tp(T2, 0)]
    answers = [
        (tp(T1, 0), Ans(records=b"x")),
        (tp(T1, 1), Ans()),
        (tp(T2, 0), Ans(high_watermark=11)),
    ]
    code, got_sid, kept = ctx.respond(answers, 1)
    assert (code, got_sid) == (ErrorCode.none, sid)
    assert [p for p, _ in kept] == [tp(T1, 0), tp(T2, 0)]  # new records, a new high watermark
    nxt = c.new_context(V, sid, 2, False, [], [], resolve, 2)
    assert [p for p, _ in nxt.partitions()] == [tp(T1, 1), tp(T2, 0), tp(T1, 0)]
    assert nxt.respond([(p, Ans(high_watermark=11 if p == tp(T2, 0) else 10)) for p in
                        [tp(T1, 1), tp(T2, 0), tp(T1, 0)]], 2)[2] == []  # fmt: skip


def test_incremental_fetch_updates_adds_and_forgets() -> None:
    c = cache()
    sid = full(c, [tp(T1, 0), tp(T1, 1)])
    ctx = c.new_context(V, sid, 1, False, [(tp(T1, 1), want(5)), (tp(T2, 0), want())],
                        [tp(T1, 0)], resolve, 1)  # fmt: skip
    assert ctx.partitions() == [(tp(T1, 1), want(5)), (tp(T2, 0), want())]
    answers = [(tp(T1, 1), Ans()), (tp(T2, 0), Ans())]
    assert [p for p, _ in ctx.respond(answers, 1)[2]] == [tp(T2, 0)]  # only the new one is news


def test_a_partition_in_error_is_always_answered_and_answered_again_once_it_recovers() -> None:
    c = cache()
    sid = full(c, [tp(T1, 0)])
    err = Ans(error_code=ErrorCode.offset_out_of_range)
    assert c.new_context(V, sid, 1, False, [], [], resolve, 1).respond([(tp(T1, 0), err)], 1)[2]
    ok = c.new_context(V, sid, 2, False, [], [], resolve, 2).respond([(tp(T1, 0), Ans())], 2)
    assert ok[2] == [(tp(T1, 0), Ans())]


@dataclass
class Diverging(Ans):
    diverging_epoch: tuple[int, int] | None = (0, 4)


def test_a_diverging_partition_is_always_answered() -> None:
    """Kafka's ``maybeUpdateResponseData``: ``isDivergingEpoch`` makes the partition news."""
    c = cache()
    sid = full(c, [tp(T1, 0)])
    for epoch in (1, 2):
        ctx = c.new_context(V, sid, epoch, False, [], [], resolve, epoch)
        assert ctx.respond([(tp(T1, 0), Diverging())], epoch)[2]
    quiet = c.new_context(V, sid, 3, False, [], [], resolve, 3)
    assert not quiet.respond([(tp(T1, 0), Diverging(diverging_epoch=None))], 3)[2]


@pytest.mark.parametrize(
    ("sid_delta", "epoch", "version", "code"),
    [
        (1, 1, V, ErrorCode.fetch_session_id_not_found),
        (0, 2, V, ErrorCode.invalid_fetch_session_epoch),
        (0, 1, OLD, ErrorCode.fetch_session_topic_id_error),
    ],
)
def test_session_errors(sid_delta: int, epoch: int, version: int, code: ErrorCode) -> None:
    c = cache()
    sid = full(c, [tp(T1, 0)])
    ctx = c.new_context(version, sid + sid_delta, epoch, False, [], [], resolve, 1)
    assert ctx.kind is Kind.SESSION_ERROR
    assert ctx.respond([], 1) == (code, 0, [])
    assert c.get(sid) is not None and c.get(sid).epoch == 1  # type: ignore[union-attr]


def test_a_name_session_refuses_a_topic_id_request() -> None:
    c = cache()
    ctx = c.new_context(OLD, 0, 0, False, [(TopicIdPartition(uuid.UUID(int=0), "a", 0), want())],
                        [], resolve, 0)  # fmt: skip
    sid = ctx.respond([(TopicIdPartition(uuid.UUID(int=0), "a", 0), Ans())], 0)[1]
    assert c.new_context(V, sid, 1, False, [], [], resolve, 1).error is (
        ErrorCode.fetch_session_topic_id_error
    )
    assert c.new_context(OLD, sid, 1, False, [], [], resolve, 1).kind is Kind.INCREMENTAL


@pytest.mark.parametrize(("epoch", "kind"), [(-1, Kind.SESSIONLESS), (0, Kind.FULL)])
def test_a_full_request_naming_a_session_closes_it(epoch: int, kind: Kind) -> None:
    c = cache()
    sid = full(c, [tp(T1, 0)])
    ctx = c.new_context(V, sid, epoch, False, [(tp(T1, 0), want())], [], resolve, 1)
    assert ctx.kind is kind and c.get(sid) is None


def test_forgetting_every_partition_closes_the_session_and_answers_sessionless() -> None:
    c = cache()
    sid = full(c, [tp(T1, 0)])
    ctx = c.new_context(V, sid, 1, False, [], [tp(T1, 0)], resolve, 1)
    assert ctx.kind is Kind.SESSIONLESS and c.get(sid) is None
    assert ctx.respond([], 1) == (ErrorCode.none, 0, [])


def test_a_duplicate_request_that_lost_the_race_gets_invalid_epoch_with_the_session_id() -> None:
    c = cache()
    sid = full(c, [tp(T1, 0)])
    first = c.new_context(V, sid, 1, False, [], [], resolve, 1)
    assert c.new_context(V, sid, 1, False, [], [], resolve, 1).error is (
        ErrorCode.invalid_fetch_session_epoch
    )
    c.new_context(V, sid, 2, False, [], [], resolve, 1)  # the session moves on meanwhile
    assert first.respond([(tp(T1, 0), Ans())], 1) == (
        ErrorCode.invalid_fetch_session_epoch,
        sid,
        [],
    )


def test_an_unknown_topic_id_is_cached_unnamed_and_named_once_it_resolves() -> None:
    c = cache()
    ghost = uuid.UUID(int=99)
    sid = full(c, [TopicIdPartition(ghost, None, 0)])
    NAMES[ghost] = "late"
    try:
        ctx = c.new_context(V, sid, 1, False, [], [], resolve, 1)
        assert [p for p, _ in ctx.partitions()] == [TopicIdPartition(ghost, "late", 0)]
    finally:
        del NAMES[ghost]


@pytest.mark.parametrize("session_id", [-(INT_MAX // NUM_SHARDS), INT_MAX - 1])
def test_a_session_id_outside_every_shard_is_an_unknown_server_error(session_id: int) -> None:
    for epoch in (0, 1):
        ctx = cache().new_context(V, session_id, epoch, False, [], [], resolve, 0)
        assert ctx.error is ErrorCode.unknown_server_error


def test_a_small_negative_session_id_routes_to_shard_zero_as_java_division_does() -> None:
    ctx = cache().new_context(V, -5, 1, False, [], [], resolve, 0)
    assert ctx.error is ErrorCode.fetch_session_id_not_found


def test_fewer_slots_than_shards_leave_no_room_for_any_session() -> None:
    assert full(cache(7), [tp(T1, 0)]) == 0


def _fill(c: FetchSessionCache, now: int, size: int = 1, privileged: bool = False) -> list[int]:
    """One session in each shard (slots = 8: one per shard)."""
    return [full(c, [tp(T1, i) for i in range(size)], now, privileged=privileged)
            for _ in range(NUM_SHARDS)]  # fmt: skip


def test_a_full_shard_refuses_an_equal_newcomer_until_its_session_is_stale() -> None:
    c = cache(NUM_SHARDS)
    old = _fill(c, 0)
    assert all(old) and len(c) == NUM_SHARDS
    assert full(c, [tp(T1, 0)], EVICTION_MS) == 0  # shard 0: not stale, not less valuable
    new = full(c, [tp(T1, 0)], EVICTION_MS + 1)  # shard 1: its session unused for > 120 s
    assert new and c.get(old[1]) is None and c.evictions == 1


def test_a_privileged_newcomer_evicts_a_recent_unprivileged_session() -> None:
    c = cache(NUM_SHARDS)
    old = _fill(c, 0, size=5)
    assert full(c, [tp(T1, 0)], 1, privileged=True)
    assert c.get(old[0]) is None


def test_a_larger_newcomer_evicts_only_a_session_past_the_eviction_time_at_its_last_use() -> None:
    c = cache(NUM_SHARDS)
    old = _fill(c, 0)
    two = [tp(T1, 0), tp(T1, 1)]
    assert full(c, two, 10) == 0  # shard 0: its session is too young to be evicted by size
    t = EVICTION_MS + 1
    for sid in old:  # each used again when older than 120 s: evictable by all, not stale
        c.new_context(V, sid, 1, False, [], [], resolve, t)
    assert full(c, [tp(T1, 0)], t + 1) == 0  # shard 1: an equal newcomer is not worth more
    assert full(c, two, t + 1)  # shard 2: a larger one is
    assert c.get(old[2]) is None and c.get(old[1]) is not None


def test_a_privileged_session_is_kept_from_unprivileged_newcomers() -> None:
    c = cache(NUM_SHARDS)
    _fill(c, 0, privileged=True)
    assert full(c, [tp(T1, i) for i in range(9)], 1) == 0


def test_a_preview_raced_by_the_next_epoch_charges_an_empty_answer() -> None:
    """Kafka's IncrementalFetchContext.getResponseSize: the size of an empty response once the
    session has moved past this request's epoch (what its answer then is)."""
    c = cache()
    sid = full(c, [tp(T1, 0)])
    ctx = c.new_context(V, sid, 1, False, [], [], resolve, 1)
    assert ctx.preview([(tp(T1, 0), Ans(records=b"x"))]) == [(tp(T1, 0), Ans(records=b"x"))]
    assert c.new_context(V, sid, 2, False, [], [], resolve, 2).kind is Kind.INCREMENTAL
    assert ctx.preview([(tp(T1, 0), Ans(records=b"x"))]) == []
    assert ctx.throttled() == (ErrorCode.invalid_fetch_session_epoch, sid)
