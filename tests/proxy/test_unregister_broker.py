"""UnregisterBroker (key 64) v0: this node's id is answered NONE (it stays registered), any
other BROKER_ID_NOT_REGISTERED, ALTER on the cluster (Kafka's ControllerApis and
ReplicationControlManager.unregisterBroker)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.unregister_broker.v0 import request as ub

from tests.proxy.acl.harness import Op, Type, secured
from tests.proxy.harness import connect, running_broker


async def test_only_this_node_is_registered() -> None:
    async with running_broker(**{"node.id": "4"}) as (_, port), connect(port) as c:
        # the refusal carries the exception's message (KAFKA-18859: getErrorResponse, 4.1+)
        for broker_id, code, message in (
            (4, ErrorCode.none, None),
            (5, ErrorCode.broker_id_not_registered, "Broker ID 5 is not currently registered"),
        ):
            resp = await c.request(ub.UnregisterBrokerRequest(broker_id=broker_id))
            assert (resp.error_code, resp.error_message) == (code, message)
        # still the cluster's broker
        resp = await c.request(ub.UnregisterBrokerRequest(broker_id=4))
        assert resp.error_code == ErrorCode.none


async def test_needs_alter_on_the_cluster() -> None:
    async with secured() as (c, grants, _):
        grants.open = False
        grants.grant(Op.DESCRIBE, Type.CLUSTER)
        resp = await c.request(ub.UnregisterBrokerRequest(broker_id=1))
        assert resp.error_code == ErrorCode.cluster_authorization_failed
        grants.grant(Op.ALTER, Type.CLUSTER)
        resp = await c.request(ub.UnregisterBrokerRequest(broker_id=1))
        assert resp.error_code == ErrorCode.none
