"""An in-process broker whose authorizer is a set of grants, and a raw client to it.

``Grants`` is the smallest ``Authorizer``: a request is allowed when (principal, operation,
resource type, name) was granted, exactly (no patterns, no implied operations: those are the
authorizer's business, tested with it). Tests grant what one check needs and assert the error
code Kafka answers without it. While ``Grants.open`` is set everything is allowed (set-up).
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from kio.schema.create_topics.v7 import request as ct
from kio.schema.errors import ErrorCode

from proxy.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from proxy.principal import KafkaPrincipal
from proxy.server import Server
from tests.proxy.harness import RawClient, connect, running_broker

ANONYMOUS = "User:ANONYMOUS"
MS = datetime.timedelta(milliseconds=1)
Op, Type = AclOperation, ResourceType


@dataclass
class Grants:
    allowed: set[tuple[str, AclOperation, ResourceType, str]] = field(default_factory=set)
    open: bool = False
    hosts: set[str] = field(default_factory=set)

    def grant(
        self, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME
    ) -> None:
        self.allowed.add((ANONYMOUS, operation, resource_type, name))

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        self.hosts.add(host)
        return self.open or (str(principal), operation, resource_type, name) in self.allowed


@asynccontextmanager
async def secured(**overrides: str) -> AsyncIterator[tuple[RawClient, Grants, Server]]:
    """A broker with a ``Grants`` authorizer (open until the test closes it) and a client."""
    async with running_broker(**overrides) as (server, port), connect(port) as client:
        grants = Grants(open=True)
        assert server.broker is not None
        server.broker.authorizer = grants
        yield client, grants, server


async def create(client: RawClient, *names: str, partitions: int = 1) -> None:
    resp = await client.request(
        ct.CreateTopicsRequest(
            topics=tuple(
                ct.CreatableTopic(
                    name=n,
                    num_partitions=partitions,
                    replication_factor=-1,
                    assignments=(),
                    configs=(),
                )
                for n in names
            ),
            timeout=1000 * MS,
            validate_only=False,
        )
    )
    assert [t.error_code for t in resp.topics] == [ErrorCode.none] * len(names)


def codes(topics: Any, partitions: str = "partitions", code: str = "error_code") -> dict:
    """{(topic name, partition index): code} of a response's topics."""
    out = {}
    for t in topics:
        name = next(getattr(t, f) for f in ("name", "topic", "topic_name") if hasattr(t, f))
        for p in getattr(t, partitions):
            index = next(
                getattr(p, f)
                for f in ("partition_index", "partition", "index", "partition_id")
                if hasattr(p, f)
            )
            out[(name, int(index))] = getattr(p, code)
    return out
