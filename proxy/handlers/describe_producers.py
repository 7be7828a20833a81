"""DescribeProducers (key 61), v0 (flexible; KIP-664): the live producer state of each
requested partition, as the partition leader holds it (spec eos.md §4.11).

Per producer: id, epoch (int32 on the wire), last sequence (-1 if no batch of the current
epoch is retained), last timestamp, coordinator epoch and the first offset of its open
transaction (-1: none; always -1 until transactions land). Unknown topic or partition:
UNKNOWN_TOPIC_OR_PARTITION. There are no ACLs, so no TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from proxy.context import RequestContext
from proxy.registry import handler


@handler(api_key=61, versions=(0, 0))
async def describe_producers(ctx: RequestContext, req: Any) -> Any:
    b, topics = ctx.b, ctx.broker.topics
    out = []
    for t in req.topics:
        parts = []
        for index in t.partition_indexes:
            partition = topics.partition(t.name, index)
            if partition is None or partition.deleted:
                parts.append(
                    b.PartitionResponse(
                        partition_index=index,
                        error_code=ErrorCode.unknown_topic_or_partition,
                        error_message=None,
                        active_producers=(),
                    )
                )
                continue
            producers = tuple(
                b.ProducerState(
                    producer_id=e.producer_id,
                    producer_epoch=e.producer_epoch,
                    last_sequence=e.last_seq,
                    last_timestamp=e.last_timestamp,
                    coordinator_epoch=e.coordinator_epoch,
                    current_txn_start_offset=e.current_txn_first_offset,
                )
                for e in sorted(partition.producers, key=lambda e: e.producer_id)
            )
            parts.append(
                b.PartitionResponse(
                    partition_index=index,
                    error_code=ErrorCode.none,
                    error_message=None,
                    active_producers=producers,
                )
            )
        out.append(b.TopicResponse(name=t.name, partitions=tuple(parts)))
    return b.DescribeProducersResponse(throttle_time=0, topics=tuple(out))
