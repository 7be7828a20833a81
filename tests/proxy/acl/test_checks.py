"""proxy/acl/checks.py: Kafka's AuthHelper questions over RequestContext.authorized."""

from __future__ import annotations

from typing import Any

from kio.schema.describe_cluster.v2 import request as dcl

from proxy.acl.checks import (
    CLUSTER_OPERATIONS,
    GROUP_OPERATIONS,
    TOPIC_OPERATIONS,
    allowed_names,
    allowed_on_any,
    authorized_operations,
)
from proxy.context import RequestContext
from tests.proxy.acl.harness import Grants, Op, Type
from tests.proxy.harness import connect, running_broker


class _Acls:
    bindings = ()


class _Broker:
    def __init__(self, authorizer: Any) -> None:
        self.authorizer = authorizer
        self.acls = _Acls()


def ctx(authorizer: Any = None) -> RequestContext:
    return RequestContext(header=None, broker=_Broker(authorizer), peer="10.0.0.7:5555")  # type: ignore[arg-type]


def test_the_bitfields_are_kafkas_supported_operations() -> None:
    assert TOPIC_OPERATIONS == 0b1101_1111_1000  # READ..DESCRIBE, DESCRIBE_/ALTER_CONFIGS
    assert CLUSTER_OPERATIONS == 8096  # CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, *_CONFIGS, IW
    assert GROUP_OPERATIONS == (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)


def test_without_an_authorizer_everything_is_allowed() -> None:
    c = ctx()
    assert allowed_names(c, Op.READ, Type.TOPIC, ["a", "b", "a"]) == {"a", "b"}
    assert authorized_operations(c, Type.CLUSTER, "kafka-cluster") == CLUSTER_OPERATIONS
    assert allowed_on_any(c, Op.WRITE, Type.TOPIC)


def test_filters_ask_each_distinct_name_with_the_client_ip() -> None:
    grants = Grants()
    grants.grant(Op.READ, Type.TOPIC, "a")
    c = ctx(grants)
    assert allowed_names(c, Op.READ, Type.TOPIC, ["a", "b", "a"]) == {"a"}
    assert grants.hosts == {"10.0.0.7"}
    assert authorized_operations(c, Type.TOPIC, "a") == 1 << Op.READ


def test_by_resource_type_without_bindings_asks_about_a_made_up_name() -> None:
    """Kafka's first step: the operation on the name "hardcode", which a wildcard grant or a
    super user passes; a grant the authorizer knows but the stored bindings lack does not."""
    grants = Grants()
    grants.grant(Op.WRITE, Type.TOPIC, "some-topic")
    assert not allowed_on_any(ctx(grants), Op.WRITE, Type.TOPIC)
    grants.open = True
    assert allowed_on_any(ctx(grants), Op.WRITE, Type.TOPIC)


async def test_no_authorizer_answers_every_cluster_operation() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        resp = await c.request(
            dcl.DescribeClusterRequest(
                include_cluster_authorized_operations=True, include_fenced_brokers=False
            )
        )
        assert resp.cluster_authorized_operations == CLUSTER_OPERATIONS
