"""The authorization questions handlers share, as Kafka's ``AuthHelper`` asks them.

Every helper answers through ``RequestContext.authorized`` (LITERAL resource, the
connection's principal and client IP), so with no authorizer configured everything is allowed
and the name-filtering helpers return their input without asking anything:

- ``allowed_names`` is ``filterByAuthorized``: the names of ``names`` the principal may do
  ``operation`` on, each distinct name asked once;
- ``require_cluster`` is ``authorizeClusterOperation``: a handler refused as a whole raises
  ``ErrorReply(CLUSTER_AUTHORIZATION_FAILED)``, answered with its API's error reply;
- ``authorized_operations`` is ``authorizedOperations``: the bitfield of the operations
  ``AclEntry.supportedOperations`` lists for the resource type that the principal may do
  (every one of them without an authorizer), for Metadata, DescribeCluster, DescribeGroups
  and DescribeTopicPartitions;
- ``allowed_on_any`` is ``authorizeByResourceType`` (KIP-679: an idempotent producer needs
  IDEMPOTENT_WRITE on the cluster or WRITE on some topic), answered by
  ``RequestContext.authorized_by_resource_type`` over the stored bindings.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from proxy.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.outcomes import ErrorReply

Op, Type = AclOperation, ResourceType

# Kafka's AclEntry.supportedOperations: what an authorized-operations bitfield may hold.
SUPPORTED_OPERATIONS: Final[dict[ResourceType, tuple[AclOperation, ...]]] = {
    Type.TOPIC: (
        Op.READ,
        Op.WRITE,
        Op.CREATE,
        Op.DESCRIBE,
        Op.DELETE,
        Op.ALTER,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
    ),
    Type.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    Type.CLUSTER: (
        Op.CREATE,
        Op.CLUSTER_ACTION,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
        Op.IDEMPOTENT_WRITE,
        Op.ALTER,
        Op.DESCRIBE,
    ),
    Type.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
    Type.DELEGATION_TOKEN: (Op.DESCRIBE,),
    Type.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}


def _bits(ops: Iterable[AclOperation]) -> int:
    return sum(1 << op for op in set(ops))


# Every supported operation: the bitfields answered when no authorizer is configured.
TOPIC_OPERATIONS: Final = _bits(SUPPORTED_OPERATIONS[Type.TOPIC])
GROUP_OPERATIONS: Final = _bits(SUPPORTED_OPERATIONS[Type.GROUP])
CLUSTER_OPERATIONS: Final = _bits(SUPPORTED_OPERATIONS[Type.CLUSTER])

# Kafka's Errors messages for the authorization codes (where a response carries one).
MESSAGES: Final[dict[ErrorCode, str]] = {
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.transactional_id_authorization_failed: "Transactional Id authorization failed.",
}


def enforced(ctx: RequestContext) -> bool:
    """Whether an authorizer is configured (without one every check passes)."""
    return ctx.broker.authorizer is not None


def cluster_allows(ctx: RequestContext, operation: AclOperation) -> bool:
    return ctx.authorized(operation, Type.CLUSTER, CLUSTER_NAME)


def require_cluster(ctx: RequestContext, operation: AclOperation) -> None:
    """Kafka's ``authorizeClusterOperation``: the whole request refused with
    CLUSTER_AUTHORIZATION_FAILED (its error reply) unless ``operation`` is allowed."""
    if not cluster_allows(ctx, operation):
        raise ErrorReply(ErrorCode.cluster_authorization_failed)


def allowed_names(
    ctx: RequestContext, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]
) -> set[str]:
    """Kafka's ``filterByAuthorized``: the distinct names of ``names`` allowed ``operation``."""
    distinct = set(names)
    if not enforced(ctx):
        return distinct
    return {n for n in distinct if ctx.authorized(operation, resource_type, n)}


def authorized_operations(ctx: RequestContext, resource_type: ResourceType, name: str) -> i32:
    """Kafka's ``authorizedOperations``: the bitfield of the type's supported operations the
    principal may do on the resource (all of them without an authorizer)."""
    supported = SUPPORTED_OPERATIONS[resource_type]
    if not enforced(ctx):
        return i32(_bits(supported))
    return i32(_bits(op for op in supported if ctx.authorized(op, resource_type, name)))


def allowed_on_any(
    ctx: RequestContext, operation: AclOperation, resource_type: ResourceType
) -> bool:
    """Kafka's ``authorizeByResourceType``: whether ``operation`` is allowed on at least one
    resource of ``resource_type``."""
    return ctx.authorized_by_resource_type(operation, resource_type)


# ConfigResource.Type code -> the ACL resource its configs are authorized on (None: the
# config resource's own name) and the error a refusal carries (Kafka's ConfigHelper and
# ControllerApis.authorizeAlterResource).
CONFIG_RESOURCE_ACL: Final[dict[int, tuple[ResourceType, str | None, ErrorCode]]] = {
    2: (Type.TOPIC, None, ErrorCode.topic_authorization_failed),
    4: (Type.CLUSTER, CLUSTER_NAME, ErrorCode.cluster_authorization_failed),  # BROKER
    8: (Type.CLUSTER, CLUSTER_NAME, ErrorCode.cluster_authorization_failed),  # BROKER_LOGGER
    16: (Type.CLUSTER, CLUSTER_NAME, ErrorCode.cluster_authorization_failed),  # CLIENT_METRICS
    32: (Type.GROUP, None, ErrorCode.group_authorization_failed),
}


def config_refusal(
    ctx: RequestContext, operation: AclOperation, config_type: int, name: str
) -> ErrorCode | None:
    """The authorization error for DESCRIBE_CONFIGS / ALTER_CONFIGS on a config resource, or
    None when allowed (or of a type Kafka refuses otherwise)."""
    found = CONFIG_RESOURCE_ACL.get(config_type)
    if found is None:
        return None
    resource_type, fixed_name, code = found
    allowed = ctx.authorized(operation, resource_type, fixed_name if fixed_name else name)
    return None if allowed else code
