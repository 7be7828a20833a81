"""DeleteRecords (key 21), v0-2 (KIP-107). v1: throttle time sent before throttling (the same
fields). v2: flexible. Kafka 4.x serves v0-2 (KIP-896 removed none of them).

Each partition's log start offset moves up to the requested offset (-1: the high watermark),
durably, and the answer is its low watermark, which on one replica is the log start offset
(``storage.partition.Partition.delete_records`` does the work and explains producer state and
the LSO). Segments wholly below the new start are deleted at once (the retention path);
Fetch below it answers OFFSET_OUT_OF_RANGE and ListOffsets EARLIEST answers it.

Per partition, in the order of Kafka's ``KafkaApis.handleDeleteRecordsRequest`` and
``ReplicaManager.deleteRecordsOnLocalLog`` (every error with low watermark -1):
UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist; INVALID_TOPIC_EXCEPTION for an
internal topic (Kafka's ``Topic.isInternal``); POLICY_VIOLATION when ``cleanup.policy`` lacks
``delete``; OFFSET_OUT_OF_RANGE for a negative offset other than -1 or one past the high
watermark; KAFKA_STORAGE_ERROR if the checkpoint or the segment deletion failed. A partition
named twice is answered once, with the last offset asked for (Kafka keys the request by
partition). ``timeout_ms`` is not used: Kafka waits only for followers' low watermarks, and
there are none. Authorization (DELETE on the topic) belongs to the security issue.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from proxy.context import RequestContext
from proxy.registry import handler
from storage.api import INTERNAL_TOPICS, StorageError

log = logging.getLogger("kafkad.delete_records")

INVALID_LOW_WATERMARK = -1  # Kafka's DeleteRecordsResponse.INVALID_LOW_WATERMARK
# Kafka's Topic.isInternal: kafkad's coordinators' topics and the share-group state topic
KAFKA_INTERNAL_TOPICS = INTERNAL_TOPICS | {"__share_group_state"}


async def _delete(ctx: RequestContext, topic: str, index: int, offset: int) -> int | ErrorCode:
    """The partition's low watermark after the deletion, or the code that refused it."""
    p = ctx.broker.topics.partition(topic, index)
    if p is None or p.deleted:
        return ErrorCode.unknown_topic_or_partition
    if topic in KAFKA_INTERNAL_TOPICS:
        return ErrorCode.invalid_topic_exception
    try:
        return await p.delete_records(offset)
    except StorageError as exc:
        log.error("deleting records of %s before %d failed: %s", p.tp, offset, exc)
        return ErrorCode.kafka_storage_error


@handler(api_key=21, versions=(0, 2))
async def delete_records(ctx: RequestContext, req: Any) -> Any:
    b = ctx.b
    asked: dict[str, dict[int, int]] = {}
    for t in req.topics:
        for rp in t.partitions:
            asked.setdefault(t.name, {})[rp.partition_index] = rp.offset
    topics = []
    for name, offsets in asked.items():
        parts = []
        for index, offset in offsets.items():
            got = await _delete(ctx, name, index, offset)
            if isinstance(got, ErrorCode):
                log.debug("delete records of %s-%d refused: %s", name, index, got.name)
            parts.append(
                b.DeleteRecordsPartitionResult(
                    partition_index=index,
                    low_watermark=INVALID_LOW_WATERMARK if isinstance(got, ErrorCode) else got,
                    error_code=got if isinstance(got, ErrorCode) else ErrorCode.none,
                )
            )
        topics.append(b.DeleteRecordsTopicResult(name=name, partitions=tuple(parts)))
    return b.DeleteRecordsResponse(throttle_time=0, topics=tuple(topics))
