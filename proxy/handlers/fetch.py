"""Fetch (key 1), v4-18 for consumers. v4: isolation level, last stable offset, aborted
transactions. v5: log start offset. v7: fetch sessions (KIP-227, ``proxy/fetch_session.py``).
v9: current leader epoch, fenced as ListOffsets does (above 0 UNKNOWN_LEADER_EPOCH, below it
FENCED_LEADER_EPOCH). v11: rack id. v12: flexible; the last fetched epoch (KIP-595): where it
ends in the one-entry leader-epoch cache (``offset_for_leader_epoch.end_offset_for``: epoch 0
ends at the log end offset, a higher one is unknown, OFFSET_OUT_OF_RANGE), and an end below the
fetch offset is answered at once with that diverging epoch, no records, no error
(``Partition.readRecords``). v13: topic ids instead of names (KIP-516,
``proxy/fetch_topics.py``): an id the broker does not know is answered UNKNOWN_TOPIC_ID, and
the answer is keyed by id. v14: nothing new here (tiered storage's error). v15: the replica
state replaces the replica id (KIP-903). v16: NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH
answers carry the current leader (this node, epoch 0) and its endpoint (KIP-951). v17: the
follower's directory id (KIP-853), unused. v18: the high watermark a follower knows (KIP-1166),
a tagged field each partition carries (Long.MAX_VALUE from consumers); only Kafka's follower
fetches read it, to complete a delayed fetch early, and a single node has no followers:
accepted and unused.

A follower's fetch (replica id >= 0) names a replica this node does not have: each partition
is answered NOT_LEADER_OR_FOLLOWER, or UNKNOWN_LEADER_EPOCH when it carries a current leader
epoch (Kafka's ``Partition.followerReplicaOrThrow``).

Partitions are classified before anything is read, as Kafka's ``handleFetchRequest`` does: an
unknown topic id (UNKNOWN_TOPIC_ID), a topic the request may not read
(TOPIC_AUTHORIZATION_FAILED: a consumer needs READ on it, a follower, replica id >= 0,
CLUSTER_ACTION, which refuses every partition, unknown ids included) or a partition the broker
does not have (UNKNOWN_TOPIC_OR_PARTITION) is answered after the partitions that are read, with
high watermark, LSO and log start -1 and null aborted transactions, and neither ends nor counts
toward a long poll. Partitions are answered in the order they were fetched (the request's, or
the session's), consecutive partitions of one topic under one topic entry; among those answered
at once, a consumer's unknown topic ids come first (Kafka finds them in a pass of its own before
the authorization pass). OFFSET_OUT_OF_RANGE is answered with high watermark, LSO and log
start -1 too (``ReplicaManager.handleOffsetOutOfRangeError`` without tiered storage).

Sizes follow Kafka: ``partition_max_bytes`` and ``max_bytes`` are soft for the first batch
of the first partition that has data (it is returned whole, so a consumer can always make
progress); after that a partition's data is returned only if it fits what is left.

Long poll: while fewer than ``min_bytes`` are ready the request waits, up to ``max_wait``,
for an append or a transaction marker on any of its partitions (an event registered with each
of them; markers are what move the LSO past an open transaction), then reads again. Deleting
a topic wakes its partitions' long polls too, which then answer UNKNOWN_TOPIC_OR_PARTITION
(high watermark, LSO and log start -1) at once, as Kafka completes delayed fetches of
partitions that stop. A read error ends the wait at once.

Authorization (Kafka's ``handleFetchRequest``): a consumer needs READ on each topic, a
follower (replica id >= 0) CLUSTER_ACTION; refused partitions are answered
TOPIC_AUTHORIZATION_FAILED with high watermark, LSO and log start -1 and null aborted
transactions (``FetchResponse.partitionResponse``), and do not end a long poll; a fetch with
no partition left to read is answered at once (Kafka sends no delayed fetch then).

A topic whose ``compression.type`` is ``zstd`` is fetched at every version as any other:
Kafka 4.0 dropped the refusal of Fetch below v10 (UNSUPPORTED_COMPRESSION_TYPE) along with
down-conversion (KAFKA-18269, KIP-724/896), as the check never saw zstd set by producers.

Isolation (spec §5.3): an isolation level other than 0 and 1 is answered with the error reply
(UNKNOWN_SERVER_ERROR) once some partition is to be read, as Kafka's ``IsolationLevel.forId``
throws there; read_uncommitted reads up to the high watermark, read_committed up to
the last stable offset and never returns a byte at or above it (the read is cut after the last
whole batch below it). Whole stored batches are returned, aborted data and markers included;
clients filter. read_committed responses carry the aborted transactions overlapping
[fetch offset, end of the returned data), built when the response is built (so a long poll
never answers with a stale list, KAFKA-5376), [] when no data is returned, null for a
partition in error; read_uncommitted responses send null.

Versions: the handler is registered ``as_sent`` (``proxy/registry.py``): it reads the request
in the class of the version the client spoke and answers in that version's classes, as Kafka's
one message class serves every version. The generic conversion to and from v18 cost about a
third of the handler's time, and v18 has no topic names, which v4-12 are keyed by. Its error
reply is Kafka's ``FetchRequest.getErrorResponse``: the code at the top level (v7+) with the
request's session id, and below v13 on every partition the request named.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from typing import Any, cast

import trio
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v18.request import FetchRequest
from kio.schema.fetch.v18.response import AbortedTransaction, FetchResponse
from kio.schema.types import BrokerId, ProducerId
from kio.static.primitive import Records, i32, i64

from proxy.acl.checks import allowed_names, cluster_allows, enforced
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.fetch_session import (
    TOPIC_ID_VERSION,
    ZERO_ID,
    FetchContext,
    Kind,
    TopicIdPartition,
)
from proxy.fetch_topics import fetch_data, replica_id
from proxy.handlers.offset_for_leader_epoch import end_offset_for
from proxy.quotas.enforce import charge_fetch
from proxy.registry import handler
from storage.partition import LEADER_EPOCH, NO_EPOCH, Partition, leader_epoch_error
from wire.records import iter_batches
from wire.values import NO_THROTTLE

NO_REPLICA = BrokerId(-1)
NO_SESSION = i32(0)

READ_COMMITTED = 1
ISOLATION_LEVELS = (0, READ_COMMITTED)  # Kafka's IsolationLevel.forId refuses any other
LEADER_HINT_VERSION = 16  # v16 answers these errors with the current leader (KIP-951)
LEADER_HINT_ERRORS = (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch)
# errors answered with high watermark, LSO and log start -1 (Kafka's partitionResponse and
# LogReadResult of an exception: ReplicaManager.createLogReadResult(e), OFFSET_OUT_OF_RANGE
# included when the log is not tiered, handleOffsetOutOfRangeError)
_NO_PARTITION_STATE = (
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.offset_out_of_range,
    ErrorCode.unknown_topic_id,
    ErrorCode.inconsistent_topic_id,
    ErrorCode.not_leader_or_follower,
    ErrorCode.unknown_leader_epoch,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.topic_authorization_failed,
)
_UNFENCED = (NO_EPOCH, LEADER_EPOCH)  # current leader epochs that pass (none given, or ours)
SESSION_VERSION = 7  # v7 added the top-level error code and the session (KIP-227)
LOG_START_VERSION = 5
Answers = list[tuple[TopicIdPartition, Any]]  # a partition and its version's PartitionData
_SHAPES: dict[int, Any] = {}


def _shape(version: int) -> Any:
    """The kio response module of ``version`` (its FetchResponse, PartitionData, ...)."""
    found = _SHAPES.get(version)
    if found is None:
        found = _SHAPES[version] = importlib.import_module(f"kio.schema.fetch.v{version}.response")
    return found


@dataclass
class _Slot:
    tp: TopicIdPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    partition: Partition | None
    last_fetched_epoch: int = NO_EPOCH
    diverging: tuple[int, int] | None = None  # (epoch, end offset): the log diverges (v12+)
    error: ErrorCode = ErrorCode.none
    data: bytes = b""
    upper_bound: int = -1  # the offset just past the returned data

    # What the answer will say (fetch_session.Answer), so a session can leave the partition
    # out before its entry is built (most of an idle incremental fetch's cost otherwise).
    @property
    def error_code(self) -> ErrorCode:
        return self.error

    @property
    def high_watermark(self) -> int:
        p = self.partition
        return -1 if p is None or self.error in _NO_PARTITION_STATE else p.high_watermark

    @property
    def log_start_offset(self) -> int:
        p = self.partition
        return -1 if p is None or self.error in _NO_PARTITION_STATE else p.log_start_offset

    @property
    def records(self) -> bytes:
        return self.data

    @property
    def diverging_epoch(self) -> tuple[int, int] | None:
        return self.diverging


def _cut(data: bytes, end: int) -> tuple[bytes, int]:
    """The whole batches of ``data`` that end below ``end``, and the offset just past them."""
    size, upper = 0, -1
    for pos, h in iter_batches(data):
        if h.last_offset >= end:
            break
        size, upper = pos + h.total_size, h.last_offset + 1
    return data[:size], upper


def _refusal(s: _Slot, p: Partition, follower: bool) -> ErrorCode | None:
    """Kafka's checks before a read (``ReplicaManager.readFromLog``): the topic id the session
    holds, the leader epoch (KIP-320), and a follower this node does not have."""
    if s.tp.topic_id != ZERO_ID and p.topic_id != s.tp.topic_id:
        return ErrorCode.inconsistent_topic_id
    fenced = leader_epoch_error(s.current_leader_epoch)
    if fenced is not None:
        return fenced
    if follower:
        if s.current_leader_epoch != NO_EPOCH:
            return ErrorCode.unknown_leader_epoch
        return ErrorCode.not_leader_or_follower
    return None


def _divergence(s: _Slot, p: Partition) -> tuple[ErrorCode, tuple[int, int] | None]:
    """Kafka's ``Partition.readRecords`` given a last fetched epoch (v12+, KIP-595): where
    that epoch ends (``end_offset_for``, the one-entry leader-epoch cache); unknown ->
    OFFSET_OUT_OF_RANGE, as is a fetch offset below the log start; an epoch that ends before
    the fetch offset (or a lower epoch) -> the diverging epoch, no records, no error."""
    epoch, end = end_offset_for(p, s.last_fetched_epoch)
    if epoch == NO_EPOCH or end == -1 or s.fetch_offset < p.log_start_offset:
        return ErrorCode.offset_out_of_range, None
    if epoch < s.last_fetched_epoch or end < s.fetch_offset:
        return ErrorCode.none, (epoch, end)
    return ErrorCode.none, None


async def _read_all(slots: list[_Slot], max_bytes: int, committed: bool, follower: bool) -> int:
    remaining = max_bytes
    first = True
    total = 0
    for s in slots:
        s.data, s.error, s.upper_bound, s.diverging = b"", ErrorCode.none, -1, None
        p = s.partition
        if p is None or p.deleted:
            s.error = ErrorCode.unknown_topic_or_partition
            continue
        if (
            follower
            or s.current_leader_epoch not in _UNFENCED
            or (s.tp.topic_id != ZERO_ID and p.topic_id != s.tp.topic_id)
        ):
            s.error = _refusal(s, p, follower) or ErrorCode.none
            if s.error is not ErrorCode.none:
                continue
        if s.last_fetched_epoch != NO_EPOCH:
            s.error, s.diverging = _divergence(s, p)
            if s.error is not ErrorCode.none or s.diverging is not None:
                continue
        end = p.last_stable_offset if committed else p.high_watermark
        if not p.log_start_offset <= s.fetch_offset <= p.high_watermark:
            s.error = ErrorCode.offset_out_of_range
            continue
        if s.fetch_offset >= end or (remaining <= 0 and not first):
            continue
        limit = min(s.max_bytes, remaining) if not first else max(min(s.max_bytes, remaining), 1)
        try:
            data = await p.read(s.fetch_offset, limit)
        except ValueError:  # the log moved (retention) between the check and the read
            s.error = ErrorCode.offset_out_of_range
            continue
        data, s.upper_bound = _cut(data, end)
        if not data:
            continue
        if not first and len(data) > limit:
            continue
        s.data = data
        first = False
        remaining -= len(data)
        total += len(data)
    return total


def _answer_now(slots: list[_Slot]) -> bool:
    """Kafka's ``fetchMessages``: an error or a diverging epoch is answered without waiting."""
    return any(s.error or s.diverging is not None for s in slots)


def _aborted(s: _Slot) -> tuple[AbortedTransaction, ...]:
    if s.partition is None or not s.data:
        return ()
    return tuple(
        AbortedTransaction(producer_id=ProducerId(pid), first_offset=i64(first))
        for pid, first in s.partition.aborted_transactions(s.fetch_offset, s.upper_bound)
    )


def _partition_data(s: _Slot, committed: bool, hint: bool, version: int, m: Any, node: int) -> Any:
    """The partition's entry in ``version``'s PartitionData (``m``: that version's module);
    ``hint``: with the current leader (v16+, KIP-951) if the error calls for it."""
    part = s.partition if s.error not in _NO_PARTITION_STATE else None
    if hint and s.error in LEADER_HINT_ERRORS:
        leader = m.LeaderIdAndEpoch(leader_id=BrokerId(node), leader_epoch=i32(LEADER_EPOCH))
        return m.PartitionData(
            partition_index=s.tp.partition,
            error_code=s.error,
            high_watermark=i64(-1),
            current_leader=leader,
            aborted_transactions=None,
            records=Records(b""),
        )
    aborted = _aborted(s) if committed and s.error is ErrorCode.none else None
    if part is None:
        return m.PartitionData(
            partition_index=s.tp.partition,
            error_code=s.error,
            high_watermark=i64(-1),
            aborted_transactions=aborted,
            records=Records(s.data),
        )
    if s.diverging is not None:  # v12+ only: a last fetched epoch is v12+
        epoch, end = s.diverging
        return m.PartitionData(
            partition_index=s.tp.partition,
            error_code=s.error,
            high_watermark=i64(part.high_watermark),
            last_stable_offset=i64(part.last_stable_offset),
            log_start_offset=i64(part.log_start_offset),
            diverging_epoch=m.EpochEndOffset(epoch=i32(epoch), end_offset=i64(end)),
            aborted_transactions=aborted,
            records=Records(s.data),
        )
    if version < LOG_START_VERSION:
        return m.PartitionData(
            partition_index=s.tp.partition,
            error_code=s.error,
            high_watermark=i64(part.high_watermark),
            last_stable_offset=i64(part.last_stable_offset),
            aborted_transactions=aborted,
            records=Records(s.data),
        )
    # the hot path: offsets from the log are int64 and the data bytes, so cast, not checked
    # (kio's phantom constructors cost about 3 µs a partition, a tenth of a small fetch)
    return m.PartitionData(
        partition_index=s.tp.partition,
        error_code=s.error,
        high_watermark=cast(i64, part.high_watermark),
        last_stable_offset=cast(i64, part.last_stable_offset),
        log_start_offset=cast(i64, part.log_start_offset),
        aborted_transactions=aborted,
        records=cast(Records, s.data),
    )


def _unknown(tp: TopicIdPartition, code: ErrorCode, version: int) -> Any:
    """Kafka's ``FetchResponse.partitionResponse``: the code, high watermark -1."""
    return _shape(version).PartitionData(
        partition_index=i32(tp.partition),
        error_code=code,
        high_watermark=i64(-1),
        aborted_transactions=None,
        records=Records(b""),
    )


def _answer(
    version: int,
    code: ErrorCode,
    session_id: int,
    answers: Answers,
    endpoint: tuple[int, str, int] | None = None,
) -> FetchResponse:
    """The response in ``version``'s classes: keyed by topic id from v13, by name below;
    consecutive partitions of a topic under one entry (``FetchResponse.of``)."""
    m = _shape(version)
    by_id = version >= TOPIC_ID_VERSION
    topics: list[tuple[TopicIdPartition, list[Any]]] = []
    for tp, data in answers:
        if topics and (
            (topics[-1][0].topic_id == tp.topic_id) if by_id else (topics[-1][0].name == tp.name)
        ):
            topics[-1][1].append(data)
        else:
            topics.append((tp, [data]))
    kw: dict[str, Any] = {
        "throttle_time": NO_THROTTLE,
        "responses": tuple(
            m.FetchableTopicResponse(topic_id=tp.topic_id, partitions=tuple(parts))
            if by_id
            else m.FetchableTopicResponse(topic=tp.name or "", partitions=tuple(parts))
            for tp, parts in topics
        ),
    }
    if version >= SESSION_VERSION:
        kw["error_code"], kw["session_id"] = code, i32(session_id)
    if endpoint is not None:
        node, host, port = endpoint
        kw["node_endpoints"] = (m.NodeEndpoint(node_id=BrokerId(node), host=host, port=i32(port)),)
    return cast(FetchResponse, m.FetchResponse(**kw))


def _error_reply(req: Any, code: ErrorCode) -> FetchResponse:
    """Kafka's ``FetchRequest.getErrorResponse`` for ``req`` as sent: the code at the top level
    (v7+) with the request's session id; below v13, on each partition named too (versions
    without a top-level code need that), high watermark -1, records null."""
    version = int(req.__version__)
    m = _shape(version)
    topics: tuple[Any, ...] = ()
    if version < TOPIC_ID_VERSION:
        topics = tuple(
            m.FetchableTopicResponse(
                topic=t.topic,
                partitions=tuple(
                    m.PartitionData(
                        partition_index=p.partition,
                        error_code=code,
                        high_watermark=i64(-1),
                        aborted_transactions=None,
                        records=None,
                    )
                    for p in t.partitions
                ),
            )
            for t in req.topics
        )
    kw: dict[str, Any] = {"throttle_time": NO_THROTTLE, "responses": topics}
    if version >= SESSION_VERSION:
        kw["error_code"], kw["session_id"] = code, req.session_id
    return cast(FetchResponse, m.FetchResponse(**kw))


def _resolver(ctx: RequestContext) -> Any:
    topics = ctx.broker.topics

    def resolve(topic_id: Any) -> str | None:
        found = topics.by_id(topic_id)
        return None if found is None else found.name

    return resolve


def _slots(
    ctx: RequestContext, context: FetchContext, version: int, follower: bool
) -> tuple[list[_Slot], Answers]:
    """The partitions to read, and those answered at once (Kafka's ``erroneous``), in the
    order of Kafka's checks: the topic id, authorization, the partition."""
    topics = ctx.broker.topics
    slots: list[_Slot] = []
    erroneous: Answers = []
    wanted = context.partitions()
    readable: set[str] | None
    if follower:
        readable = None if cluster_allows(ctx, AclOperation.CLUSTER_ACTION) else set()
    elif enforced(ctx):
        names = (tp.name for tp, _ in wanted if tp.name is not None)
        readable = allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC, names)
    else:
        readable = None  # no authorizer: every topic
    if not follower:  # a consumer's unknown ids first: Kafka finds them in a pass of their own
        erroneous = [
            (tp, _unknown(tp, ErrorCode.unknown_topic_id, version))
            for tp, _ in wanted
            if tp.name is None
        ]
    for tp, want in wanted:
        if readable is not None and (follower or tp.name is not None) and tp.name not in readable:
            erroneous.append((tp, _unknown(tp, ErrorCode.topic_authorization_failed, version)))
            continue
        if tp.name is None:
            if follower:
                erroneous.append((tp, _unknown(tp, ErrorCode.unknown_topic_id, version)))
            continue
        partition = topics.partition(tp.name, tp.partition)
        if partition is None:
            erroneous.append((tp, _unknown(tp, ErrorCode.unknown_topic_or_partition, version)))
            continue
        slots.append(
            _Slot(
                tp, want.fetch_offset, want.max_bytes, want.current_leader_epoch, partition,
                last_fetched_epoch=want.last_fetched_epoch,
            )
        )  # fmt: skip
    return slots, erroneous


@handler(
    api_key=1,
    versions=(4, 18),
    request=FetchRequest,
    response=FetchResponse,
    error_reply=_error_reply,
    as_sent=True,
)
async def fetch(ctx: RequestContext, req: Any) -> FetchResponse:
    """``req``: the request in the class of the version the client spoke (``as_sent``)."""
    broker = ctx.broker
    version = ctx.version
    resolve = _resolver(ctx)
    wanted, to_forget = fetch_data(req, version, resolve)
    follower = replica_id(req) >= 0
    session_id, epoch = (
        (req.session_id, req.session_epoch) if version >= SESSION_VERSION else (0, -1)
    )
    context = broker.fetch_sessions.new_context(
        version, session_id, epoch, follower, wanted, to_forget, resolve, broker.now_ms()
    )
    if context.kind is Kind.SESSION_ERROR:
        if context.error is ErrorCode.unknown_server_error:  # Kafka's handler threw
            return _error_reply(req, context.error)
        return _answer(version, context.error, NO_SESSION, [])
    committed = req.isolation_level == READ_COMMITTED
    slots, erroneous = _slots(ctx, context, version, follower)
    if slots and req.isolation_level not in ISOLATION_LEVELS:
        # Kafka's FetchIsolation.of(request) throws (IsolationLevel.forId) once a partition is
        # to be read: the handler's error, UNKNOWN_SERVER_ERROR, the session context made
        return _error_reply(req, ErrorCode.unknown_server_error)
    max_bytes = req.max_bytes  # every served version (4+) has it
    total = await _read_all(slots, max_bytes, committed, follower)
    wait_s = req.max_wait.total_seconds()
    # nothing left to read (every partition refused): answered at once, as Kafka answers a
    # fetch with no authorized partition without a delayed fetch
    if slots and total < req.min_bytes and wait_s > 0 and not _answer_now(slots):
        deadline = trio.current_time() + wait_s
        while total < req.min_bytes and not broker.shutting_down.is_set():
            event = trio.Event()
            live = [s.partition for s in slots if s.partition is not None]
            for p in live:
                p.add_waiter(event)
            try:
                with trio.move_on_at(deadline):
                    await event.wait()
            finally:
                for p in live:
                    p.remove_waiter(event)
            if not event.is_set():
                break
            total = await _read_all(slots, max_bytes, committed, follower)
            if _answer_now(slots):
                break
    hinted = version >= LEADER_HINT_VERSION and any(s.error in LEADER_HINT_ERRORS for s in slots)
    node, m = broker.node_id, _shape(version)
    read: Answers = [(s.tp, s) for s in slots]
    quotas = broker.throttles
    if (quotas.fetch.enabled or quotas.request.enabled) and not follower:  # proxy/quotas/
        endpoint = (node, *ctx.advertised) if hinted else None
        preview = [
            (tp, _partition_data(a, committed, hinted, version, m, node) if type(a) is _Slot else a)
            for tp, a in context.preview(read + erroneous)
        ]
        throttle = charge_fetch(ctx, _answer(version, ErrorCode.none, 0, preview, endpoint))
        if throttle:
            code, session_id = context.throttled()
            return replace(_answer(version, code, session_id, []), throttle_time=throttle)
    code, session_id, kept = context.respond(read + erroneous, broker.now_ms())
    kept = [
        (tp, _partition_data(a, committed, hinted, version, m, node) if type(a) is _Slot else a)
        for tp, a in kept
    ]
    fetched = broker.metrics.topics.fetched  # /metrics: bytes out per topic
    for s in slots:
        if s.data:
            fetched(s.tp.name or "", len(s.data))
    endpoint = (node, *ctx.advertised) if hinted else None
    return _answer(version, code, session_id, kept, endpoint)
