"""ACL administration from stock admin clients: a kafkad subprocess with Kafka's
StandardAuthorizer, a SASL_PLAINTEXT listener (PLAIN) with a super user ``admin`` and an
ordinary user ``alice``, as Kafka configures them.

confluent-kafka's AdminClient and kafka-python's KafkaAdminClient create, describe (with ANY
and MATCH filters) and delete ACLs as the super user; alice, with no grant on the cluster, is
refused with CLUSTER_AUTHORIZATION_FAILED; the ACLs survive a ``kill -9`` and a restart.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KpResourceType
from kafka.errors import ClusterAuthorizationFailedError, NoError

from compat_tests._support import EXTERNAL, topic_name
from compat_tests.conftest import _LIVE, BrokerProcess

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own broker with ACLs")

TIMEOUT_S = 30
USERS = {"admin": "admin-secret", "alice": "alice-secret"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class AclBroker:
    def __init__(self, process: BrokerProcess, port: int) -> None:
        self.process = process
        self.bootstrap = f"127.0.0.1:{port}"

    def config(self, user: str) -> dict[str, Any]:
        """librdkafka's settings to log in as ``user``."""
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": USERS[user],
        }

    def confluent(self, user: str) -> AdminClient:
        return AdminClient(self.config(user))

    def kafka_python(self, user: str) -> KafkaAdminClient:
        return KafkaAdminClient(
            bootstrap_servers=self.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username=user,
            sasl_plain_password=USERS[user],
            request_timeout_ms=TIMEOUT_S * 1000,
        )


def acl_broker(factory: pytest.TempPathFactory, name: str) -> Iterator[AclBroker]:
    """A module-scoped fixture's body: a kafkad subprocess with StandardAuthorizer, PLAIN over
    SASL_PLAINTEXT and the super user ``admin``, stopped (cleanly) at the end."""
    tmp: Path = factory.mktemp(f"kafkad-{name}")
    port = _free_port()
    settings = {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    }
    process = BrokerProcess(tmp / "data", tmp / f"{name}.stderr.log", settings)
    _LIVE.append(process)
    process.start()
    yield AclBroker(process, port)
    code = process.stop()
    _LIVE.remove(process)
    assert code == 0, f"broker exit code {code} on SIGTERM\n{process.log_tail()}"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclBroker]:
    yield from acl_broker(tmp_path_factory, "acls")


def confluent_bindings(prefix: str) -> list[AclBinding]:
    return [
        AclBinding(
            ResourceType.TOPIC,
            prefix,
            ResourcePatternType.PREFIXED,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
        AclBinding(
            ResourceType.GROUP,
            f"{prefix}-group",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
        AclBinding(
            ResourceType.TRANSACTIONAL_ID,
            f"{prefix}-tx",
            ResourcePatternType.LITERAL,
            "User:*",
            "10.0.0.1",
            AclOperation.WRITE,
            AclPermissionType.DENY,
        ),
    ]


def any_filter(
    rtype: ResourceType = ResourceType.ANY,
    name: str | None = None,
    pattern: ResourcePatternType = ResourcePatternType.ANY,
) -> AclBindingFilter:
    return AclBindingFilter(
        rtype, name, pattern, None, None, AclOperation.ANY, AclPermissionType.ANY
    )


def key(b: AclBinding) -> tuple[object, ...]:
    return (
        b.restype,
        b.name,
        b.resource_pattern_type,
        b.principal,
        b.host,
        b.operation,
        b.permission_type,
    )


def test_confluent_kafka_create_describe_delete(broker: AclBroker) -> None:
    admin = broker.confluent("admin")
    prefix = topic_name("cfk-acl")
    wanted = confluent_bindings(prefix)
    for fut in admin.create_acls(wanted, request_timeout=TIMEOUT_S).values():
        assert fut.result() is None
    got = admin.describe_acls(any_filter(), request_timeout=TIMEOUT_S).result()
    assert {key(b) for b in wanted} <= {key(b) for b in got}
    # MATCH: the bindings that apply to one topic under the prefix
    matched = admin.describe_acls(
        any_filter(ResourceType.TOPIC, f"{prefix}-orders", ResourcePatternType.MATCH),
        request_timeout=TIMEOUT_S,
    ).result()
    assert [key(b) for b in matched] == [key(wanted[0])]
    [deleted] = admin.delete_acls(
        [any_filter(ResourceType.GROUP, f"{prefix}-group", ResourcePatternType.LITERAL)],
        request_timeout=TIMEOUT_S,
    ).values()
    assert [key(b) for b in deleted.result()] == [key(wanted[1])]
    left = admin.describe_acls(any_filter(), request_timeout=TIMEOUT_S).result()
    assert key(wanted[1]) not in {key(b) for b in left}


def test_confluent_kafka_without_a_cluster_grant_is_refused(broker: AclBroker) -> None:
    alice = broker.confluent("alice")
    [fut] = alice.create_acls(
        confluent_bindings(topic_name("refused"))[:1], request_timeout=TIMEOUT_S
    ).values()
    with pytest.raises(KafkaException) as err:
        fut.result()
    assert err.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"
    # librdkafka drops DescribeAcls' top-level error code (rd_kafka_DescribeAclsResponse_parse
    # returns no error whatever the code): against Kafka too, a refusal reads as no ACLs
    assert alice.describe_acls(any_filter(), request_timeout=TIMEOUT_S).result() == []


def kp_acl(prefix: str) -> ACL:
    return ACL(
        principal="User:alice",
        host="*",
        operation=ACLOperation.WRITE,
        permission_type=ACLPermissionType.ALLOW,
        resource_pattern=ResourcePattern(
            KpResourceType.TOPIC, prefix, ACLResourcePatternType.PREFIXED
        ),
    )


def kp_filter(name: str | None, pattern: ACLResourcePatternType) -> ACLFilter:
    return ACLFilter(
        principal=None,
        host=None,
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(KpResourceType.TOPIC, name, pattern),
    )


def test_kafka_python_create_describe_delete(broker: AclBroker) -> None:
    admin = broker.kafka_python("admin")
    try:
        prefix = topic_name("kp-acl")
        made = admin.create_acls([kp_acl(prefix)])
        assert made["failed"] == [] and len(made["succeeded"]) == 1
        acls, error = admin.describe_acls(kp_filter(f"{prefix}-x", ACLResourcePatternType.MATCH))
        assert error is NoError
        assert [(a.principal, a.operation, a.resource_pattern.resource_name) for a in acls] == [
            ("User:alice", ACLOperation.WRITE, prefix)
        ]
        [(_, deleted, error)] = admin.delete_acls([kp_filter(prefix, ACLResourcePatternType.ANY)])
        assert error is NoError
        assert [a.resource_pattern.resource_name for a in deleted] == [prefix]
        acls, _ = admin.describe_acls(kp_filter(prefix, ACLResourcePatternType.ANY))
        assert acls == []
    finally:
        admin.close()


def test_kafka_python_without_a_cluster_grant_is_refused(broker: AclBroker) -> None:
    alice = broker.kafka_python("alice")
    try:
        made = alice.create_acls([kp_acl(topic_name("refused"))])
        assert made["failed"] == [ClusterAuthorizationFailedError]  # error classes
        with pytest.raises(ClusterAuthorizationFailedError):
            alice.describe_acls(kp_filter(None, ACLResourcePatternType.ANY))
    finally:
        alice.close()


def test_acls_survive_kill_9_and_a_restart(broker: AclBroker) -> None:
    admin = broker.confluent("admin")
    prefix = topic_name("durable")
    wanted = confluent_bindings(prefix)
    for fut in admin.create_acls(wanted, request_timeout=TIMEOUT_S).values():
        assert fut.result() is None
    broker.process.kill9()
    broker.process.start()
    again = broker.confluent("admin")
    got = again.describe_acls(any_filter(), request_timeout=TIMEOUT_S).result()
    assert {key(b) for b in wanted} <= {key(b) for b in got}
    # and they are in force: alice, still without a cluster grant, is refused
    kp = broker.kafka_python("alice")
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            kp.describe_acls(kp_filter(None, ACLResourcePatternType.ANY))
    finally:
        kp.close()
