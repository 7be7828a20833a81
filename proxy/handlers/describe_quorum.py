"""DescribeQuorum (key 55), v0-2. v1: each replica's last fetch and last caught-up times. v2:
the replica's directory id, top-level and partition error messages, and the voters' endpoints
(``nodes``).

Kafka's broker forwards it to the controller (``ControllerApis.handleDescribeQuorum``): DESCRIBE
on the cluster, else the whole request is CLUSTER_AUTHORIZATION_FAILED at the top level with
Kafka's message (``DescribeQuorumRequest.getErrorResponse``). The raft client then answers
(``KafkaRaftClient.handleDescribeQuorumRequest``): unless the request names exactly one topic,
``__cluster_metadata``, with exactly partition 0, every named partition is
UNKNOWN_TOPIC_OR_PARTITION with Kafka's message; else the quorum as its leader sees it
(``RaftUtil.singletonDescribeQuorumResponse``).

The quorum of a single kafkad: this node, the only voter and the leader; no observers (in a
combined Kafka node the broker is the voter itself). Where kafkad differs from Kafka, the
values are chosen to say so rather than to look like a metadata log:

- kafkad keeps no ``__cluster_metadata`` log (topics, configs and ACLs are stored each in
  their own files), so there is no log end offset nor high watermark to report: both are -1,
  the schema's "unknown" (Kafka's leader reports its metadata log's);
- the epoch is 1, the first a Raft quorum elects: kafkad never holds an election (Kafka bumps
  it on every restart);
- the leader's last fetch and caught-up times are now, as Kafka reports a leader's own;
- v2's directory id is the zero UUID, Kafka's "no directory id" (kafkad's data dir has none);
- the voter's endpoints (v2) are this broker's listeners with their advertised addresses: the
  controller answers on them (Kafka lists its ``controller.listener.names``, which kafkad does
  not have).
"""

from __future__ import annotations

import uuid

from kio.schema.describe_quorum.v2.request import DescribeQuorumRequest
from kio.schema.describe_quorum.v2.response import (
    DescribeQuorumResponse,
    Listener,
    Node,
    PartitionData,
    ReplicaState,
    TopicData,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i64, u16

from proxy.acl.checks import MESSAGES, require_cluster
from proxy.acl.model import AclOperation
from proxy.context import RequestContext
from proxy.registry import handler
from storage.api import CLUSTER_METADATA

METADATA_TOPIC = CLUSTER_METADATA
EPOCH = i32(1)
UNKNOWN_OFFSET = i64(-1)
NO_DIRECTORY_ID = uuid.UUID(int=0)
UNKNOWN_PARTITION = "This server does not host this topic-partition."


def _error_reply(req: DescribeQuorumRequest, code: ErrorCode) -> DescribeQuorumResponse:
    # DescribeQuorumRequest.getErrorResponse: the top level only, with Errors' message
    return DescribeQuorumResponse(
        error_code=code, error_message=MESSAGES.get(code), topics=(), nodes=()
    )


def _unknown_partitions(req: DescribeQuorumRequest) -> DescribeQuorumResponse:
    return DescribeQuorumResponse(
        error_code=ErrorCode.none,
        error_message=None,
        topics=tuple(
            TopicData(
                topic_name=t.topic_name,
                partitions=tuple(
                    PartitionData(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.unknown_topic_or_partition,
                        error_message=UNKNOWN_PARTITION,
                        # Kafka sets the code and message alone: the schema's defaults, 0
                        leader_id=BrokerId(0),
                        leader_epoch=i32(0),
                        high_watermark=i64(0),
                        current_voters=(),
                        observers=(),
                    )
                    for p in t.partitions
                ),
            )
            for t in req.topics
        ),
        nodes=(),
    )


def _single_metadata_partition(req: DescribeQuorumRequest) -> bool:
    """Kafka's ``RaftUtil.hasValidTopicPartition``."""
    return (
        len(req.topics) == 1
        and req.topics[0].topic_name == METADATA_TOPIC
        and len(req.topics[0].partitions) == 1
        and req.topics[0].partitions[0].partition_index == 0
    )


@handler(
    api_key=55,
    versions=(0, 2),
    request=DescribeQuorumRequest,
    response=DescribeQuorumResponse,
    error_reply=_error_reply,
)
async def describe_quorum(
    ctx: RequestContext, req: DescribeQuorumRequest
) -> DescribeQuorumResponse:
    require_cluster(ctx, AclOperation.DESCRIBE)
    if not _single_metadata_partition(req):
        return _unknown_partitions(req)
    broker = ctx.broker
    node = BrokerId(broker.node_id)
    now = i64(broker.now_ms())
    voter = ReplicaState(
        replica_id=node,
        replica_directory_id=NO_DIRECTORY_ID,
        log_end_offset=UNKNOWN_OFFSET,
        last_fetch_timestamp=now,
        last_caught_up_timestamp=now,
    )
    return DescribeQuorumResponse(
        error_code=ErrorCode.none,
        error_message=None,
        topics=(
            TopicData(
                topic_name=TopicName(METADATA_TOPIC),
                partitions=(
                    PartitionData(
                        partition_index=i32(0),
                        error_code=ErrorCode.none,
                        error_message=None,
                        leader_id=node,
                        leader_epoch=EPOCH,
                        high_watermark=UNKNOWN_OFFSET,
                        current_voters=(voter,),
                        observers=(),
                    ),
                ),
            ),
        ),
        nodes=(
            Node(
                node_id=node,
                listeners=tuple(
                    Listener(name=name, host=host, port=u16(port))
                    for name, (host, port) in broker.advertised.items()
                ),
            ),
        ),
    )
