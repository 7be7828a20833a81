"""The authorizer's broker configs, with Kafka's names.

``authorizer.class.name``: empty (Kafka's default) for no authorizer, every request allowed
and the ACL APIs answering SECURITY_DISABLED;
``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` for Kafka's ACLs.
Kafka 3.x's ZooKeeper-based ``kafka.security.authorizer.AclAuthorizer`` was removed in Kafka
4.0 (a 4.x broker fails to start, class not found): kafkad refuses it too, saying what to
write instead; any other class is refused as one kafkad does not have.

``super.users`` ("User:a;User:b") and ``allow.everyone.if.no.acl.found`` (Java's
``Boolean.parseBoolean``: "true" in any case, anything else false) are read as
``StandardAuthorizer.configure`` reads them; a super user without a "Type:" is refused at
start-up, as Kafka refuses it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from proxy.acl.authorizer import StandardAuthorizer, parse_super_users

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


def _authorizer_class(value: str) -> str:
    name = value.strip()
    if name in ("", STANDARD_AUTHORIZER):
        return name
    if name == ACL_AUTHORIZER:
        raise ValueError(
            f"Kafka 4.0 removed {ACL_AUTHORIZER} with ZooKeeper (a Kafka 4 broker does not "
            f"start with it); set authorizer.class.name={STANDARD_AUTHORIZER}, which reads the "
            "same ACLs, super.users and allow.everyone.if.no.acl.found"
        )
    raise ValueError(
        f"kafkad has no authorizer class {name}: set {STANDARD_AUTHORIZER} (Kafka's ACLs) or "
        "leave it empty (no authorization)"
    )


def _super_users(value: str) -> str:
    parse_super_users(value)
    return value


# Configs DescribeConfigs shows without a value: Kafka's KafkaConfig does not define these two
# (only the authorizer reads them), so its DescribeConfigs, not knowing their type, treats them
# as sensitive (KafkaConfig.maybeSensitive) and never says who the super users are.
SENSITIVE = frozenset({"super.users", "allow.everyone.if.no.acl.found"})

# name -> (parser, default), merged into proxy/config.py's BROKER_CONFIGS
ACL_CONFIGS: dict[str, tuple[Callable[[str], Any], str]] = {
    "authorizer.class.name": (_authorizer_class, ""),
    "super.users": (_super_users, ""),
    "allow.everyone.if.no.acl.found": (str, "false"),
}


def authorizer_from_values(values: Mapping[str, Any]) -> StandardAuthorizer | None:
    """The broker's authorizer, or None when ``authorizer.class.name`` is empty."""
    if not values.get("authorizer.class.name"):
        return None
    return StandardAuthorizer.from_config(values)
