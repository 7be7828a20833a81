"""``kafkad add-scram --data-dir DIR 'SCRAM-SHA-512=[name=alice,password=alice-secret]' ...``:
SCRAM users for a broker's first start, as Kafka's ``kafka-storage format --add-scram`` writes
them, parsed as Kafka's ScramParser parses them: ``MECHANISM=[key=value,...]`` with ``name``,
``password`` (or ``saltedpassword`` with ``salt``, both base64), optional ``salt`` and
``iterations`` (4096..16384, default 4096); a value may be in double quotes; an unknown key
or a part without ``=`` is an error. Run it while the broker is stopped: a running broker
reads the credentials at start-up.

Deviation: an empty ``name=`` is refused (Kafka's tool writes it; no client can log in as it).
"""

from __future__ import annotations

import base64
import binascii
import sys

import trio

from proxy.sasl.mechanisms import (
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramCredential,
    credential,
    new_credential,
)
from proxy.sasl.scram_admin import MAX_ITERATIONS
from proxy.sasl.scram_store import ScramStore


def _component(part: str) -> tuple[str, str]:
    """Kafka's splitTrimmedConfigStringComponent: KEY=VALUE, VALUE maybe in double quotes."""
    key, sep, value = part.partition("=")
    if not sep:
        raise ValueError(f"No equals sign found in SCRAM component: {part}")
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        value = value[1:-1]
    return key, value


def _b64(what: str, value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"Failed to decode given {what}") from None


def parse_add_scram(text: str) -> tuple[str, str, ScramCredential]:
    """(user, mechanism, credential) from ``MECH=[name=N,password=P(,iterations=I)]``."""
    text = text.strip()
    mechanism, sep, config = text.partition("=")
    if not sep:
        raise ValueError(f"Failed to find equals sign in SCRAM argument '{text}'")
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(
            f"The add-scram mechanism {mechanism} is not supported (give "
            f"{' or '.join(SCRAM_MECHANISMS)})"
        )
    if not config.startswith("["):
        raise ValueError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise ValueError("Expected configuration string to end with ]")
    fields = dict(_component(part) for part in config[1:-1].split(","))
    name = fields.pop("name", None)
    if not name:
        raise ValueError("You must supply 'name' to add-scram")
    salt = _b64("salt", fields.pop("salt")) if "salt" in fields else None
    iterations_text = fields.pop("iterations", str(MIN_ITERATIONS))
    try:
        iterations = int(iterations_text)
    except ValueError:
        raise ValueError(f"Failed to parse iterations count: {iterations_text}") from None
    password = fields.pop("password", None)
    salted = fields.pop("saltedpassword", None)
    if password is None and salted is None:
        raise ValueError("You must supply one of 'password' or 'saltedpassword' to add-scram")
    if password is None and salt is None:
        raise ValueError("You must supply 'salt' with 'saltedpassword' to add-scram")
    if fields:
        raise ValueError(f"Unknown SCRAM configurations: {', '.join(sorted(fields))}")
    if iterations < MIN_ITERATIONS:
        raise ValueError(
            f"The 'iterations' value must be >= {MIN_ITERATIONS} for add-scram using {mechanism}"
        )
    if iterations > MAX_ITERATIONS:
        raise ValueError(
            f"The 'iterations' value must be <= {MAX_ITERATIONS} for add-scram using {mechanism}"
        )
    if password is not None:
        return name, mechanism, new_credential(mechanism, password, iterations, salt)
    assert salted is not None and salt is not None
    return name, mechanism, credential(mechanism, salt, _b64("saltedPassword", salted), iterations)


async def add_scram(data_dir: str, entries: list[str]) -> list[str]:
    from storage.backends import open_store

    parsed = [parse_add_scram(e) for e in entries]
    async with open_store(data_dir) as store:
        scram = ScramStore(store)
        await scram.load()
        await scram.apply([(u, m, c) for u, m, c in parsed], [])
    return [f"{m} credential for user {u}" for u, m, _ in parsed]


def main(data_dir: str, entries: list[str]) -> int:
    try:
        for line in trio.run(add_scram, data_dir, entries):
            print(f"added {line}")
    except (ValueError, OSError) as exc:
        print(f"kafkad: add-scram: {exc}", file=sys.stderr)
        return 1
    return 0
