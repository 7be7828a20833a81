"""ListConfigResources (key 74) v0-1, KIP-1142 (v0: KIP-714's ListClientMetricsResources):
the types each version supports, an empty list meaning all of them, UNSUPPORTED_VERSION for
another type, what a single kafkad has of each, and DESCRIBE_CONFIGS on the cluster (Kafka's
KafkaApis.handleListConfigResources)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.list_config_resources.v0 import request as lcr0
from kio.schema.list_config_resources.v1 import request as lcr1

from tests.proxy.acl.harness import Op, Type, secured
from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_broker_requests import create

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32


async def listed(c: RawClient, *types: int) -> tuple[ErrorCode, list[tuple[str, int]]]:
    resp = await c.request(lcr1.ListConfigResourcesRequest(resource_types=types))
    return resp.error_code, [(r.resource_name, r.resource_type) for r in resp.config_resources]


async def test_v1_lists_topics_and_the_broker() -> None:
    async with running_broker(**{"node.id": "2"}) as (_, port), connect(port) as c:
        assert await create(c, "b") == ErrorCode.none
        assert await create(c, "a") == ErrorCode.none
        # Kafka's order: groups, client metrics, broker loggers, brokers, then topics
        every = (ErrorCode.none, [("2", BROKER), ("a", TOPIC), ("b", TOPIC)])
        assert await listed(c) == every
        assert await listed(c, TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP) == every
        assert await listed(c, TOPIC) == (ErrorCode.none, [("a", TOPIC), ("b", TOPIC)])
        assert await listed(c, BROKER) == (ErrorCode.none, [("2", BROKER)])
        # no client-metrics resources, group configs or broker-logger resources in kafkad
        assert await listed(c, CLIENT_METRICS, GROUP, BROKER_LOGGER) == (ErrorCode.none, [])


@pytest.mark.parametrize("types", [(64,), (TOPIC, 1), (0,), (-1,)])
async def test_v1_an_unsupported_type_fails_the_request(types: tuple[int, ...]) -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "a") == ErrorCode.none
        assert await listed(c, *types) == (ErrorCode.unsupported_version, [])


async def test_v0_lists_client_metrics_resources_only() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "a") == ErrorCode.none
        resp = await c.request(lcr0.ListConfigResourcesRequest())
        assert (resp.error_code, resp.config_resources) == (ErrorCode.none, ())


async def test_needs_describe_configs_on_the_cluster() -> None:
    async with secured() as (c, grants, _):
        grants.open = False
        grants.grant(Op.DESCRIBE, Type.CLUSTER)
        assert await listed(c) == (ErrorCode.cluster_authorization_failed, [])
        resp = await c.request(lcr0.ListConfigResourcesRequest())
        assert resp.error_code == ErrorCode.cluster_authorization_failed
        grants.grant(Op.DESCRIBE_CONFIGS, Type.CLUSTER)
        assert await listed(c, BROKER) == (ErrorCode.none, [("1", BROKER)])
