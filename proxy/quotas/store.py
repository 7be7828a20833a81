"""The client quotas, kept durably as the SCRAM credentials and ACLs are
(``proxy/sasl/scram_store.py``, ``proxy/acl/store.py``).

On-disk format: the broker metadata blob ``client-quotas`` (``Store.write_metadata``: replaced
atomically and fsynced, so a ``kill -9`` keeps the last acknowledged change), JSON::

    {"version": 1,
     "entities": [{"entity": [["client-id", null], ["user", "alice"]],
                   "quotas": {"producer_byte_rate": 1024.0}}]}

Entities keep their creation order. A change is read-decide-write across an ``await``:
callers hold ``lock`` around it. ``listeners`` hear every new set of quotas once it is durable
(the enforcement's quota lookup follows them).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

import trio

from proxy.quotas.model import Quotas

BLOB = "client-quotas"


class MetadataStore(Protocol):
    async def read_metadata(self, name: str) -> bytes | None: ...

    async def write_metadata(self, name: str, data: bytes) -> None: ...


def encode(quotas: Quotas) -> bytes:
    doc: dict[str, Any] = {
        "version": 1,
        "entities": [
            {"entity": [list(pair) for pair in entity], "quotas": values}
            for entity, values in quotas.items()
        ],
    }
    return json.dumps(doc).encode()  # NaN and Infinity as Python's json writes them


def decode(data: bytes) -> Quotas:
    doc = json.loads(data)
    if doc.get("version") != 1:
        raise ValueError(f"{BLOB}: unknown version {doc.get('version')!r}")
    return {
        tuple((str(t), n) for t, n in e["entity"]): {
            str(k): float(v) for k, v in e["quotas"].items()
        }
        for e in doc["entities"]
    }


class QuotaStore:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._quotas: Quotas = {}
        self.lock = trio.Lock()  # held across a read-decide-write
        self.listeners: list[Callable[[Quotas], None]] = []

    @property
    def quotas(self) -> Quotas:
        return self._quotas

    async def load(self) -> None:
        data = await self._store.read_metadata(BLOB)
        self._swap(decode(data) if data else {})

    async def replace(self, quotas: Quotas) -> None:
        """Make ``quotas`` the client quotas: durable first, then visible."""
        await self._store.write_metadata(BLOB, encode(quotas))
        self._swap(quotas)

    def _swap(self, quotas: Quotas) -> None:
        self._quotas = quotas
        for listener in self.listeners:
            listener(quotas)
