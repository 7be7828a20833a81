"""DescribeUserScramCredentials / AlterUserScramCredentials (KIP-554) decisions, pure: Kafka's
``ScramImage.describe`` and ``ScramControlManager.alterCredentials`` rules and messages.

Describe: no users (null or empty) = every user with a credential; a user named twice
DUPLICATE_RESOURCE; a user without one RESOURCE_NOT_FOUND. Alter: a user named twice in one
request (deletion or upsertion, whatever the mechanism) DUPLICATE_RESOURCE; an empty name
UNACCEPTABLE_CREDENTIAL; an unknown mechanism UNSUPPORTED_SASL_MECHANISM; iterations outside
[4096, 16384] UNACCEPTABLE_CREDENTIAL; deleting a credential that does not exist
RESOURCE_NOT_FOUND. The client sends the salt and the salted password (never the password);
the stored and server keys are derived from them (RFC 5802). Results: deletions, then
upsertions, then failures, one per user.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from proxy.sasl.mechanisms import MIN_ITERATIONS, ScramCredential, credential

MAX_ITERATIONS = 16384
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # Kafka's ScramMechanism.type()
TYPE_OF = {name: t for t, name in MECHANISM_TYPES.items()}

Users = Mapping[str, Mapping[str, ScramCredential]]


@dataclass(frozen=True)
class Outcome:
    user: str
    code: ErrorCode
    message: str | None = None
    # for a described user: (mechanism type, iterations) per credential
    credentials: tuple[tuple[int, int], ...] = ()


def describe(users: Users, wanted: Sequence[str] | None) -> list[Outcome]:
    names: dict[str, bool] = {}  # name -> named twice
    for name in wanted or sorted(users):
        names[name] = name in names
    out = []
    for name, twice in names.items():
        if twice:
            message = (
                "Cannot describe SCRAM credentials for the same user twice in a single "
                f"request: {name}"
            )
            out.append(Outcome(name, ErrorCode.duplicate_resource, message))
            continue
        creds = users.get(name, {})
        if not creds:
            message = f"Attempt to describe a user credential that does not exist: {name}"
            out.append(Outcome(name, ErrorCode.resource_not_found, message))
            continue
        infos = tuple(
            (TYPE_OF[mech], creds[mech].iterations)
            for mech in MECHANISM_TYPES.values()
            if mech in creds
        )
        out.append(Outcome(name, ErrorCode.none, None, infos))
    return out


@dataclass(frozen=True)
class Upsert:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


def _check(name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in MECHANISM_TYPES:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


def alter(
    users: Users, deletions: Sequence[tuple[str, int]], upserts: Sequence[Upsert]
) -> tuple[list[tuple[str, str, ScramCredential]], list[tuple[str, str]], list[Outcome]]:
    """(credentials to set, credentials to delete, one outcome per user)."""
    twice = "A user credential cannot be altered twice in the same request"
    errors: dict[str, tuple[ErrorCode, str]] = {}
    to_delete: dict[str, tuple[str, int]] = {}
    to_upsert: dict[str, Upsert] = {}
    for name, mechanism in deletions:
        if name in errors:
            continue
        if to_delete.pop(name, None) is not None:
            errors[name] = (ErrorCode.duplicate_resource, twice)
        elif (bad := _check(name, mechanism)) is not None:
            errors[name] = bad
        elif MECHANISM_TYPES[mechanism] not in users.get(name, {}):
            errors[name] = (
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            )
        else:
            to_delete[name] = (name, mechanism)
    for u in upserts:
        if u.name in errors:
            continue
        if to_delete.pop(u.name, None) is not None or to_upsert.pop(u.name, None) is not None:
            errors[u.name] = (ErrorCode.duplicate_resource, twice)
        elif (bad := _check(u.name, u.mechanism)) is not None:
            errors[u.name] = bad
        elif u.iterations < MIN_ITERATIONS:
            errors[u.name] = (ErrorCode.unacceptable_credential, "Too few iterations")
        elif u.iterations > MAX_ITERATIONS:
            errors[u.name] = (ErrorCode.unacceptable_credential, "Too many iterations")
        else:
            to_upsert[u.name] = u
    outcomes = [Outcome(name, ErrorCode.none) for name in to_delete]
    outcomes += [Outcome(name, ErrorCode.none) for name in to_upsert]
    outcomes += [Outcome(name, code, message) for name, (code, message) in errors.items()]
    sets = [
        (
            u.name,
            MECHANISM_TYPES[u.mechanism],
            credential(MECHANISM_TYPES[u.mechanism], u.salt, u.salted_password, u.iterations),
        )
        for u in to_upsert.values()
    ]
    deletes = [(name, MECHANISM_TYPES[mech]) for name, mech in to_delete.values()]
    return sets, deletes, outcomes
