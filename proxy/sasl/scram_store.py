"""SCRAM credentials, kept durably as salted keys (never a password).

On-disk format: the broker metadata blob ``scram-credentials`` (``Store.write_metadata``:
replaced atomically and fsynced, so a ``kill -9`` keeps the last acknowledged change), JSON::

    {"version": 1,
     "users": {"alice": {"SCRAM-SHA-512": {"salt": B64, "stored_key": B64,
                                           "server_key": B64, "iterations": 4096}}}}

Lookups are synchronous (the mechanisms call them mid-exchange) from the copy in memory;
changes write the whole blob, then replace the copy, one change at a time (as Kafka's
controller applies one AlterUserScramCredentials after another): two at once would each start
from the copy without the other's users, and the file backend's write of one blob would race
the other's on its temporary file.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

import trio

from proxy.sasl.mechanisms import ScramCredential
from storage.api import StorageError

BLOB = "scram-credentials"
T = TypeVar("T")
Users = Mapping[str, Mapping[str, ScramCredential]]
Upserts = list[tuple[str, str, ScramCredential]]  # (user, mechanism, credential)
Deletions = list[tuple[str, str]]  # (user, mechanism)


class MetadataStore(Protocol):
    async def read_metadata(self, name: str) -> bytes | None: ...

    async def write_metadata(self, name: str, data: bytes) -> None: ...


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def encode(users: dict[str, dict[str, ScramCredential]]) -> bytes:
    doc: dict[str, Any] = {
        "version": 1,
        "users": {
            user: {
                mech: {
                    "salt": _b64(c.salt),
                    "stored_key": _b64(c.stored_key),
                    "server_key": _b64(c.server_key),
                    "iterations": c.iterations,
                }
                for mech, c in mechs.items()
            }
            for user, mechs in users.items()
        },
    }
    return json.dumps(doc, sort_keys=True).encode()


def decode(data: bytes) -> dict[str, dict[str, ScramCredential]]:
    doc = json.loads(data)
    if doc.get("version") != 1:
        raise ValueError(f"{BLOB}: unknown version {doc.get('version')!r}")
    return {
        user: {
            mech: ScramCredential(
                base64.b64decode(c["salt"]),
                base64.b64decode(c["stored_key"]),
                base64.b64decode(c["server_key"]),
                int(c["iterations"]),
            )
            for mech, c in mechs.items()
        }
        for user, mechs in doc["users"].items()
    }


class ScramStore:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self._changing = trio.Lock()

    async def load(self) -> None:
        """Raises StorageError (one line at start-up, not a traceback) for a damaged blob."""
        data = await self._store.read_metadata(BLOB)
        try:
            self._users = decode(data) if data else {}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StorageError(
                f"the SCRAM credentials (metadata blob {BLOB}) cannot be read: {exc!r}; restore "
                "it, or remove it and add the users again (kafkad add-scram)"
            ) from None

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        return {u: dict(m) for u, m in self._users.items()}

    async def apply(
        self,
        upserts: list[tuple[str, str, ScramCredential]],
        deletions: list[tuple[str, str]],
    ) -> None:
        """Set and delete credentials in one durable write, after any change under way."""
        await self.change(lambda users: (upserts, deletions, None))

    async def change(self, decide: Callable[[Users], tuple[Upserts, Deletions, T]]) -> T:
        """``decide(users)`` -> (credentials to set, to delete, its answer), on the users as
        they are once any change under way is written (Kafka's controller decides each
        AlterUserScramCredentials on the state the previous one left); the changes are written
        durably, then ``decide``'s answer returned."""
        async with self._changing:
            upserts, deletions, answer = decide(self.users())
            if not upserts and not deletions:
                return answer
            users = self.users()
            for user, mech in deletions:
                users.get(user, {}).pop(mech, None)
                if user in users and not users[user]:
                    del users[user]
            for user, mech, cred in upserts:
                users.setdefault(user, {})[mech] = cred
            await self._store.write_metadata(BLOB, encode(users))
            self._users = users
            return answer
