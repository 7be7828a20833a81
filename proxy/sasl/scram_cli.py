"""``kafkad add-scram --data-dir DIR 'SCRAM-SHA-512=[name=alice,password=alice-secret]' ...``:
SCRAM users for a broker's first start, as Kafka's ``kafka-storage format --add-scram`` writes
them (same argument syntax; optional ``iterations=N``, at least 4096, default 4096). Run it
while the broker is stopped: a running broker reads the credentials at start-up."""

from __future__ import annotations

import re
import sys

import trio

from proxy.sasl.mechanisms import MIN_ITERATIONS, SCRAM_MECHANISMS, ScramCredential, new_credential
from proxy.sasl.scram_store import ScramStore

_ARG = re.compile(r"^(SCRAM-SHA-256|SCRAM-SHA-512)=\[(.*)\]$")


def parse_add_scram(text: str) -> tuple[str, str, ScramCredential]:
    """(user, mechanism, credential) from ``MECH=[name=N,password=P(,iterations=I)]``."""
    m = _ARG.match(text.strip())
    if m is None:
        raise ValueError(
            f"expected MECHANISM=[name=USER,password=SECRET] with MECHANISM one of "
            f"{', '.join(SCRAM_MECHANISMS)}"
        )
    mechanism = m.group(1)
    fields = dict(part.split("=", 1) for part in m.group(2).split(",") if "=" in part)
    name, password = fields.get("name", ""), fields.get("password", "")
    if not name or not password:
        raise ValueError(f"{mechanism}: both name= and password= are needed")
    iterations = int(fields.get("iterations", MIN_ITERATIONS))
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"{mechanism}: iterations must be at least {MIN_ITERATIONS}")
    return name, mechanism, new_credential(mechanism, password, iterations)


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
