"""ListOffsets (key 2), v1-7. v1: one offset per partition. v2: isolation level (LATEST at
read_committed is the last stable offset). v4: current leader epoch in, leader epoch out.
v6: flexible. v7: MAX_TIMESTAMP (-3).

Special timestamps: -2 EARLIEST (log start offset), -1 LATEST (high watermark or LSO), -3
MAX_TIMESTAMP (the record with the largest timestamp). A timestamp >= 0 finds the first
record whose timestamp is at least that, through the time index; only that one batch is
decoded. No such record: offset -1, timestamp -1.

Isolation (v2+, spec §5.7): LATEST is the last stable offset at read_committed, the high
watermark otherwise. Timestamp lookups (and MAX_TIMESTAMP) that land at or above the last
fetchable offset (LSO at read_committed, high watermark otherwise) answer offset -1,
timestamp -1 with no error, as Kafka's ReplicaManager.fetchOffset does; EARLIEST is not
limited.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from proxy.context import RequestContext
from proxy.registry import handler
from storage.partition import LEADER_EPOCH, Partition
from wire.records import decode_batch_records, read_batch_header

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
READ_COMMITTED = 1


async def _lookup(p: Partition, timestamp: int, committed: bool) -> tuple[int, int] | ErrorCode:
    if timestamp == EARLIEST:
        return -1, p.log_start_offset
    if timestamp == LATEST:
        return -1, p.last_stable_offset if committed else p.high_watermark
    fetchable = p.last_stable_offset if committed else p.high_watermark
    if timestamp == MAX_TIMESTAMP:
        found = await p.log.max_timestamp()
        if found is None:
            return -1, -1
        max_ts, batch_offset = found
        hit = await _first_at_or_after(p, max_ts, exact=True) or (max_ts, batch_offset)
    elif timestamp < 0:
        return ErrorCode.invalid_request
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


@handler(api_key=2, versions=(1, 7))
async def list_offsets(ctx: RequestContext, req: Any) -> Any:
    b, broker = ctx.b, ctx.broker
    committed = ctx.version >= 2 and req.isolation_level == READ_COMMITTED
    topics = []
    for t in req.topics:
        parts = []
        for rp in t.partitions:
            p = broker.topics.partition(t.name, rp.partition_index)
            if p is None:
                res: tuple[int, int] | ErrorCode = ErrorCode.unknown_topic_or_partition
            else:
                res = await _lookup(p, rp.timestamp, committed)
            if isinstance(res, ErrorCode):
                parts.append(
                    b.ListOffsetsPartitionResponse(
                        partition_index=rp.partition_index,
                        error_code=res,
                        timestamp=-1,
                        offset=-1,
                        leader_epoch=-1,
                        old_style_offsets=(),
                    )
                )
            else:
                ts, offset = res
                parts.append(
                    b.ListOffsetsPartitionResponse(
                        partition_index=rp.partition_index,
                        error_code=ErrorCode.none,
                        timestamp=ts,
                        offset=offset,
                        leader_epoch=LEADER_EPOCH if offset >= 0 else -1,
                    )
                )
        topics.append(b.ListOffsetsTopicResponse(name=t.name, partitions=tuple(parts)))
    return b.ListOffsetsResponse(throttle_time=0, topics=tuple(topics))
