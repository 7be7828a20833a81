"""ACL filters, as DescribeAcls and DeleteAcls carry them: Kafka's ``ResourcePatternFilter``,
``AccessControlEntryFilter`` and ``AclBindingFilter`` with their ``matches`` rules.

A filter field that is None (a null string on the wire) matches anything; ``ANY`` matches any
type, operation or permission. A pattern filter's ``MATCH`` matches every binding that would
apply to the filter's name: the LITERAL binding of that name, the LITERAL wildcard ``*`` and
every PREFIXED binding whose name starts the filter's name. A filter naming a pattern type
(LITERAL, PREFIXED) or ``ANY`` with a name matches names exactly. Principals and hosts are
compared as strings, as Kafka does.
"""

from __future__ import annotations

from dataclasses import dataclass

from proxy.acl.model import (
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)


@dataclass(frozen=True)
class ResourcePatternFilter:
    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def is_unknown(self) -> bool:
        unknown = self.resource_type is ResourceType.UNKNOWN
        return unknown or self.pattern_type is PatternType.UNKNOWN

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type is PatternType.LITERAL:  # MATCH from here on
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        return self.name.startswith(pattern.name)  # PREFIXED


@dataclass(frozen=True)
class AccessControlEntryFilter:
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    def is_unknown(self) -> bool:
        return (
            self.operation is AclOperation.UNKNOWN or self.permission is AclPermissionType.UNKNOWN
        )

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation is not AclOperation.ANY and self.operation is not entry.operation:
            return False
        return self.permission in (AclPermissionType.ANY, entry.permission)


@dataclass(frozen=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter
    entry: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)


ANY_BINDING = AclBindingFilter(
    ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
    AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY),
)
