"""CreateAcls, DescribeAcls and DeleteAcls against an in-process broker over loopback: the
answers with and without an authorizer, CLUSTER authorization, old versions, a connection
closed for what Kafka cannot parse, and ACLs kept across a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_acls.v1 import request as create_v1
from kio.schema.create_acls.v3 import request as create
from kio.schema.delete_acls.v3 import request as delete
from kio.schema.describe_acls.v1 import request as describe_v1
from kio.schema.describe_acls.v3 import request as describe
from kio.schema.describe_configs.v4 import request as describe_configs
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from proxy.acl.model import AclOperation, AclPermissionType, PatternType, ResourceType
from tests.proxy.harness import connect, encode_request, running_broker

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER = {"authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS"}
TOPIC, PREFIXED, LITERAL = ResourceType.TOPIC, PatternType.PREFIXED, PatternType.LITERAL


def creation(
    name: str,
    pattern: PatternType = LITERAL,
    op: AclOperation = AclOperation.READ,
    principal: str = "User:alice",
    rtype: int = ResourceType.TOPIC,
) -> create.AclCreation:
    return create.AclCreation(
        resource_type=i8(rtype),
        resource_name=name,
        resource_pattern_type=i8(pattern),
        principal=principal,
        host="*",
        operation=i8(op),
        permission_type=i8(AclPermissionType.ALLOW),
    )


def _any_entry_filter(rtype: int, name: str | None, pattern: PatternType) -> dict[str, Any]:
    """A DescribeAcls request's fields, which a DeleteAcls filter shares: any principal,
    host, operation and permission."""
    return {
        "resource_type_filter": i8(rtype),
        "resource_name_filter": name,
        "pattern_type_filter": i8(pattern),
        "principal_filter": None,
        "host_filter": None,
        "operation": i8(AclOperation.ANY),
        "permission_type": i8(AclPermissionType.ANY),
    }


def describe_all(pattern: PatternType = PatternType.ANY, name: str | None = None) -> Any:
    return describe.DescribeAclsRequest(**_any_entry_filter(ResourceType.ANY, name, pattern))


def delete_filter(name: str | None, pattern: PatternType) -> delete.DeleteAclsFilter:
    return delete.DeleteAclsFilter(**_any_entry_filter(ResourceType.TOPIC, name, pattern))


def described(resp: Any) -> list[tuple[int, str, int, str, int]]:
    return [
        (r.resource_type, r.resource_name, r.pattern_type, a.principal, a.operation)
        for r in resp.resources
        for a in r.acls
    ]


async def test_advertised_from_v1_to_v3() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        resp = await c.request(
            ApiVersionsRequest(client_software_name="t", client_software_version="1")
        )
        keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert [keys[k] for k in (29, 30, 31)] == [(1, 3)] * 3


async def test_no_authorizer_means_security_disabled() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        made = await c.request(create.CreateAclsRequest(creations=(creation("t"), creation("u"))))
        assert [(r.error_code, r.error_message) for r in made.results] == [
            (ErrorCode.security_disabled, "No Authorizer is configured.")
        ] * 2
        seen = await c.request(describe_all())
        assert (seen.error_code, seen.error_message, seen.resources) == (
            ErrorCode.security_disabled,
            "No Authorizer is configured on the broker",
            (),
        )
        gone = await c.request(
            delete.DeleteAclsRequest(filters=(delete_filter(None, PatternType.ANY),))
        )
        assert [r.error_code for r in gone.filter_results] == [ErrorCode.security_disabled]


async def test_without_cluster_grants_cluster_authorization_failed() -> None:
    settings = {"authorizer.class.name": STANDARD}  # ANONYMOUS is no super user
    async with running_broker(**settings) as (_, port), connect(port) as c:
        made = await c.request(create.CreateAclsRequest(creations=(creation("t"),)))
        assert [r.error_code for r in made.results] == [ErrorCode.cluster_authorization_failed]
        seen = await c.request(describe_all())
        assert seen.error_code == ErrorCode.cluster_authorization_failed
        gone = await c.request(
            delete.DeleteAclsRequest(filters=(delete_filter(None, PatternType.ANY),) * 2)
        )
        assert [r.error_code for r in gone.filter_results] == [
            ErrorCode.cluster_authorization_failed
        ] * 2
    # allow.everyone.if.no.acl.found: no ACL on the cluster, so everyone may
    settings["allow.everyone.if.no.acl.found"] = "true"
    async with running_broker(**settings) as (_, port), connect(port) as c:
        made = await c.request(create.CreateAclsRequest(creations=(creation("t"),)))
        assert [r.error_code for r in made.results] == [ErrorCode.none]


async def test_create_describe_delete_and_restart(tmp_path: Path) -> None:
    data = f"file://{tmp_path}"
    async with running_broker(data, **AUTHORIZER) as (_, port), connect(port) as c:
        made = await c.request(
            create.CreateAclsRequest(
                creations=(
                    creation("orders", PREFIXED),
                    creation("orders-eu"),
                    creation("payments", op=AclOperation.WRITE),
                    creation("x", principal="alice"),
                    creation("kafka-cluster", rtype=ResourceType.CLUSTER, op=AclOperation.ALTER),
                )
            )
        )
        assert [r.error_code for r in made.results] == [ErrorCode.none] * 3 + [
            ErrorCode.invalid_request,
            ErrorCode.none,
        ]
        # MATCH: every binding that applies to "orders-eu"
        matched = await c.request(describe_all(PatternType.MATCH, "orders-eu"))
        assert described(matched) == [
            (TOPIC, "orders", PREFIXED, "User:alice", AclOperation.READ),
            (TOPIC, "orders-eu", LITERAL, "User:alice", AclOperation.READ),
        ]
        gone = await c.request(
            delete.DeleteAclsRequest(filters=(delete_filter("orders-eu", LITERAL),))
        )
        [result] = gone.filter_results
        assert result.error_code == ErrorCode.none
        assert [(m.resource_name, m.pattern_type, m.principal) for m in result.matching_acls] == [
            ("orders-eu", LITERAL, "User:alice")
        ]
    async with running_broker(data, **AUTHORIZER) as (_, port), connect(port) as c:
        # a v1 client (not flexible) sees the same, after a restart
        old = await c.request(
            describe_v1.DescribeAclsRequest(
                resource_type_filter=i8(ResourceType.TOPIC),
                resource_name_filter=None,
                pattern_type_filter=i8(PatternType.ANY),
                principal_filter=None,
                host_filter=None,
                operation=i8(AclOperation.ANY),
                permission_type=i8(AclPermissionType.ANY),
            )
        )
        assert described(old) == [
            (TOPIC, "orders", PREFIXED, "User:alice", AclOperation.READ),
            (TOPIC, "payments", LITERAL, "User:alice", AclOperation.WRITE),
        ]
        v1 = await c.request(
            create_v1.CreateAclsRequest(
                creations=(
                    create_v1.AclCreation(
                        resource_type=i8(ResourceType.GROUP),
                        resource_name="g",
                        resource_pattern_type=i8(LITERAL),
                        principal="User:bob",
                        host="10.0.0.1",
                        operation=i8(AclOperation.READ),
                        permission_type=i8(AclPermissionType.DENY),
                    ),
                )
            )
        )
        assert [r.error_code for r in v1.results] == [ErrorCode.none]
        assert len(described(await c.request(describe_all()))) == 4


async def test_a_request_kafka_cannot_parse_closes_the_connection() -> None:
    async with running_broker(**AUTHORIZER) as (_, port), connect(port) as c:
        bad = creation("t", pattern=PatternType.UNKNOWN)  # code 0
        await c.send_raw(encode_request(create.CreateAclsRequest(creations=(bad,)), 1))
        with trio.fail_after(10):
            assert await c.read_frame() is None
        async with connect(port) as other:  # the broker serves on
            assert (await other.request(describe_all())).error_code == ErrorCode.none


async def test_any_in_a_creation_fails_the_whole_request() -> None:
    async with running_broker(**AUTHORIZER) as (_, port), connect(port) as c:
        made = await c.request(
            create.CreateAclsRequest(
                creations=(creation("t"), creation("u", pattern=PatternType.MATCH))
            )
        )
        assert [r.error_code for r in made.results] == [ErrorCode.unknown_server_error] * 2
        assert described(await c.request(describe_all())) == []


async def test_concurrent_creations_lose_nothing(tmp_path: Path) -> None:
    names = [f"t{i}" for i in range(8)]
    async with running_broker(f"file://{tmp_path}", **AUTHORIZER) as (_, port):

        async def make(name: str) -> None:
            async with connect(port) as c:
                made = await c.request(create.CreateAclsRequest(creations=(creation(name),)))
                assert [r.error_code for r in made.results] == [ErrorCode.none]

        async with trio.open_nursery() as nursery:
            for name in names:
                nursery.start_soon(make, name)
        async with connect(port) as c:
            got = described(await c.request(describe_all()))
        assert sorted(name for _, name, _, _, _ in got) == names


async def test_describe_configs_shows_no_value_for_the_authorizer_settings() -> None:
    # Kafka's KafkaConfig does not define super.users or allow.everyone.if.no.acl.found (the
    # authorizer reads them): DescribeConfigs, not knowing their type, marks them sensitive
    # (KafkaConfig.maybeSensitive) and never shows who the super users are.
    settings = {**AUTHORIZER, "allow.everyone.if.no.acl.found": "true"}
    async with running_broker(**settings) as (_, port), connect(port) as c:
        resp = await c.request(
            describe_configs.DescribeConfigsRequest(
                resources=(
                    describe_configs.DescribeConfigsResource(
                        resource_type=i8(4), resource_name="1", configuration_keys=None
                    ),
                ),
                include_synonyms=False,
                include_documentation=False,
            )
        )
        shown = {e.name: (e.value, e.is_sensitive) for e in resp.results[0].configs}
        assert shown["super.users"] == (None, True)
        assert shown["allow.everyone.if.no.acl.found"] == (None, True)
        assert shown["authorizer.class.name"] == (STANDARD, False)
