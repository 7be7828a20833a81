"""The ACL bindings, kept durably as the SCRAM credentials are (``proxy/sasl/scram_store.py``).

On-disk format: the broker metadata blob ``acls`` (``Store.write_metadata``: replaced
atomically and fsynced, so a ``kill -9`` keeps the last acknowledged change), JSON with Kafka's
names and wire codes' names::

    {"version": 1,
     "acls": [{"resource_type": "TOPIC", "name": "orders", "pattern_type": "PREFIXED",
               "principal": "User:alice", "host": "*", "operation": "READ",
               "permission": "ALLOW"}]}

The bindings live in memory in creation order; ``replace`` writes the whole new set, and only
once it is durable swaps it in and hands it to the listeners (the authorizer's ``set_acls``).
A change is read-decide-write across an ``await``: ``change`` holds ``lock`` around it, so two
concurrent CreateAcls cannot lose one another's bindings.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import trio

from proxy.acl.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

BLOB = "acls"

T = TypeVar("T")


class MetadataStore(Protocol):
    async def read_metadata(self, name: str) -> bytes | None: ...

    async def write_metadata(self, name: str, data: bytes) -> None: ...


def encode(bindings: Sequence[AclBinding]) -> bytes:
    doc: dict[str, Any] = {
        "version": 1,
        "acls": [
            {
                "resource_type": b.pattern.resource_type.name,
                "name": b.pattern.name,
                "pattern_type": b.pattern.pattern_type.name,
                "principal": b.entry.principal,
                "host": b.entry.host,
                "operation": b.entry.operation.name,
                "permission": b.entry.permission.name,
            }
            for b in bindings
        ],
    }
    return json.dumps(doc).encode()


def decode(data: bytes) -> list[AclBinding]:
    doc = json.loads(data)
    if doc.get("version") != 1:
        raise ValueError(f"{BLOB}: unknown version {doc.get('version')!r}")
    return [
        AclBinding(
            ResourcePattern(
                ResourceType[a["resource_type"]], a["name"], PatternType[a["pattern_type"]]
            ),
            AccessControlEntry(
                a["principal"],
                a["host"],
                AclOperation[a["operation"]],
                AclPermissionType[a["permission"]],
            ),
        )
        for a in doc["acls"]
    ]


class AclStore:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._bindings: tuple[AclBinding, ...] = ()
        self.lock = trio.Lock()  # held across a read-decide-write (see the module docstring)
        self.listeners: list[Callable[[Sequence[AclBinding]], None]] = []

    @property
    def bindings(self) -> tuple[AclBinding, ...]:
        return self._bindings

    async def load(self) -> None:
        data = await self._store.read_metadata(BLOB)
        self._swap(tuple(decode(data)) if data else ())

    async def replace(self, bindings: Sequence[AclBinding]) -> None:
        """Make ``bindings`` the ACLs: durable first, then visible."""
        new = tuple(dict.fromkeys(bindings))
        await self._store.write_metadata(BLOB, encode(new))
        self._swap(new)

    async def change(
        self, decide: Callable[[tuple[AclBinding, ...]], tuple[tuple[AclBinding, ...], T]]
    ) -> T:
        """Under ``lock``: ``decide`` the new bindings (and a result) from the current ones,
        make them durable if they differ, and return the result."""
        async with self.lock:
            new, result = decide(self._bindings)
            if new != self._bindings:
                await self.replace(new)
        return result

    def _swap(self, bindings: tuple[AclBinding, ...]) -> None:
        self._bindings = bindings
        for listener in self.listeners:
            listener(bindings)
