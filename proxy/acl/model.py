"""Kafka's ACL vocabulary with its wire codes, and the one question handlers ask.

The codes are those of ``org.apache.kafka.common.resource.ResourceType``/``PatternType`` and
``org.apache.kafka.common.acl.AclOperation``/``AclPermissionType``: CreateAcls, DescribeAcls and
DeleteAcls carry them as int8, so they must not change.

Handlers never see an authorizer directly: they call ``RequestContext.authorized(op, type,
name)``, which answers True when no authorizer is configured (``authorizer.class.name`` unset,
Kafka's default) and otherwise asks ``Broker.authorizer`` for the connection's principal and host.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from proxy.principal import KafkaPrincipal


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only: any pattern type
    MATCH = 2  # filters only: every binding that would match the name
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15  # KIP-939


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name (Kafka's Resource.CLUSTER_NAME)
WILDCARD_RESOURCE = "*"  # a LITERAL binding on "*" matches every name of its type
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"


@dataclass(frozen=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType


@dataclass(frozen=True)
class AccessControlEntry:
    principal: str  # "User:alice" (Kafka's string form), or "User:*"
    host: str  # an IP, or "*"
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


class Authorizer(Protocol):
    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """Whether ``principal`` connecting from ``host`` (an IP, no "/") may do ``operation``
        on the resource ``name`` of ``resource_type``, by Kafka's StandardAuthorizer rules."""
        ...
