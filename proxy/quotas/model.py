"""Client quota entities and values: AlterClientQuotas' and DescribeClientQuotas' decisions
as Kafka 4's controller (``ClientQuotaControlManager``) and metadata image
(``ClientQuotasImage.describe``) take them. Pure: no I/O, no trio.

An entity maps entity types (``user``, ``client-id``, ``ip``) to names, ``None`` being the
default entity; kafkad keys it by its sorted (type, name) pairs. Valid combinations and keys
(``QuotaConfig``): any non-empty mix of user and client-id takes ``producer_byte_rate`` and
``consumer_byte_rate`` (LONG), ``request_percentage`` and ``controller_mutation_rate``
(DOUBLE); ``ip`` alone takes ``connection_creation_rate`` (INT).

Kafka's quirks kept on purpose:
- a request entity naming a type twice is a Java map: the last name wins (so Kafka's
  "duplicate entity entry" error cannot be reached from the wire);
- a duplicate quota key in one entry answers "Ignoring duplicate entity ..." (the
  "Duplicate quota key" error is overwritten before it is sent);
- an entity given twice in one request: the first entry's changes are applied, and its one
  result is the second's "Ignoring duplicate entity" error;
- removing a key is never validated (an unknown key, or one not set, is a no-op);
- values are checked in the order Kafka's HashMap iterates them (``javamap``), so a request
  with two bad keys reports the one Kafka reports.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kio.schema.errors import ErrorCode

from proxy.quotas import javamap

USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"
ENTITY_TYPES: Final = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE: Final = "producer_byte_rate"
CONSUMER_BYTE_RATE: Final = "consumer_byte_rate"
REQUEST_PERCENTAGE: Final = "request_percentage"
CONTROLLER_MUTATION_RATE: Final = "controller_mutation_rate"
CONNECTION_CREATION_RATE: Final = "connection_creation_rate"

# QuotaConfig.userAndClientQuotaConfigs() / ipConfigs(): key -> ConfigDef type
USER_CLIENT_KEYS: Final[dict[str, str]] = {
    PRODUCER_BYTE_RATE: "LONG",
    CONSUMER_BYTE_RATE: "LONG",
    REQUEST_PERCENTAGE: "DOUBLE",
    CONTROLLER_MUTATION_RATE: "DOUBLE",
}
IP_KEYS: Final[dict[str, str]] = {CONNECTION_CREATION_RATE: "INT"}

_TOO_LARGE: Final = {
    "SHORT": (32767.0, "a SHORT"),
    "INT": (2147483647.0, "an INT"),
    "LONG": (float(2**63), "a LONG"),
}

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

Entity = tuple[tuple[str, str | None], ...]  # sorted (type, name) pairs
Quotas = dict[Entity, dict[str, float]]


def entity_key(entries: Mapping[str, str | None]) -> Entity:
    return tuple(sorted(entries.items()))


def java_entries(entries: Mapping[str, str | None], initial: int | None) -> Entity:
    """An entity's pairs in the order of a ``new HashMap<>(initial)`` filled from ``entries``."""
    return tuple((k, entries[k]) for k in javamap.string_map_order(list(entries), initial))


def entity_string(entries: Entity) -> str:
    """``ClientQuotaEntity.toString`` (entries in their Java map order)."""
    return f"ClientQuotaEntity(entries={javamap.to_string(entries)})"


class QuotaError(Exception):
    """A request refused as a whole (Kafka throws: ``getErrorResponse`` answers it)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# ---------------------------------------------------------------------------------- alter


@dataclass(frozen=True, slots=True)
class Op:
    key: str
    value: float | None  # None: remove


@dataclass(frozen=True, slots=True)
class Alteration:
    entity: Sequence[tuple[str, str | None]]  # as the request lists it
    ops: Sequence[Op]


@dataclass(frozen=True, slots=True)
class AlterResult:
    entity: Entity  # in Kafka's map order, as the response lists it
    code: ErrorCode
    message: str | None


def _invalid(message: str) -> tuple[ErrorCode, str]:
    return ErrorCode.invalid_request, message


def validate_value(keys: Mapping[str, str], key: str, value: float) -> tuple[ErrorCode, str] | None:
    """``ClientQuotaControlManager.validateQuotaKeyValue``."""
    kind = keys.get(key)
    if kind is None:
        return _invalid(f"Invalid configuration key {key}")
    if value <= 0.0:
        return _invalid(f"Quota {key} must be greater than 0")
    if kind == "DOUBLE":
        return None
    limit, name = _TOO_LARGE[kind]
    if value > limit:
        return _invalid(f"Proposed value for {key} is too large for {name}.")
    if math.isfinite(value) and abs(math.fmod(value, 1.0)) > 1e-6:
        return _invalid(f"{key} cannot be a fractional value.")
    return None


def _entity_error(
    entries: Entity, unresolvable: Collection[str]
) -> tuple[ErrorCode, str] | dict[str, str]:
    """``validateEntity`` then ``configKeysForEntityType``: an error, or the valid keys."""
    if not entries:
        return _invalid("Invalid empty client quota entity")
    for entity_type, name in entries:
        if entity_type not in ENTITY_TYPES:
            return _invalid(f"Unhandled client quota entity type: {entity_type}")
        if name == "":
            return _invalid(f"Empty {entity_type} not supported")
    types = dict(entries)
    if IP in types:
        if USER in types or CLIENT_ID in types:
            return _invalid(
                "Invalid quota entity combination, IP entity should"
                "not be combined with User or ClientId"
            )
        ip = types[IP]
        if ip is not None and ip in unresolvable:
            return _invalid(f"{ip} is not a valid IP or resolvable host.")
        return IP_KEYS
    return USER_CLIENT_KEYS


def _alter_entity(
    entries: Entity,
    changes: Mapping[str, float | None],
    current: Quotas,
    unresolvable: Collection[str],
) -> tuple[tuple[ErrorCode, str] | None, list[tuple[str, float | None]]]:
    """``alterClientQuotaEntity``: an error, or the changes to record (None: remove)."""
    keys = _entity_error(entries, unresolvable)
    if isinstance(keys, tuple):
        return keys, []
    now = current.get(entity_key(dict(entries)), {})
    records: list[tuple[str, float | None]] = []
    for key in javamap.string_map_order(list(changes), len(changes)):
        value = changes[key]
        if value is None:
            if key in now:
                records.append((key, None))
            continue
        error = validate_value(keys, key, value)
        if error is not None:
            return error, []
        if now.get(key) != value:
            records.append((key, value))
    return None, records


def alter(
    current: Quotas, alterations: Sequence[Alteration], unresolvable: Collection[str] = ()
) -> tuple[Quotas, list[AlterResult]]:
    """``ClientQuotaControlManager.alterClientQuotas``: the quotas after the request and one
    result per distinct entity, in Kafka's order. ``unresolvable``: the ip names that are
    neither an IP address nor a resolvable host (the caller resolves them)."""
    results: dict[Entity, tuple[Entity, tuple[ErrorCode, str] | None]] = {}
    records: list[tuple[Entity, str, float | None]] = []
    for alt in alterations:
        as_map: dict[str, str | None] = {}
        for entity_type, name in alt.entity:
            as_map[entity_type] = name
        entries = java_entries(as_map, len(alt.entity))
        key = entity_key(as_map)
        changes: dict[str, float | None] = {}
        duplicate_key = False
        for op in alt.ops:
            if op.key in changes:
                duplicate_key = True
            else:
                changes[op.key] = op.value
        if duplicate_key or key in results:
            first = results[key][0] if key in results else entries
            results[key] = (first, _invalid(f"Ignoring duplicate entity {entity_string(entries)}"))
            continue
        error, changed = _alter_entity(entries, changes, current, unresolvable)
        results[key] = (entries, error)
        records.extend((key, k, v) for k, v in changed)
    after = {e: dict(q) for e, q in current.items()}
    for key, k, v in records:
        quotas = after.setdefault(key, {})
        if v is None:
            quotas.pop(k, None)
            if not quotas:
                del after[key]
        else:
            quotas[k] = v
    keys = list(results)
    cap = javamap.final_capacity(None, len(keys))
    ordered = javamap.order(keys, (javamap.entity_hash(dict(k)) for k in keys), cap)
    out = []
    for key in ordered:
        entries, error = results[key]
        code, message = error if error is not None else (ErrorCode.none, None)
        out.append(AlterResult(entries, code, message))
    return after, out


# ------------------------------------------------------------------------------- describe


@dataclass(frozen=True, slots=True)
class Component:
    entity_type: str
    match_type: int
    match: str | None


def _filter(components: Sequence[Component]) -> tuple[dict[str, str | None], set[str]]:
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for c in components:
        if c.entity_type == "":
            raise QuotaError(*_invalid("Invalid empty entity type."))
        if c.entity_type in exact or c.entity_type in specified:
            raise QuotaError(
                *_invalid(
                    f"Entity type {c.entity_type} cannot appear more than once in the filter."
                )
            )
        if c.entity_type not in ENTITY_TYPES:
            raise QuotaError(
                ErrorCode.unsupported_version, f"Unsupported entity type {c.entity_type}"
            )
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise QuotaError(
                    *_invalid("Request specified MATCH_TYPE_EXACT, but set match string to null.")
                )
            exact[c.entity_type] = c.match
        elif c.match_type == MATCH_DEFAULT:
            if c.match is not None:
                raise QuotaError(
                    *_invalid(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                    )
                )
            exact[c.entity_type] = None
        elif c.match_type == MATCH_SPECIFIED:
            if c.match is not None:
                raise QuotaError(
                    *_invalid(
                        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                    )
                )
            specified.add(c.entity_type)
        else:
            raise QuotaError(*_invalid(f"Unknown match type {c.match_type}"))
    named = exact.keys() | specified
    if IP in named and (USER in named or CLIENT_ID in named):
        raise QuotaError(
            *_invalid(
                "Invalid entity filter component combination. IP filter component should not "
                "be used with user or clientId filter component."
            )
        )
    return exact, specified


def matches(
    entity: Mapping[str, str | None],
    exact: Mapping[str, str | None],
    specified: Collection[str],
    strict: bool,
) -> bool:
    if strict and len(entity) != len(exact) + len(specified):
        return False
    for entity_type, name in exact.items():
        if entity_type not in entity or entity[entity_type] != name:
            return False
    return all(t in entity for t in specified)


def describe(
    quotas: Quotas, components: Sequence[Component], strict: bool
) -> list[tuple[Entity, list[tuple[str, float]]]]:
    """``ClientQuotasImage.describe``: the matching entities and their values, or QuotaError.

    Order: Kafka's image is a HashMap rebuilt on every change; kafkad iterates its entities
    (and each one's values) as a HashMap copied from one of their size would, ties in creation
    order: the order a freshly loaded broker gives.
    """
    exact, specified = _filter(components)
    keys = [k for k in quotas if matches(dict(k), exact, specified, strict)]
    cap = javamap.copy_capacity(len(quotas))
    ordered = javamap.order(keys, (javamap.entity_hash(dict(k)) for k in keys), cap)
    out = []
    for key in ordered:
        values = quotas[key]
        names = javamap.order(
            list(values),
            (javamap.string_hash(n) for n in values),
            javamap.copy_capacity(len(values)),
        )
        out.append((java_entries(dict(key), 2), [(n, values[n]) for n in names]))
    return out
