"""Kafka's StandardAuthorizer: the decision whether a principal may do an operation on a resource.

Theory of operation
-------------------
What it owns: the configuration (``super.users``, ``allow.everyone.if.no.acl.found``) and an
index of the current ACL bindings. It decides only; the bindings are stored durably by
``proxy/acl/store.py``, which hands every new set to ``set_acls`` after writing it (Kafka's
``loadSnapshot``), and CreateAcls/DeleteAcls decide changes in ``proxy/acl/admin.py``.

A request to do ``operation`` on resource (type, name) from principal P at host H is decided as
Kafka's ``StandardAuthorizerData.authorize`` decides it:

1. P (as "Type:name") is a super user: ALLOWED, whatever the ACLs say.
2. The bindings that apply to the resource are those of its type that are LITERAL with its
   exact name, LITERAL with the wildcard name ``*``, or PREFIXED with a name the resource's
   name starts with. Of these, a binding *matches* the request when its principal is P or
   ``User:*``, its host is H or ``*``, and its operation is the request's or ``ALL``, or, for an
   ALLOW binding only, one that implies it: READ, WRITE, DELETE and ALTER imply DESCRIBE;
   ALTER_CONFIGS implies DESCRIBE_CONFIGS. A DENY binding implies nothing.
3. Any matching DENY: DENIED (DENY wins). Else any matching ALLOW: ALLOWED.
4. Else, if some binding applies to the resource (for anyone, any host, any operation): DENIED.
   Only a resource with no binding at all gets the default, ``allow.everyone.if.no.acl.found``
   (default false: DENIED).

Hosts are compared as strings with Java's ``InetAddress.getHostAddress()`` form of the client's
address, so an IPv6 client is "0:0:0:0:0:0:0:1", not "::1" (``java_host_address``).

``authorize_by_resource_type`` is Kafka's ``Authorizer.authorizeByResourceType`` default: may P
do ``operation`` on *some* resource of a type (an idempotent producer's "WRITE on any topic").

Deviations: Kafka finds the bindings by scanning a set sorted by reversed name
(``StandardAuthorizerData.checkSection``), and the scan has quirks kafkad does not copy, since
they are accidents of it, not rules: a LITERAL ``*`` binding is skipped for a name that starts
with "*" (a group "*x" escapes a wildcard ALLOW and a wildcard DENY alike), and a name with a
character below "*" (space, "!", "#", ...) that begins as such a binding's name does can
make the scan throw or loop. Topic names (``[a-zA-Z0-9._-]``) meet neither; group and
transactional ids can. Outside them the decisions are Kafka's (checked against a simulation of
the scan). Kafka's ``AuthorizerNotReadyException`` (ACLs not loaded yet) has no counterpart:
the broker loads the ACLs before it listens. There is no audit log.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any

from proxy.acl.filters import AclBindingFilter
from proxy.acl.model import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from proxy.principal import USER_TYPE, KafkaPrincipal

Op = AclOperation
# Operations an ALLOW binding for them also grants DESCRIBE / DESCRIBE_CONFIGS for.
IMPLIES_DESCRIBE = frozenset({Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS})
IMPLIED_BY: Mapping[AclOperation, frozenset[AclOperation]] = {
    Op.DESCRIBE: IMPLIES_DESCRIBE,
    Op.DESCRIBE_CONFIGS: IMPLIES_DESCRIBE_CONFIGS,
}
WILDCARD_USER = KafkaPrincipal(USER_TYPE, "*")
_Key = tuple[ResourceType, PatternType, str]  # a binding's pattern, as the index keys it


@functools.lru_cache(maxsize=4096)
def parse_principal(text: str) -> KafkaPrincipal:
    """An ACL's principal string, split at its first colon (Kafka's ``StandardAcl``)."""
    kind, colon, name = text.partition(":")
    if not colon:
        raise ValueError(
            f"Could not parse principal from `{text}` (no colon is present separating the "
            "principal type from the principal name)"
        )
    return KafkaPrincipal(kind, name)


def parse_super_users(value: str) -> frozenset[str]:
    """``super.users``: principals separated by ";", blanks dropped (Kafka's
    ``StandardAuthorizer.getConfiguredSuperUsers``); each must be "Type:name"."""
    users = set()
    for part in value.split(";"):
        user = part.strip()
        if user:
            if ":" not in user:
                raise ValueError(
                    f"expected a string in format principalType:principalName but got {user}"
                )
            users.add(user)
    return frozenset(users)


def java_bool(value: str) -> bool:
    """Java's ``Boolean.parseBoolean``: "true" in any case is true, anything else false."""
    return value.strip().lower() == "true"


@functools.lru_cache(maxsize=4096)
def java_host_address(host: str) -> str:
    """``host`` as Java's ``InetAddress.getHostAddress()`` writes it (IPv6 uncompressed, an
    IPv4-mapped IPv6 address as IPv4); anything that is not an IP is returned as is."""
    addr, pct, scope = host.partition("%")
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv4Address):
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    groups = ":".join(f"{int(g, 16):x}" for g in ip.exploded.split(":"))
    return groups + pct + scope


def entry_result(
    operation: AclOperation, principal: KafkaPrincipal, host: str, entry: AccessControlEntry
) -> bool | None:
    """What one binding that applies to the resource says about the request: True (ALLOW),
    False (DENY), or None when it does not match it (Kafka's ``findResult``)."""
    if parse_principal(entry.principal) not in (principal, WILDCARD_USER):
        return None
    if entry.host != WILDCARD_HOST and entry.host != host:
        return None
    allow = entry.permission is AclPermissionType.ALLOW
    if entry.operation is not Op.ALL:
        if allow and operation in IMPLIED_BY:
            if entry.operation not in IMPLIED_BY[operation]:
                return None
        elif entry.operation is not operation:
            return None
    return allow


class StandardAuthorizer:
    """``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer``."""

    def __init__(
        self,
        super_users: Iterable[str] = (),
        allow_if_no_acl: bool = False,
        acls: Iterable[AclBinding] = (),
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._bindings: tuple[AclBinding, ...] = ()
        self._index: dict[_Key, list[AccessControlEntry]] = {}
        self._prefix_lengths: dict[ResourceType, tuple[int, ...]] = {}
        self.set_acls(acls)

    @classmethod
    def from_config(cls, values: Mapping[str, Any]) -> StandardAuthorizer:
        return cls(
            parse_super_users(values.get("super.users", "")),
            java_bool(values.get("allow.everyone.if.no.acl.found", "false")),
        )

    def set_acls(self, acls: Iterable[AclBinding]) -> None:
        """Replace every binding (the store calls this after each durable change)."""
        bindings = tuple(dict.fromkeys(acls))
        index: dict[_Key, list[AccessControlEntry]] = {}
        lengths: dict[ResourceType, set[int]] = {}
        for b in bindings:
            p = b.pattern
            index.setdefault((p.resource_type, p.pattern_type, p.name), []).append(b.entry)
            if p.pattern_type is PatternType.PREFIXED:
                lengths.setdefault(p.resource_type, set()).add(len(p.name))
        prefix_lengths = {t: tuple(sorted(n)) for t, n in lengths.items()}
        self._bindings, self._index, self._prefix_lengths = bindings, index, prefix_lengths

    def acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self._bindings if flt.matches(b)]

    def _applying(self, resource_type: ResourceType, name: str) -> Iterable[_Key]:
        """The patterns that could apply to resource ``name``: its literal name, its prefixes
        (PREFIXED; only those as long as some PREFIXED binding's name, so a decision costs
        the same for any name length) and the literal wildcard."""
        yield (resource_type, PatternType.LITERAL, name)
        for end in self._prefix_lengths.get(resource_type, ()):
            if end > len(name):
                break
            yield (resource_type, PatternType.PREFIXED, name[:end])
        if name != WILDCARD_RESOURCE:
            yield (resource_type, PatternType.LITERAL, WILDCARD_RESOURCE)

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if str(principal) in self.super_users:
            return True
        host = java_host_address(host)
        principal = KafkaPrincipal(principal.principal_type, principal.name)
        has_resource_acls = allowed = False
        for pattern in self._applying(resource_type, name):
            entries = self._index.get(pattern)
            if not entries:
                continue
            has_resource_acls = True
            for entry in entries:
                result = entry_result(operation, principal, host, entry)
                if result is False:
                    return False  # DENY wins
                allowed = allowed or result is True
        if allowed:
            return True
        return False if has_resource_acls else self.allow_if_no_acl

    def authorize_by_resource_type(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        return authorize_by_resource_type(
            self, self._bindings, principal, host, operation, resource_type
        )


def authorize_by_resource_type(
    authorizer: Any,
    bindings: Iterable[AclBinding],
    principal: KafkaPrincipal,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
) -> bool:
    """Whether ``principal`` may do ``operation`` on at least one resource of ``resource_type``:
    Kafka's ``Authorizer.authorizeByResourceType`` default, for any authorizer with Kafka's
    ``authorize`` and the current ``bindings``. Super users (and the no-ACL default) are
    granted through a check on a made-up name, "hardcode"; then ALLOW bindings for exactly
    ``operation`` or ALL (no implied operations here) count unless a DENY covers them: a
    literal DENY on the same name, a PREFIXED DENY on a prefix of the name, or a wildcard
    DENY, which denies outright."""
    if operation in (Op.ANY, Op.UNKNOWN):
        raise ValueError(f"Must specify a non-filter operation type: {operation.name}")
    if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise ValueError(f"Must specify a non-filter resource type: {resource_type.name}")
    if authorizer.authorize(principal, host, operation, resource_type, "hardcode"):
        return True
    host = java_host_address(host)
    me = KafkaPrincipal(principal.principal_type, principal.name)
    deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
    allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
    wildcard_allow = False
    for b in bindings:
        pattern, entry = b.pattern, b.entry
        if pattern.resource_type is not resource_type:
            continue
        if entry.host != host and entry.host != WILDCARD_HOST:
            continue
        if entry.principal != WILDCARD_PRINCIPAL and parse_principal(entry.principal) != me:
            continue
        if entry.operation is not operation and entry.operation is not Op.ALL:
            continue
        if pattern.pattern_type not in deny:
            continue
        if entry.permission is AclPermissionType.DENY:
            if pattern.pattern_type is PatternType.LITERAL and pattern.name == WILDCARD_RESOURCE:
                return False
            deny[pattern.pattern_type].add(pattern.name)
        elif entry.permission is AclPermissionType.ALLOW:
            if pattern.pattern_type is PatternType.LITERAL and pattern.name == WILDCARD_RESOURCE:
                wildcard_allow = True
            else:
                allow[pattern.pattern_type].add(pattern.name)
    if wildcard_allow:
        return True
    for kind, names in allow.items():
        for name in names:
            if kind is PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                continue
            prefixes = (name[:end] for end in range(1, len(name) + 1))
            if not any(p in deny[PatternType.PREFIXED] for p in prefixes):
                return True
    return False
