"""DescribeCluster (key 60), v0-2. v1: endpoint type (brokers only here: CONTROLLER is
MISMATCHED_ENDPOINT_TYPE, any other UNSUPPORTED_ENDPOINT_TYPE, with Kafka's messages). v2:
fenced brokers (KIP-1073: ``include_fenced_brokers`` in, ``is_fenced`` out); the single node,
its own controller, is never fenced while it answers, so the flag changes nothing here.

Authorized operations, when asked for (Kafka's ``computeDescribeClusterResponse``): the cluster
operations the principal may do if it may DESCRIBE the cluster, else 0; every cluster operation
without an authorizer.
"""

from __future__ import annotations

from kio.schema.describe_cluster.v2.request import DescribeClusterRequest
from kio.schema.describe_cluster.v2.response import DescribeClusterBroker, DescribeClusterResponse
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId
from kio.static.primitive import i8, i32

from proxy.acl.checks import authorized_operations, cluster_allows
from proxy.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import AUTHORIZED_OPERATIONS_OMITTED, NO_THROTTLE

BROKER_ENDPOINT, CONTROLLER_ENDPOINT = i8(1), i8(2)  # Kafka's EndpointType ids


@handler(
    api_key=60, versions=(0, 2), request=DescribeClusterRequest, response=DescribeClusterResponse
)
async def describe_cluster(
    ctx: RequestContext, req: DescribeClusterRequest
) -> DescribeClusterResponse:
    broker = ctx.broker
    if ctx.version >= 1 and req.endpoint_type != BROKER_ENDPOINT:
        # Kafka's AuthHelper.computeDescribeClusterResponse: the code and its message on an
        # otherwise default response (no cluster id, no brokers, controller -1)
        if req.endpoint_type == CONTROLLER_ENDPOINT:
            code = ErrorCode.mismatched_endpoint_type
            message = (
                "The request was sent to an endpoint of type BROKER, "
                "but we wanted an endpoint of type CONTROLLER"
            )
        else:
            code = ErrorCode.unsupported_endpoint_type
            message = f"Unsupported endpoint type {req.endpoint_type}"
        return DescribeClusterResponse(
            throttle_time=NO_THROTTLE,
            error_code=code,
            error_message=message,
            endpoint_type=BROKER_ENDPOINT,
            cluster_id="",
            controller_id=BrokerId(-1),
            brokers=(),
        )
    operations = AUTHORIZED_OPERATIONS_OMITTED
    if req.include_cluster_authorized_operations:
        operations = (
            authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
            if cluster_allows(ctx, AclOperation.DESCRIBE)
            else i32(0)
        )
    host, port = ctx.advertised
    return DescribeClusterResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=BROKER_ENDPOINT,
        cluster_id=broker.cluster_id,
        controller_id=BrokerId(broker.node_id),
        brokers=(
            DescribeClusterBroker(
                broker_id=BrokerId(broker.node_id),
                host=host,
                port=i32(port),
                rack=None,
                is_fenced=False,
            ),
        ),
        cluster_authorized_operations=operations,
    )
