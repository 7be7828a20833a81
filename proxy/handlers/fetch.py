"""Fetch (key 1), v4-12 for consumers. v4: isolation level, last stable offset, aborted
transactions. v5: log start offset. v7: fetch sessions (KIP-227). v9: current leader epoch.
v11: rack id. v12: flexible, diverging epoch. v13+ (topic ids) is not advertised.

Fetch sessions are not kept: every response carries session id 0, which tells clients to go
on sending full fetch requests (what Kafka does when its session cache is full). A request
for an existing session id gets FETCH_SESSION_ID_NOT_FOUND.

Sizes follow Kafka: ``partition_max_bytes`` and ``max_bytes`` are soft for the first batch
of the first partition that has data (it is returned whole, so a consumer can always make
progress); after that a partition's data is returned only if it fits what is left.

Long poll: while fewer than ``min_bytes`` are ready the request waits, up to ``max_wait``,
for an append or a transaction marker on any of its partitions (an event registered with each
of them; markers are what move the LSO past an open transaction), then reads again. Deleting
a topic wakes its partitions' long polls too, which then answer UNKNOWN_TOPIC_OR_PARTITION
(high watermark, LSO and log start -1) at once, as Kafka completes delayed fetches of
partitions that stop.

Authorization (Kafka's ``handleFetchRequest``): a consumer needs READ on each topic, a
follower (replica id >= 0) CLUSTER_ACTION; refused partitions are answered
TOPIC_AUTHORIZATION_FAILED with high watermark, LSO and log start -1 and null aborted
transactions (``FetchResponse.partitionResponse``), and do not end a long poll; a fetch with
no partition left to read is answered at once (Kafka sends no delayed fetch then).

A topic whose ``compression.type`` is ``zstd`` answers Fetch below v10 (clients from before
zstd) UNSUPPORTED_COMPRESSION_TYPE for its partitions, as Kafka's ``maybeConvertFetchedData``.

Isolation (spec §5.3): read_uncommitted reads up to the high watermark, read_committed up to
the last stable offset and never returns a byte at or above it (the read is cut after the last
whole batch below it). Whole stored batches are returned, aborted data and markers included;
clients filter. read_committed responses carry the aborted transactions overlapping
[fetch offset, end of the returned data), built when the response is built (so a long poll
never answers with a stale list, KAFKA-5376), [] when no data is returned;
read_uncommitted responses send null.
"""

from __future__ import annotations

from dataclasses import dataclass

import trio
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchRequest
from kio.schema.fetch.v12.response import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from kio.schema.types import BrokerId, ProducerId, TopicName
from kio.static.primitive import Records, i32, i64

from proxy.acl.checks import allowed_names, cluster_allows
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from storage.partition import Partition
from wire.records import iter_batches
from wire.values import NO_THROTTLE

NO_REPLICA = BrokerId(-1)
NO_SESSION = i32(0)

READ_COMMITTED = 1
ZSTD_FETCH_VERSION = 10  # the first Fetch version whose clients can read zstd (KIP-110)
# errors answered with high watermark, LSO and log start -1 (Kafka's partitionResponse)
_NO_PARTITION_STATE = (
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.unsupported_compression_type,
    ErrorCode.topic_authorization_failed,
)


@dataclass
class _Slot:
    topic: TopicName
    partition_index: i32
    fetch_offset: int
    max_bytes: int
    partition: Partition | None
    refused: ErrorCode | None = None  # answered this, whatever the log holds
    error: ErrorCode = ErrorCode.none
    data: bytes = b""
    upper_bound: int = -1  # the offset just past the returned data


def _cut(data: bytes, end: int) -> tuple[bytes, int]:
    """The whole batches of ``data`` that end below ``end``, and the offset just past them."""
    size, upper = 0, -1
    for pos, h in iter_batches(data):
        if h.last_offset >= end:
            break
        size, upper = pos + h.total_size, h.last_offset + 1
    return data[:size], upper


async def _read_all(slots: list[_Slot], max_bytes: int, committed: bool) -> int:
    remaining = max_bytes
    first = True
    total = 0
    for s in slots:
        s.data, s.error, s.upper_bound = b"", ErrorCode.none, -1
        p = s.partition
        if s.refused is not None:
            s.error = s.refused
            continue
        if p is None or p.deleted:
            s.error = ErrorCode.unknown_topic_or_partition
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


def _readable(ctx: RequestContext, req: FetchRequest) -> set[str]:
    """The topics the request may read (Kafka's ``handleFetchRequest``): a follower's fetch
    (replica id >= 0) needs CLUSTER_ACTION for all or none, a consumer's READ on each topic;
    the others' partitions are answered TOPIC_AUTHORIZATION_FAILED."""
    names = [t.topic for t in req.topics]
    if req.replica_id >= 0:
        return set(names) if cluster_allows(ctx, AclOperation.CLUSTER_ACTION) else set()
    return allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC, names)


def _aborted(s: _Slot) -> tuple[AbortedTransaction, ...]:
    if s.partition is None or not s.data:
        return ()
    return tuple(
        AbortedTransaction(producer_id=ProducerId(pid), first_offset=i64(first))
        for pid, first in s.partition.aborted_transactions(s.fetch_offset, s.upper_bound)
    )


def _partition_data(s: _Slot, committed: bool) -> PartitionData:
    part = s.partition if s.error not in _NO_PARTITION_STATE else None
    return PartitionData(
        partition_index=s.partition_index,
        error_code=s.error,
        high_watermark=i64(part.high_watermark if part is not None else -1),
        last_stable_offset=i64(part.last_stable_offset if part is not None else -1),
        log_start_offset=i64(part.log_start_offset if part is not None else -1),
        aborted_transactions=(
            _aborted(s)
            if committed and s.error is not ErrorCode.topic_authorization_failed
            else None
        ),
        preferred_read_replica=NO_REPLICA,
        records=Records(s.data),
    )


def _error_reply(req: FetchRequest, code: ErrorCode) -> FetchResponse:
    """``code`` at the top level and on every partition the request named (Kafka's
    ``FetchRequest.getErrorResponse``: the top level for incremental sessions, the partitions
    for versions without a top-level code)."""
    return FetchResponse(
        throttle_time=NO_THROTTLE,
        error_code=code,
        session_id=NO_SESSION,
        responses=tuple(
            FetchableTopicResponse(
                topic=t.topic,
                partitions=tuple(
                    PartitionData(
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
        ),
    )


@handler(
    api_key=1,
    versions=(4, 12),
    request=FetchRequest,
    response=FetchResponse,
    error_reply=_error_reply,
)
async def fetch(ctx: RequestContext, req: FetchRequest) -> FetchResponse:
    broker = ctx.broker
    if ctx.version >= 7 and req.session_id != 0:
        return FetchResponse(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.fetch_session_id_not_found,
            session_id=NO_SESSION,
            responses=(),
        )
    committed = req.isolation_level == READ_COMMITTED
    readable = _readable(ctx, req)
    every = [
        _Slot(
            t.topic,
            p.partition,
            p.fetch_offset,
            p.partition_max_bytes,
            broker.topics.partition(t.topic, p.partition) if t.topic in readable else None,
            error=ErrorCode.none if t.topic in readable else ErrorCode.topic_authorization_failed,
        )
        for t in req.topics
        for p in t.partitions
    ]
    # refused partitions are answered as they are and neither end nor shorten a long poll
    slots = [s for s in every if s.error is not ErrorCode.topic_authorization_failed]
    if ctx.version < ZSTD_FETCH_VERSION:
        for s in slots:
            topic = broker.topics.get(s.topic)
            if topic is not None and topic.settings["compression.type"] == "zstd":
                s.refused = ErrorCode.unsupported_compression_type
    max_bytes = req.max_bytes  # every served version (4+) has it
    total = await _read_all(slots, max_bytes, committed)
    wait_s = req.max_wait.total_seconds()
    # nothing left to read (every partition refused): answered at once, as Kafka answers a
    # fetch with no authorized partition without a delayed fetch
    if total < req.min_bytes and wait_s > 0 and slots and not any(s.error for s in slots):
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
            total = await _read_all(slots, max_bytes, committed)
            if any(s.error for s in slots):
                break
    by_topic: dict[TopicName, list[PartitionData]] = {}
    fetched = broker.metrics.topics.fetched  # /metrics: bytes out per topic
    for s in every:
        if s.data:
            fetched(s.topic, len(s.data))
        by_topic.setdefault(s.topic, []).append(_partition_data(s, committed))
    responses = tuple(
        FetchableTopicResponse(topic=name, partitions=tuple(parts))
        for name, parts in by_topic.items()
    )
    return FetchResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=NO_SESSION,
        responses=responses,
    )
