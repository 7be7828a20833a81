"""WriteTxnMarkers (key 27), v1-2 (flexible; v0 was removed in Kafka 4.0): write COMMIT or
ABORT markers for a producer on the listed partitions (spec eos.md §4.10, §4.11).

kafkad's own transaction coordinator writes its markers in process (``Broker.write_txn_marker``),
so over the wire this API serves the admin abort path, KIP-664's ``Admin.abortTransaction``:
an operator clears a hanging transaction by sending ABORT for (producer id, epoch,
coordinator epoch from DescribeProducers) straight to the partition leader. Each (marker,
partition) goes through ``Broker.write_txn_marker``, one after the other in request order, and
is answered with its own error code:

* NONE: written (a marker for a producer with nothing open there is legal and only moves its
  epoch and coordinator epoch; on ``__consumer_offsets`` the producer's pending offsets are
  materialised or dropped);
* UNKNOWN_TOPIC_OR_PARTITION: no such topic or partition;
* INVALID_PRODUCER_EPOCH: the marker's epoch is below the producer's, or, for a marker whose
  v2 ``transaction_version`` is 2 or more (a TV2 coordinator's, written at the bumped epoch),
  not above it while the producer has a transaction open on the partition (Kafka's
  ``ProducerAppendInfo.checkProducerEpoch``; with none open, an equal epoch is the retry of a
  marker already written, written again: KAFKA-19999, Kafka 4.2); v1 markers are TV0/TV1;
* TRANSACTION_COORDINATOR_FENCED: the coordinator epoch is below the last marker's;
* KAFKA_STORAGE_ERROR: the append failed.

There are no ACLs (Kafka requires CLUSTER_ACTION). The transaction coordinator is not told: a
transaction aborted this way on a partition stays as it is at the coordinator, as in Kafka.

Only brokers send it: it needs ALTER or CLUSTER_ACTION on the cluster, else every partition is
answered CLUSTER_AUTHORIZATION_FAILED (Kafka's ``handleWriteTxnMarkersRequest``).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.write_txn_markers.v2.request import WriteTxnMarkersRequest
from kio.schema.write_txn_markers.v2.response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)

from proxy.acl.checks import cluster_allows, require_cluster
from proxy.acl.model import AclOperation
from proxy.context import RequestContext
from proxy.registry import handler
from storage.api import TopicPartition


def _error_reply(req: WriteTxnMarkersRequest, code: ErrorCode) -> WriteTxnMarkersResponse:
    """Every partition of every marker carrying ``code`` (Kafka's getErrorResponse)."""
    return WriteTxnMarkersResponse(
        markers=tuple(
            WritableTxnMarkerResult(
                producer_id=m.producer_id,
                topics=tuple(
                    WritableTxnMarkerTopicResult(
                        name=t.name,
                        partitions=tuple(
                            WritableTxnMarkerPartitionResult(partition_index=i, error_code=code)
                            for i in t.partition_indexes
                        ),
                    )
                    for t in m.topics
                ),
            )
            for m in req.markers
        )
    )


@handler(
    api_key=27,
    versions=(1, 2),
    request=WriteTxnMarkersRequest,
    response=WriteTxnMarkersResponse,
    error_reply=_error_reply,
)
async def write_txn_markers(
    ctx: RequestContext, req: WriteTxnMarkersRequest
) -> WriteTxnMarkersResponse:
    if not cluster_allows(ctx, AclOperation.ALTER):
        require_cluster(ctx, AclOperation.CLUSTER_ACTION)
    broker = ctx.broker
    results = []
    for marker in req.markers:
        topics = []
        for t in marker.topics:
            parts = []
            for index in t.partition_indexes:
                code = await broker.write_txn_marker(
                    TopicPartition(t.name, index),
                    marker.producer_id,
                    marker.producer_epoch,
                    marker.transaction_result,
                    marker.coordinator_epoch,
                    transaction_version=marker.transaction_version,
                )
                parts.append(
                    WritableTxnMarkerPartitionResult(partition_index=index, error_code=code)
                )
            topics.append(WritableTxnMarkerTopicResult(name=t.name, partitions=tuple(parts)))
        results.append(
            WritableTxnMarkerResult(producer_id=marker.producer_id, topics=tuple(topics))
        )
    return WriteTxnMarkersResponse(markers=tuple(results))
