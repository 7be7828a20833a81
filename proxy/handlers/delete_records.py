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
internal topic (Kafka's ``Topic.isInternal``); POLICY_VIOLATION when ``cleanup.policy`` is
``compact`` alone (an empty one is allowed: Kafka's ``Partition.deleteRecordsOnLeader``);
OFFSET_OUT_OF_RANGE for a negative offset other than -1 or one past the high watermark;
KAFKA_STORAGE_ERROR if the checkpoint or the segment deletion failed. A partition named twice
is answered once, with the last offset asked for (Kafka keys the request by partition).
``timeout_ms`` is not used: Kafka waits only for followers' low watermarks, and there are none.
Authorization (DELETE on the topic) belongs to the security issue.

A topic the principal may not DELETE gets TOPIC_AUTHORIZATION_FAILED (low watermark -1) on
every partition, before any other check (Kafka's ``handleDeleteRecordsRequest``).
"""

from __future__ import annotations

import logging

from kio.schema.delete_records.v2.request import DeleteRecordsRequest
from kio.schema.delete_records.v2.response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32, i64

from proxy.acl.checks import allowed_names
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from storage.api import KAFKA_INTERNAL_TOPICS, StorageError
from wire.values import NO_THROTTLE

log = logging.getLogger("kafkad.delete_records")

INVALID_LOW_WATERMARK = -1  # Kafka's DeleteRecordsResponse.INVALID_LOW_WATERMARK


def _result(index: int, got: int | ErrorCode) -> DeleteRecordsPartitionResult:
    """A partition's answer: its low watermark, or the error with low watermark -1."""
    if isinstance(got, ErrorCode):
        code, low = got, INVALID_LOW_WATERMARK
    else:
        code, low = ErrorCode.none, got
    return DeleteRecordsPartitionResult(
        partition_index=i32(index), low_watermark=i64(low), error_code=code
    )


def _asked(req: DeleteRecordsRequest) -> dict[TopicName, dict[int, int]]:
    """topic -> partition -> offset, in request order; a partition named twice: its last
    offset (Kafka keys the request by partition)."""
    asked: dict[TopicName, dict[int, int]] = {}
    for t in req.topics:
        for rp in t.partitions:
            asked.setdefault(t.name, {})[rp.partition_index] = rp.offset
    return asked


def _error_reply(req: DeleteRecordsRequest, code: ErrorCode) -> DeleteRecordsResponse:
    """Kafka's ``getErrorResponse``: every partition asked for, carrying the error."""
    return DeleteRecordsResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            DeleteRecordsTopicResult(name=name, partitions=tuple(_result(i, code) for i in parts))
            for name, parts in _asked(req).items()
        ),
    )


async def _delete(ctx: RequestContext, topic: str, index: int, offset: int) -> int | ErrorCode:
    """The partition's low watermark after the deletion, or the code that refused it."""
    p = ctx.broker.topics.partition(topic, index)
    if p is None or p.deleted:
        return ErrorCode.unknown_topic_or_partition
    if topic in KAFKA_INTERNAL_TOPICS:
        return ErrorCode.invalid_topic_exception
    try:
        got = await p.delete_records(offset)
    except StorageError as exc:
        if p.deleted:  # the topic was deleted meanwhile (its log closed under us)
            return ErrorCode.unknown_topic_or_partition
        log.error("deleting records of %s before %d failed: %s", p.tp, offset, exc)
        return ErrorCode.kafka_storage_error
    if isinstance(got, ErrorCode):
        log.debug("delete records of %s before %d refused: %s", p.tp, offset, got.name)
    return got


@handler(
    api_key=21,
    versions=(0, 2),
    request=DeleteRecordsRequest,
    response=DeleteRecordsResponse,
    error_reply=_error_reply,
)
async def delete_records(ctx: RequestContext, req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    topics = []
    asked = _asked(req)
    deletable = allowed_names(ctx, AclOperation.DELETE, ResourceType.TOPIC, asked)
    for name, offsets in asked.items():
        if name not in deletable:
            refused = ErrorCode.topic_authorization_failed
            parts = [_result(i, refused) for i in offsets]
        else:
            parts = [
                _result(i, await _delete(ctx, name, i, offset)) for i, offset in offsets.items()
            ]
        topics.append(DeleteRecordsTopicResult(name=name, partitions=tuple(parts)))
    return DeleteRecordsResponse(throttle_time=NO_THROTTLE, topics=tuple(topics))
