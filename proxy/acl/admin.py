"""CreateAcls, DeleteAcls and DescribeAcls decisions: pure functions from the current bindings
and a request's items to the new bindings and each item's outcome. The handlers
(``proxy/handlers/create_acls.py`` ...) convert the wire types, check CLUSTER ALTER/DESCRIBE
and write the result through ``proxy/acl/store.py``.

Kafka's order of checks, which decides the error each bad item gets:

- a request with an UNKNOWN (code 0) type, pattern type, operation or permission fails to parse
  in Kafka (``CreateAclsRequest.validate``, ``DeleteAclsRequest``/``DescribeAclsRequest``
  ``normalizeAndValidate``), which closes the connection: ``unparseable`` says so;
- a creation naming ANY (resource type, pattern type, operation or permission) or MATCH cannot
  become Kafka's ``AclBinding`` (its constructors throw IllegalArgumentException in
  ``AclApis.handleCreateAcls``), which fails the whole request: every creation gets
  UNKNOWN_SERVER_ERROR and nothing is created;
- each remaining creation is checked as ``AclApis`` then ``AclControlManager.validateNewAcl``
  check it (``validate_new``): INVALID_REQUEST with Kafka's message, others are created;
  an existing binding is created again without error (and without a duplicate);
- a delete filter with an unrecognised code (one Kafka reads as UNKNOWN) gets INVALID_REQUEST
  (``AclControlManager.validateFilter``); the others remove every binding they match, all
  filters judged against the bindings before the request (one binding may be reported by two
  filters), and the bindings are returned with each filter's result.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kio.schema.errors import ErrorCode

from proxy.acl.filters import AclBindingFilter
from proxy.acl.model import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

E = TypeVar("E", bound=enum.IntEnum)


def from_code(cls: type[E], code: int) -> E:
    """Kafka's ``fromCode``: a code this broker does not know reads as UNKNOWN (code 0)."""
    try:
        return cls(code)
    except ValueError:
        return cls(0)


def from_codes(
    resource_type: int, pattern_type: int, operation: int, permission: int
) -> tuple[ResourceType, PatternType, AclOperation, AclPermissionType]:
    """The four codes a binding or a binding filter carries, each as ``from_code`` reads it."""
    return (
        from_code(ResourceType, resource_type),
        from_code(PatternType, pattern_type),
        from_code(AclOperation, operation),
        from_code(AclPermissionType, permission),
    )


def unparseable(*codes: int) -> bool:
    """Whether Kafka would fail to parse a request carrying these codes (one is UNKNOWN)."""
    return any(int(c) == 0 for c in codes)


@dataclass(frozen=True)
class Outcome:
    code: ErrorCode = ErrorCode.none
    message: str | None = None


@dataclass(frozen=True)
class DeleteOutcome:
    code: ErrorCode = ErrorCode.none
    message: str | None = None
    matched: tuple[AclBinding, ...] = ()


def _not_a_binding(b: AclBinding) -> bool:
    """ANY or MATCH where a binding needs a concrete value (Kafka's constructors throw)."""
    return (
        b.pattern.resource_type is ResourceType.ANY
        or b.pattern.pattern_type in (PatternType.ANY, PatternType.MATCH)
        or b.entry.operation is AclOperation.ANY
        or b.entry.permission is AclPermissionType.ANY
    )


def validate_new(b: AclBinding) -> str | None:
    """Why ``b`` may not be created (INVALID_REQUEST's message), or None."""
    p, e = b.pattern, b.entry
    if p.resource_type is ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not p.name:
        return "Invalid empty resource name"
    if p.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {p.resource_type.name}"
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {p.pattern_type.name}"
    if e.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {e.operation.name}"
    if e.permission not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return f"Invalid permissionType {e.permission.name}"
    if ":" not in e.principal:
        return (
            f"Could not parse principal from `{e.principal}` (no colon is present separating "
            "the principal type from the principal name)"
        )
    return None


def create(
    existing: Sequence[AclBinding], creations: Sequence[AclBinding]
) -> tuple[tuple[AclBinding, ...], list[Outcome]]:
    if any(_not_a_binding(b) for b in creations):
        return tuple(existing), [Outcome(ErrorCode.unknown_server_error)] * len(creations)
    new = dict.fromkeys(existing)
    outcomes = []
    for b in creations:
        problem = validate_new(b)
        if problem is None:
            new[b] = None
            outcomes.append(Outcome())
        else:
            outcomes.append(Outcome(ErrorCode.invalid_request, problem))
    return tuple(new), outcomes


def delete(
    existing: Sequence[AclBinding], filters: Sequence[AclBindingFilter]
) -> tuple[tuple[AclBinding, ...], list[DeleteOutcome]]:
    removed: set[AclBinding] = set()
    outcomes = []
    for f in filters:
        if f.pattern.is_unknown():
            outcomes.append(DeleteOutcome(ErrorCode.invalid_request, "Unknown patternFilter."))
        elif f.entry.is_unknown():
            outcomes.append(DeleteOutcome(ErrorCode.invalid_request, "Unknown entryFilter."))
        else:
            matched = tuple(b for b in existing if f.matches(b))
            removed.update(matched)
            outcomes.append(DeleteOutcome(matched=matched))
    return tuple(b for b in existing if b not in removed), outcomes


def describe(
    bindings: Iterable[AclBinding], flt: AclBindingFilter
) -> list[tuple[ResourcePattern, list[AccessControlEntry]]]:
    """The bindings ``flt`` matches, grouped by resource pattern (DescribeAcls' shape)."""
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in bindings:
        if flt.matches(b):
            grouped.setdefault(b.pattern, []).append(b.entry)
    return list(grouped.items())
