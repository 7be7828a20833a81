"""DescribeCluster (key 60), v0-1. v1: endpoint type (brokers only here). The single node is
its own controller."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from proxy.context import RequestContext
from proxy.registry import handler

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


@handler(api_key=60, versions=(0, 1))
async def describe_cluster(ctx: RequestContext, req: Any) -> Any:
    b, broker = ctx.b, ctx.broker
    if ctx.version >= 1 and req.endpoint_type != 1:
        code = (
            ErrorCode.mismatched_endpoint_type
            if req.endpoint_type == 2
            else ErrorCode.unsupported_endpoint_type
        )
        return b.DescribeClusterResponse(
            throttle_time=0,
            error_code=code,
            error_message="kafkad serves only the BROKER endpoint type",
            endpoint_type=1,
            cluster_id=broker.cluster_id,
            controller_id=-1,
            brokers=(),
        )
    return b.DescribeClusterResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=1,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        brokers=(
            b.DescribeClusterBroker(
                broker_id=broker.node_id,
                host=ctx.advertised[0],
                port=ctx.advertised[1],
                rack=None,
            ),
        ),
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )
