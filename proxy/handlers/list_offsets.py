"""ListOffsets (key 2), v1-11. v1: one offset per partition. v2: isolation level (LATEST at
read_committed is the last stable offset). v4: current leader epoch in, leader epoch out.
v6: flexible. v7: MAX_TIMESTAMP (-3). v8: EARLIEST_LOCAL (-4). v9: LATEST_TIERED (-5). v10:
a timeout for lookups in remote storage (KIP-1075; there is none here, so it is not waited on).
v11: EARLIEST_PENDING_UPLOAD (-6, KIP-1023: the first offset not yet copied to remote storage).

Special timestamps: -2 EARLIEST (log start offset), -1 LATEST (high watermark or LSO), -3
MAX_TIMESTAMP (the record with the largest timestamp); without tiered storage, as Kafka's
``UnifiedLog.fetchOffsetByTimestamp`` answers with remote storage off, -4 EARLIEST_LOCAL is
the log start offset, and -5 LATEST_TIERED and -6 EARLIEST_PENDING_UPLOAD are offset -1,
timestamp -1, leader epoch -1 (Kafka 4.2's UnifiedLog for a topic without remote storage,
KAFKA-17108). A timestamp >= 0
finds the first record whose timestamp is at least that, through the time index; only that
one batch is decoded. No such record: offset -1, timestamp -1.

A topic the principal may not DESCRIBE gets TOPIC_AUTHORIZATION_FAILED on every partition
asked for, after the others (Kafka's ``handleListOffsetRequestV1AndAbove``). Validation of the
rest, in the order of Kafka's ``ReplicaManager.fetchOffset``: a partition named twice
in the request -> INVALID_REQUEST (answered once); a negative timestamp other than -1/-2,
or -3 below v7, -4 below v8, -5 below v9, -6 below v11 -> UNSUPPORTED_VERSION; an unknown
partition -> UNKNOWN_TOPIC_OR_PARTITION; a ``current_leader_epoch`` (v4+, -1 = none) above the
partition's -> UNKNOWN_LEADER_EPOCH, below it -> FENCED_LEADER_EPOCH.

Isolation (v2+, spec §5.7): LATEST is the last stable offset at read_committed, the high
watermark otherwise. Timestamp lookups (and MAX_TIMESTAMP) that land at or above the last
fetchable offset (LSO at read_committed, high watermark otherwise) answer offset -1,
timestamp -1 with no error, as Kafka's ReplicaManager.fetchOffset does; EARLIEST is not
limited.
"""

from __future__ import annotations

from collections import Counter

from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v11.request import ListOffsetsPartition, ListOffsetsRequest
from kio.schema.list_offsets.v11.response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32, i64

from proxy.acl.checks import allowed_names
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from storage.partition import LEADER_EPOCH, Partition, leader_epoch_error
from wire.records import decode_batch_records, read_batch_header
from wire.values import NO_THROTTLE

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5
EARLIEST_PENDING_UPLOAD = -6
# the lowest version that may ask for each special timestamp (Kafka's ReplicaManager)
MIN_VERSION_OF_TIMESTAMP = {
    EARLIEST: 1,
    LATEST: 1,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL: 8,
    LATEST_TIERED: 9,
    EARLIEST_PENDING_UPLOAD: 11,
}
READ_COMMITTED = 1


def _refusal(version: int, p: Partition | None, rp: ListOffsetsPartition) -> ErrorCode | None:
    """Why partition request ``rp`` gets no offset (after the duplicate check), or None."""
    ts = rp.timestamp
    if ts < 0 and version < MIN_VERSION_OF_TIMESTAMP.get(ts, 2**15):
        return ErrorCode.unsupported_version
    if p is None:
        return ErrorCode.unknown_topic_or_partition
    return leader_epoch_error(rp.current_leader_epoch)  # NO_EPOCH below v4


async def _lookup(p: Partition, timestamp: int, committed: bool) -> tuple[int, int] | ErrorCode:
    if timestamp in (EARLIEST, EARLIEST_LOCAL):  # no tiered storage: the local log is the log
        return -1, p.log_start_offset
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):  # no tiered storage: unknown
        return -1, -1
    if timestamp == LATEST:
        return -1, p.last_stable_offset if committed else p.high_watermark
    fetchable = p.last_stable_offset if committed else p.high_watermark
    if timestamp == MAX_TIMESTAMP:
        found = await p.log.max_timestamp()
        if found is None:
            return -1, -1
        max_ts, batch_offset = found
        hit = await _first_at_or_after(p, max_ts, exact=True) or (max_ts, batch_offset)
    else:
        hit = await _first_at_or_after(p, timestamp) or (-1, -1)
    return hit if hit[1] < fetchable else (-1, -1)


async def _first_at_or_after(
    p: Partition, timestamp: int, exact: bool = False
) -> tuple[int, int] | None:
    found = await p.find_timestamp(timestamp)
    if found is None:
        return None
    header = read_batch_header(found.batch_bytes)
    for record in decode_batch_records(found.batch_bytes):
        ts = (
            header.max_timestamp
            if header.log_append_time
            else header.base_timestamp + record.timestamp_delta
        )
        if (ts == timestamp) if exact else (ts >= timestamp):
            return ts, header.base_offset + record.offset_delta
    return None


def _failed(index: int, code: ErrorCode) -> ListOffsetsPartitionResponse:
    return ListOffsetsPartitionResponse(
        partition_index=i32(index),
        error_code=code,
        timestamp=i64(-1),
        offset=i64(-1),
        leader_epoch=i32(-1),
    )


def _error_reply(req: ListOffsetsRequest, code: ErrorCode) -> ListOffsetsResponse:
    return ListOffsetsResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            ListOffsetsTopicResponse(
                name=t.name,
                partitions=tuple(_failed(p.partition_index, code) for p in t.partitions),
            )
            for t in req.topics
        ),
    )


@handler(
    api_key=2,
    versions=(1, 11),
    request=ListOffsetsRequest,
    response=ListOffsetsResponse,
    error_reply=_error_reply,
)
async def list_offsets(ctx: RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse:
    broker = ctx.broker
    committed = ctx.version >= 2 and req.isolation_level == READ_COMMITTED
    named = Counter((t.name, rp.partition_index) for t in req.topics for rp in t.partitions)
    answered: set[tuple[str, int]] = set()
    by_topic: dict[TopicName, list[ListOffsetsPartitionResponse]] = {}
    names = [t.name for t in req.topics]
    describable = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    for t in req.topics:
        if t.name not in describable:
            continue
        parts = by_topic.setdefault(t.name, [])
        for rp in t.partitions:
            key = (t.name, rp.partition_index)
            if key in answered:
                continue  # a duplicate is answered once
            answered.add(key)
            p = broker.topics.partition(t.name, rp.partition_index)
            res: tuple[int, int] | ErrorCode | None
            if named[key] > 1:
                res = ErrorCode.invalid_request
            elif (res := _refusal(ctx.version, p, rp)) is None:
                assert p is not None
                res = await _lookup(p, rp.timestamp, committed)
            if isinstance(res, ErrorCode):
                parts.append(_failed(rp.partition_index, res))
            else:
                ts, offset = res
                parts.append(
                    ListOffsetsPartitionResponse(
                        partition_index=rp.partition_index,
                        error_code=ErrorCode.none,
                        timestamp=i64(ts),
                        offset=i64(offset),
                        leader_epoch=i32(LEADER_EPOCH if offset >= 0 else -1),
                    )
                )
    topics = tuple(
        ListOffsetsTopicResponse(name=name, partitions=tuple(parts))
        for name, parts in by_topic.items()
    ) + tuple(  # Kafka appends the topics not authorized for DESCRIBE, every partition refused
        ListOffsetsTopicResponse(
            name=t.name,
            partitions=tuple(
                _failed(p.partition_index, ErrorCode.topic_authorization_failed)
                for p in t.partitions
            ),
        )
        for t in req.topics
        if t.name not in describable
    )
    return ListOffsetsResponse(throttle_time=NO_THROTTLE, topics=topics)
