"""AddRaftVoter (key 80) v0-1 and RemoveRaftVoter (key 81) v0 on kafkad's static one-node
quorum: Kafka's raft client checks in order (cluster id, the voter, the default listener's
endpoint), then UNSUPPORTED_VERSION since kraft.version is 0; ALTER on the cluster."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from kio.schema.add_raft_voter.v0 import request as add0
from kio.schema.add_raft_voter.v1 import request as add1
from kio.schema.errors import ErrorCode
from kio.schema.remove_raft_voter.v0 import request as rm0

from tests.proxy.acl.harness import Op, Type, secured
from tests.proxy.harness import connect, running_broker

E = ErrorCode
DIR = uuid.uuid4()


def add(mod: Any, *, cluster: str | None = None, voter: int = 2, directory: Any = DIR,
        listener: str = "PLAINTEXT") -> Any:  # fmt: skip
    return mod.AddRaftVoterRequest(
        cluster_id=cluster,
        timeout=datetime.timedelta(seconds=5),
        voter_id=voter,
        voter_directory_id=directory,
        listeners=(mod.Listener(name=listener, host="localhost", port=9093),),
    )


def remove(*, cluster: str | None = None, voter: int = 1, directory: Any = DIR) -> Any:
    return rm0.RemoveRaftVoterRequest(
        cluster_id=cluster, voter_id=voter, voter_directory_id=directory
    )


@pytest.mark.parametrize("mod", [add0, add1])
async def test_add_voter_checks_then_refuses_on_a_static_quorum(mod: Any) -> None:
    async with running_broker() as (server, port), connect(port) as c:
        assert server.broker is not None
        ours = server.broker.cluster_id

        async def answer(req: Any) -> tuple[ErrorCode, str | None]:
            resp = await c.request(req)
            return resp.error_code, resp.error_message

        assert await answer(add(mod, cluster="other")) == (
            E.inconsistent_cluster_id,
            f'The given id "other" doesn\'t match the cluster id "{ours}"',
        )
        invalid = (E.invalid_request, "Add voter request didn't include a valid voter")
        assert await answer(add(mod, voter=-1)) == invalid
        assert await answer(add(mod, directory=None)) == invalid
        # Kafka's message, with its Endpoints and ListenerName formatting
        assert await answer(add(mod, listener="CONTROLLER")) == (
            E.invalid_request,
            "Add voter request didn't include the endpoint (Endpoints(endpoints="
            "{ListenerName(CONTROLLER)=localhost/<unresolved>:9093})) for the default listener "
            "ListenerName(PLAINTEXT)",
        )
        unsupported = (
            E.unsupported_version,
            "Cluster doesn't support adding voter because the kraft.version feature is 0",
        )
        assert await answer(add(mod, cluster=ours)) == unsupported
        assert await answer(add(mod)) == unsupported
        # listener names are normalised to upper case (ListenerName.normalised)
        assert await answer(add(mod, listener="plaintext")) == unsupported


async def test_remove_voter_checks_then_refuses_on_a_static_quorum() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        resp = await c.request(remove(cluster="other"))
        assert resp.error_code == E.inconsistent_cluster_id
        resp = await c.request(remove(voter=-1))
        assert (resp.error_code, resp.error_message) == (
            E.invalid_request,
            "Remove voter request didn't include a valid voter",
        )
        resp = await c.request(remove())
        assert (resp.error_code, resp.error_message) == (
            E.unsupported_version,
            "Cluster doesn't support removing voter because the kraft.version feature is 0",
        )


async def test_both_need_alter_on_the_cluster() -> None:
    async with secured() as (c, grants, _):
        grants.open = False
        grants.grant(Op.DESCRIBE, Type.CLUSTER)
        refused = (E.cluster_authorization_failed, "Cluster authorization failed.")
        for req in (add(add1), remove()):
            resp = await c.request(req)
            assert (resp.error_code, resp.error_message) == refused
        grants.grant(Op.ALTER, Type.CLUSTER)
        assert (await c.request(remove())).error_code == E.unsupported_version
