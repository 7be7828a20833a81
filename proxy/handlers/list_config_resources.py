"""ListConfigResources (key 74), v0-1 (flexible). v0 is KIP-714's ListClientMetricsResources
(client-metrics resources only); Kafka 4.1 renamed it (KIP-1142) and v1 takes the resource
types to list and answers each resource's type.

As Kafka (``KafkaApis.handleListConfigResources``, ``ListConfigResourcesRequest``): DESCRIBE_CONFIGS
on the cluster, else CLUSTER_AUTHORIZATION_FAILED with nothing listed. The types a version
supports: v0 CLIENT_METRICS (16); v1 TOPIC (2), BROKER (4), BROKER_LOGGER (8),
CLIENT_METRICS and GROUP (32). An empty list means every supported type; any type outside
them fails the request with UNSUPPORTED_VERSION and nothing listed.

What a single kafkad has of each type:

- TOPIC: every topic, internal ones included (Kafka lists its metadata cache's topics with no
  per-topic authorization);
- BROKER: this node's id;
- CLIENT_METRICS: none. kafkad's client telemetry (``proxy/metrics/telemetry.py``) has one
  built-in subscription, not ``client-metrics`` config resources (IncrementalAlterConfigs
  refuses that type), so there is nothing to list; the same answer a Kafka broker gives
  before anyone configures a subscription;
- GROUP: none: kafkad has no dynamic group configs (refused by IncrementalAlterConfigs too);
- BROKER_LOGGER: none. Deviation: Kafka lists each broker here, whose loggers
  DescribeConfigs shows; kafkad's DescribeConfigs does not serve BROKER_LOGGER, so listing
  the node would name a resource nobody can describe.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.list_config_resources.v1.request import ListConfigResourcesRequest
from kio.schema.list_config_resources.v1.response import (
    ConfigResource,
    ListConfigResourcesResponse,
)
from kio.static.primitive import i8

from proxy.acl.checks import cluster_allows
from proxy.acl.model import AclOperation
from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import NO_THROTTLE

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SUPPORTED = {0: (CLIENT_METRICS,), 1: (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)}


def _refused(code: ErrorCode) -> ListConfigResourcesResponse:
    return ListConfigResourcesResponse(
        throttle_time=NO_THROTTLE, error_code=code, config_resources=()
    )


def _error_reply(req: ListConfigResourcesRequest, code: ErrorCode) -> ListConfigResourcesResponse:
    return _refused(code)


@handler(
    api_key=74,
    versions=(0, 1),
    request=ListConfigResourcesRequest,
    response=ListConfigResourcesResponse,
    error_reply=_error_reply,
)
async def list_config_resources(
    ctx: RequestContext, req: ListConfigResourcesRequest
) -> ListConfigResourcesResponse:
    if not cluster_allows(ctx, AclOperation.DESCRIBE_CONFIGS):
        return _refused(ErrorCode.cluster_authorization_failed)
    supported = SUPPORTED[min(ctx.version, 1)]
    # v0 has no resource types: it lists client metrics (the upgrade leaves the list empty)
    wanted = set(req.resource_types) if req.resource_types else set(supported)
    if not wanted <= set(supported):
        return _refused(ErrorCode.unsupported_version)
    # Kafka's order: groups, client metrics, broker loggers, brokers, topics
    found: list[ConfigResource] = []
    if BROKER in wanted:
        node = str(ctx.broker.node_id)
        found.append(ConfigResource(resource_name=node, resource_type=i8(BROKER)))
    if TOPIC in wanted:
        found += [
            ConfigResource(resource_name=name, resource_type=i8(TOPIC))
            for name in ctx.broker.topics.names()
        ]
    return ListConfigResourcesResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, config_resources=tuple(found)
    )
