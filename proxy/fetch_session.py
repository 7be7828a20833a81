"""Incremental fetch sessions (KIP-227), as Kafka's ``FetchSession.scala`` keeps them.

Theory of operation
-------------------
A consumer (or follower) that fetches many partitions sends them all once, in a *full*
fetch; the broker caches them in a *session* and answers with its id. Later *incremental*
fetches name only what changed (a new fetch offset or max bytes, a partition to add) and what
to forget; the broker fetches every cached partition and leaves out of its answer those with
no records, no error and the same high watermark and log start offset as last sent. This
module owns those decisions and nothing else: it never reads a log, awaits or reads the
clock (``now_ms`` is given), and it keys partitions as Kafka does.

A request's (session id, epoch) selects a ``FetchContext`` (``FetchSessionCache.new_context``,
Kafka's ``FetchManager.newContext``):

============================  ==============================================================
session id, epoch             context
============================  ==============================================================
any, -1 (FINAL)               ``SESSIONLESS``: the request's partitions, answered with session
                              id 0; a session of that id (if any) is closed first
any, 0 (INITIAL)              ``FULL``: the request's partitions; the answer tries to create
                              a session (closing the old one of that id first)
0 < id, epoch > 0             ``INCREMENTAL`` if the session exists, has that epoch and uses
                              topic ids exactly when the request version does (13+);
                              else FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH or
                              FETCH_SESSION_TOPIC_ID_ERROR (answered with session id 0 and no
                              partitions). An incremental fetch that leaves the session empty
                              closes it and is answered sessionless
============================  ==============================================================

(Requests below v7 carry no session fields: Kafka reads them as (0, -1), sessionless.) The
epoch moves on when the incremental context is made (``next_epoch``: +1, wrapping to 1); the
answer checks it is still the one expected, so a duplicate request racing on the same
session gets INVALID_FETCH_SESSION_EPOCH with the session id and no partitions.

Partitions are keyed by topic id and index in sessions of v13+ requests and by topic name and
index below (Kafka's ``CachedPartition.equals``). A cached partition whose topic id was unknown
keeps a null name until the id resolves (``resolve`` at each incremental fetch). Partitions with
records move to the end of the session's order, so the next fetch starts with the others.

The cache (``FetchSessionCache``) is Kafka's: ``max.incremental.fetch.session.cache.slots``
divided over 8 shards (integer division: fewer than 8 slots leave no room at all), a new
session created in the next shard round-robin with a random id from that shard's range; ids
route back to their shard. A full shard evicts to make room only if

1. its least recently used session was unused for more than 120 s (``EVICTION_MS``), or
2. the first session in its evictable order, (privileged, size, id) ascending, is worth less
   than the new one: privileged (a follower's) beats unprivileged, then more partitions beat
   fewer. Which sessions are evictable is decided when a session is last touched: an
   unprivileged one at once (by privileged newcomers only), any one older than 120 s by all.

Deliberate differences: none in the decisions. Kafka's metrics (sessions, cached partitions,
evictions) are plain counts here, on /metrics (``proxy/metrics/collectors.py``). An id routed
outside the shards (-268435455 and below, 2147483640 and above: Kafka's ``cacheShards(index)``
throws) is answered UNKNOWN_SERVER_ERROR, the code Kafka's error handler gives that exception.
"""

from __future__ import annotations

import enum
import random
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from kio.schema.errors import ErrorCode

from wire.values import INT_MAX

ZERO_ID = uuid.UUID(int=0)
INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
NUM_SHARDS = 8  # Kafka's KafkaBroker.NumFetchSessionCacheShards
EVICTION_MS = 120_000  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
TOPIC_ID_VERSION = 13  # Fetch v13+ name topics by id (KIP-516)


def next_epoch(prev: int) -> int:
    """Kafka's ``FetchMetadata.nextEpoch``."""
    if prev < 0:
        return FINAL_EPOCH
    return 1 if prev == INT_MAX else prev + 1


class TopicIdPartition(NamedTuple):
    """Kafka's TopicIdPartition: a zero id below v13; a null name for an unknown id. (Named
    tuples: made for every partition of every fetch, they cost a third of a dataclass.)"""

    topic_id: uuid.UUID
    name: str | None
    partition: int


def _key(tp: TopicIdPartition) -> tuple[uuid.UUID | str | None, int]:
    """How a session finds a partition (``CachedPartition.equals``): by id when it has one."""
    return (tp.topic_id if tp.topic_id != ZERO_ID else tp.name, tp.partition)


class PartitionRequest(NamedTuple):
    """What a fetch asks of one partition (Kafka's ``FetchRequest.PartitionData``)."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    last_fetched_epoch: int = -1


class Answer(Protocol):
    """The fields of a partition's answer the session looks at (kio's PartitionData)."""

    @property
    def error_code(self) -> ErrorCode: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def records(self) -> bytes | None: ...


def _diverges(found: object) -> bool:
    """Kafka's ``FetchResponse.isDivergingEpoch``: a diverging epoch with an epoch set
    (kio's EpochEndOffset, or the handler's (epoch, end offset))."""
    if found is None:
        return False
    epoch = found[0] if isinstance(found, tuple) else getattr(found, "epoch", -1)
    return bool(epoch >= 0)


@dataclass(slots=True)
class CachedPartition:
    tp: TopicIdPartition
    request: PartitionRequest
    high_watermark: int = -1
    local_log_start_offset: int = -1

    def would_respond(self, answer: Answer) -> bool:
        """``must_respond`` without remembering anything (Kafka's ``getResponseSize``)."""
        return (
            bool(answer.records)
            or self.high_watermark != answer.high_watermark
            or self.local_log_start_offset != answer.log_start_offset
            or answer.error_code is not ErrorCode.none
        )

    def must_respond(self, answer: Answer) -> bool:
        """Kafka's ``maybeUpdateResponseData(respData, updateResponseData = true)``: whether
        an incremental answer includes the partition, remembering what it then says."""
        respond = bool(answer.records)
        if self.high_watermark != answer.high_watermark:
            respond, self.high_watermark = True, answer.high_watermark
        if self.local_log_start_offset != answer.log_start_offset:
            respond, self.local_log_start_offset = True, answer.log_start_offset
        if answer.error_code is not ErrorCode.none:
            respond, self.high_watermark = True, -1  # re-sent once the error is gone
        if _diverges(getattr(answer, "diverging_epoch", None)):  # v12+: the client truncates
            respond = True
        return respond


@dataclass(eq=False, slots=True)
class FetchSession:
    id: int
    privileged: bool
    partitions: dict[tuple[uuid.UUID | str | None, int], CachedPartition]
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    cached_size: int = -1  # the size when last touched; -1: not in the cache
    by_privileged: bool = False  # evictable by a privileged newcomer (as of the last touch)
    by_all: bool = False  # evictable by any newcomer (as of the last touch)

    def update(
        self,
        fetch_data: Sequence[tuple[TopicIdPartition, PartitionRequest]],
        to_forget: Iterable[TopicIdPartition],
    ) -> None:
        for tp, req in fetch_data:
            cached = self.partitions.get(_key(tp))
            if cached is None:
                self.partitions[_key(tp)] = CachedPartition(tp, req)
            else:
                cached.request = req
        for tp in to_forget:
            self.partitions.pop(_key(tp), None)


class Kind(enum.Enum):
    SESSION_ERROR = "session error"
    SESSIONLESS = "sessionless"
    FULL = "full"
    INCREMENTAL = "incremental"


@dataclass(slots=True)
class FetchContext:
    """What one request fetches and how its answer is shaped (Kafka's ``FetchContext``s)."""

    kind: Kind
    cache: FetchSessionCache
    privileged: bool = False
    uses_topic_ids: bool = False
    error: ErrorCode = ErrorCode.none
    fetch_data: Sequence[tuple[TopicIdPartition, PartitionRequest]] = ()
    session: FetchSession | None = None
    request_epoch: int = FINAL_EPOCH

    def partitions(self) -> list[tuple[TopicIdPartition, PartitionRequest]]:
        """The partitions to fetch, in order (``foreachPartition``)."""
        if self.session is None:
            return list(self.fetch_data)
        return [(c.tp, c.request) for c in self.session.partitions.values()]

    def preview(
        self, answers: Sequence[tuple[TopicIdPartition, Answer]]
    ) -> list[tuple[TopicIdPartition, Answer]]:
        """The partitions ``respond`` would answer, changing nothing: what a client quota
        charges for before deciding to throttle (Kafka's ``getResponseSize``)."""
        if self.kind is Kind.SESSION_ERROR:
            return []
        if self.session is None:
            return list(answers)
        if self.session.epoch != next_epoch(self.request_epoch):  # answered empty
            return []
        parts = self.session.partitions
        return [
            (tp, a)
            for tp, a in answers
            if (c := parts.get(_key(tp))) is not None and c.would_respond(a)
        ]

    def throttled(self) -> tuple[ErrorCode, int]:
        """(top-level error, session id) of the empty answer to a throttled fetch, which
        leaves the session as it was (Kafka's ``getThrottledResponse``)."""
        if self.kind is not Kind.INCREMENTAL or self.session is None:
            return ErrorCode.none, INVALID_SESSION_ID
        if self.session.epoch != next_epoch(self.request_epoch):
            return ErrorCode.invalid_fetch_session_epoch, self.session.id
        return ErrorCode.none, self.session.id

    def respond(
        self, answers: Sequence[tuple[TopicIdPartition, Answer]], now_ms: int
    ) -> tuple[ErrorCode, int, list[tuple[TopicIdPartition, Answer]]]:
        """(top-level error, session id, the partitions to answer) for ``answers``, the
        fetched partitions in order (``updateAndGenerateResponseData``)."""
        if self.kind is Kind.SESSION_ERROR:
            return self.error, INVALID_SESSION_ID, []
        if self.kind is Kind.SESSIONLESS:
            return ErrorCode.none, INVALID_SESSION_ID, list(answers)
        if self.kind is Kind.FULL:
            requested = {_key(tp): req for tp, req in self.fetch_data}
            fresh = {
                _key(tp): CachedPartition(
                    tp, requested[_key(tp)], a.high_watermark, a.log_start_offset
                )
                for tp, a in answers
            }
            session_id = self.cache.maybe_create_session(
                now_ms, self.privileged, len(answers), self.uses_topic_ids, fresh
            )
            return ErrorCode.none, session_id, list(answers)
        session = self.session
        assert session is not None
        if session.epoch != next_epoch(self.request_epoch):  # a duplicate raced us
            return ErrorCode.invalid_fetch_session_epoch, session.id, []
        kept: list[tuple[TopicIdPartition, Answer]] = []
        for tp, answer in answers:
            key = _key(tp)
            cached = session.partitions.get(key)
            if cached is None or not cached.must_respond(answer):
                continue
            kept.append((tp, answer))
            if answer.records:  # to the back of the line
                session.partitions[key] = session.partitions.pop(key)
        return ErrorCode.none, session.id, kept


@dataclass(slots=True)
class CacheShard:
    """Kafka's ``FetchSessionCacheShard``."""

    max_entries: int
    shard_num: int
    id_range: int
    rng: random.Random
    sessions: dict[int, FetchSession] = field(default_factory=dict)
    evictions: int = 0

    def _new_id(self) -> int:
        low, high = max(1, self.shard_num * self.id_range), (self.shard_num + 1) * self.id_range
        while True:
            found = self.rng.randrange(low, high)
            if found not in self.sessions and found != INVALID_SESSION_ID:
                return found

    def create(
        self,
        now_ms: int,
        privileged: bool,
        size: int,
        uses_topic_ids: bool,
        partitions: dict[tuple[uuid.UUID | str | None, int], CachedPartition],
    ) -> int:
        if len(self.sessions) >= self.max_entries and not self._try_evict(privileged, size, now_ms):
            return INVALID_SESSION_ID
        session = FetchSession(
            self._new_id(), privileged, partitions, uses_topic_ids, now_ms, now_ms,
            next_epoch(INITIAL_EPOCH),
        )  # fmt: skip
        self.sessions[session.id] = session
        self.touch(session, now_ms)
        return session.id

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stale.last_used_ms > EVICTION_MS:
            self.remove(stale.id)
            self.evictions += 1
            return True
        candidates = [
            s for s in self.sessions.values() if (s.by_privileged if privileged else s.by_all)
        ]
        if not candidates:
            return False
        first = min(candidates, key=lambda s: (s.privileged, s.cached_size, s.id))
        if (privileged, size, 0) < (first.privileged, first.cached_size, first.id):
            return False
        self.remove(first.id)
        self.evictions += 1
        return True

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.cached_size = -1
        return session

    def touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms
        session.cached_size = len(session.partitions)
        old_enough = now_ms - session.creation_ms > EVICTION_MS
        session.by_privileged = not session.privileged or old_enough
        session.by_all = old_enough


class FetchSessionCache:
    """Kafka's ``FetchSessionCache`` and ``FetchManager``: the shards and the choice of
    context for each request."""

    def __init__(self, slots: int = 1000, rng: random.Random | None = None) -> None:
        rng = rng or random.Random()
        self.id_range = INT_MAX // NUM_SHARDS
        self.shards = [
            CacheShard(slots // NUM_SHARDS, n, self.id_range, rng) for n in range(NUM_SHARDS)
        ]
        self._next_shard = 0
        self.incremental_fetches = 0  # incremental requests answered from a session

    def shard_of(self, session_id: int) -> CacheShard | None:
        index = int(session_id / self.id_range)  # Java's division truncates toward zero
        return self.shards[index] if 0 <= index < len(self.shards) else None

    def get(self, session_id: int) -> FetchSession | None:
        shard = self.shard_of(session_id)
        return None if shard is None else shard.sessions.get(session_id)

    def __len__(self) -> int:
        return sum(len(s.sessions) for s in self.shards)

    @property
    def evictions(self) -> int:
        return sum(s.evictions for s in self.shards)

    @property
    def cached_partitions(self) -> int:
        return sum(max(0, x.cached_size) for s in self.shards for x in s.sessions.values())

    def maybe_create_session(
        self,
        now_ms: int,
        privileged: bool,
        size: int,
        uses_topic_ids: bool,
        partitions: dict[tuple[uuid.UUID | str | None, int], CachedPartition],
    ) -> int:
        shard = self.shards[self._next_shard % len(self.shards)]
        self._next_shard += 1
        return shard.create(now_ms, privileged, size, uses_topic_ids, partitions)

    def new_context(
        self,
        version: int,
        session_id: int,
        epoch: int,
        privileged: bool,
        fetch_data: Sequence[tuple[TopicIdPartition, PartitionRequest]],
        to_forget: Sequence[TopicIdPartition],
        resolve: Callable[[uuid.UUID], str | None],
        now_ms: int,
    ) -> FetchContext:
        """The context of a request (``FetchManager.newContext``). ``resolve`` names a topic
        id (None: unknown), for cached partitions whose id was unknown when cached."""
        uses_ids = version >= TOPIC_ID_VERSION
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full request
            if session_id != INVALID_SESSION_ID:
                shard = self.shard_of(session_id)
                if shard is None:
                    return FetchContext(
                        Kind.SESSION_ERROR, self, error=ErrorCode.unknown_server_error
                    )
                shard.remove(session_id)  # a full request closes the session it names
            kind = Kind.SESSIONLESS if epoch == FINAL_EPOCH else Kind.FULL
            return FetchContext(kind, self, privileged, uses_ids, fetch_data=fetch_data)
        shard = self.shard_of(session_id)
        if shard is None:
            return FetchContext(Kind.SESSION_ERROR, self, error=ErrorCode.unknown_server_error)
        session = shard.sessions.get(session_id)
        if session is None:
            code = ErrorCode.fetch_session_id_not_found
        elif session.epoch != epoch:
            code = ErrorCode.invalid_fetch_session_epoch
        elif session.uses_topic_ids != uses_ids:
            code = ErrorCode.fetch_session_topic_id_error
        else:
            session.update(fetch_data, to_forget)
            if not session.partitions:
                shard.remove(session.id)
                return FetchContext(Kind.SESSIONLESS, self, fetch_data=fetch_data)
            shard.touch(session, now_ms)
            session.epoch = next_epoch(session.epoch)
            self.incremental_fetches += 1
            if uses_ids:
                for cached in session.partitions.values():
                    if cached.tp.name is None:
                        name = resolve(cached.tp.topic_id)
                        if name is not None:
                            cached.tp = TopicIdPartition(
                                cached.tp.topic_id, name, cached.tp.partition
                            )
            return FetchContext(
                Kind.INCREMENTAL, self, session.privileged, uses_ids, session=session,
                request_epoch=epoch,
            )  # fmt: skip
        return FetchContext(Kind.SESSION_ERROR, self, error=code)
