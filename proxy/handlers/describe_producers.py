"""DescribeProducers (key 61), v0 (flexible; KIP-664): the live producer state of each
requested partition, as the partition leader holds it (spec eos.md §4.11).

Per producer: id, epoch (int32 on the wire), last sequence (-1 if no batch of the current
epoch is retained), last timestamp, coordinator epoch and the first offset of its open
transaction (-1: none; always -1 until transactions land).

Per topic, in the order of Kafka's ``handleDescribeProducersRequest``: an illegal name is
INVALID_TOPIC_EXCEPTION (``Topic.validate``'s message), then a topic the principal may not READ
is TOPIC_AUTHORIZATION_FAILED ("Topic authorization failed."), then an unknown topic is
UNKNOWN_TOPIC_OR_PARTITION ("This server does not host this topic-partition."), on each
partition asked for; a partition the topic does not have is UNKNOWN_TOPIC_OR_PARTITION without
a message (``ReplicaManager.activeProducerState``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from kio.schema.describe_producers.v0.request import DescribeProducersRequest
from kio.schema.describe_producers.v0.response import (
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId
from kio.static.primitive import i32, i64

from proxy.acl.checks import MESSAGES, allowed_names
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from storage.topics import topic_name_error
from wire.values import NO_THROTTLE

NOT_HOSTED = "This server does not host this topic-partition."  # Kafka's Errors message


def _failed(index: int, code: ErrorCode) -> PartitionResponse:
    return PartitionResponse(
        partition_index=i32(index), error_code=code, error_message=None, active_producers=()
    )


def _each_partition(
    req: DescribeProducersRequest, answer: Callable[[str, int], PartitionResponse]
) -> DescribeProducersResponse:
    return DescribeProducersResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            TopicResponse(
                name=t.name, partitions=tuple(answer(t.name, i) for i in t.partition_indexes)
            )
            for t in req.topics
        ),
    )


def _error_reply(req: DescribeProducersRequest, code: ErrorCode) -> DescribeProducersResponse:
    return _each_partition(req, lambda _topic, index: _failed(index, code))


@handler(
    api_key=61,
    versions=(0, 0),
    request=DescribeProducersRequest,
    response=DescribeProducersResponse,
    error_reply=_error_reply,
)
async def describe_producers(
    ctx: RequestContext, req: DescribeProducersRequest
) -> DescribeProducersResponse:
    topics = ctx.broker.topics
    names = [t.name for t in req.topics]
    readable = allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC, names)

    def answer(topic: str, index: int) -> PartitionResponse:
        if (illegal := topic_name_error(topic)) is not None:
            code = ErrorCode.invalid_topic_exception
            return replace(_failed(index, code), error_message=illegal)
        if topic not in readable:
            code = ErrorCode.topic_authorization_failed
            return replace(_failed(index, code), error_message=MESSAGES[code])
        if topics.get(topic) is None:
            code = ErrorCode.unknown_topic_or_partition
            return replace(_failed(index, code), error_message=NOT_HOSTED)
        partition = topics.partition(topic, index)
        if partition is None or partition.deleted:
            return _failed(index, ErrorCode.unknown_topic_or_partition)
        return PartitionResponse(
            partition_index=i32(index),
            error_code=ErrorCode.none,
            error_message=None,
            active_producers=tuple(
                ProducerState(
                    producer_id=ProducerId(e.producer_id),
                    producer_epoch=i32(e.producer_epoch),
                    last_sequence=i32(e.last_seq),
                    last_timestamp=i64(e.last_timestamp),
                    coordinator_epoch=i32(e.coordinator_epoch),
                    current_txn_start_offset=i64(e.current_txn_first_offset),
                )
                for e in sorted(partition.producers, key=lambda e: e.producer_id)
            ),
        )

    return _each_partition(req, answer)
