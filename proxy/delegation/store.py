"""Delegation tokens, kept durably as the SCRAM credentials are (``proxy/sasl/scram_store.py``).

On-disk format: the broker metadata blob ``delegation-tokens`` (replaced atomically and
fsynced: a ``kill -9`` keeps the last acknowledged change), JSON::

    {"version": 1,
     "tokens": [{"id": "...", "owner": ["User", "alice"], "requester": ["User", "alice"],
                 "renewers": [["User", "bob"]], "issue_ms": 1, "max_ms": 2, "expiry_ms": 2}]}

As Kafka's ``DelegationTokenRecord``, the HMAC is not stored: it is derived from the token id
and ``delegation.token.secret.key`` when needed (a changed key changes every token's HMAC).
A token authenticates over SCRAM (Kafka's ``DelegationTokenManager.updateCache``): its
password is the base64 of its HMAC, turned into a SCRAM credential for each mechanism with a
random salt and 4096 iterations, kept in memory only.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import trio

from proxy.delegation.tokens import Token, TokenSettings, token_hmac
from proxy.principal import KafkaPrincipal
from proxy.sasl.mechanisms import (
    SCRAM_MECHANISMS,
    ScramCredential,
    TokenCredential,
    new_credential,
)
from proxy.sasl.scram_store import MetadataStore
from storage.api import StorageError

BLOB = "delegation-tokens"

T = TypeVar("T")


def _p(p: KafkaPrincipal) -> list[str]:
    return [p.principal_type, p.name]


def encode(tokens: Iterable[Token]) -> bytes:
    doc: dict[str, Any] = {
        "version": 1,
        "tokens": [
            {
                "id": t.token_id,
                "owner": _p(t.owner),
                "requester": _p(t.requester),
                "renewers": [_p(r) for r in t.renewers],
                "issue_ms": t.issue_ms,
                "max_ms": t.max_ms,
                "expiry_ms": t.expiry_ms,
            }
            for t in tokens
        ],
    }
    return json.dumps(doc, sort_keys=True).encode()


def decode(data: bytes) -> list[Token]:
    doc = json.loads(data)
    if doc.get("version") != 1:
        raise ValueError(f"{BLOB}: unknown version {doc.get('version')!r}")
    return [
        Token(
            t["id"],
            KafkaPrincipal(*t["owner"]),
            KafkaPrincipal(*t["requester"]),
            tuple(KafkaPrincipal(*r) for r in t["renewers"]),
            int(t["issue_ms"]),
            int(t["max_ms"]),
            int(t["expiry_ms"]),
        )
        for t in doc["tokens"]
    ]


class TokenStore:
    def __init__(
        self, store: MetadataStore, settings: TokenSettings, now_ms: Callable[[], int]
    ) -> None:
        self._store = store
        self.settings = settings
        self.now_ms = now_ms  # wall clock ms, as token times are
        self._tokens: dict[str, Token] = {}  # by id, in creation order
        self._by_hmac: dict[bytes, str] = {}
        self._scram: dict[tuple[str, str], ScramCredential] = {}
        self._changing = trio.Lock()

    async def load(self) -> None:
        """Raises StorageError (one line at start-up, not a traceback) for a damaged blob, as
        ``ScramStore.load``."""
        data = await self._store.read_metadata(BLOB)
        try:
            tokens = decode(data) if data else []
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StorageError(
                f"the delegation tokens (metadata blob {BLOB}) cannot be read: {exc!r}; restore "
                "it, or remove it (every token is then gone: create them again)"
            ) from None
        self._set({t.token_id: t for t in tokens})

    def _set(self, tokens: dict[str, Token]) -> None:
        self._tokens = tokens
        key = self.settings.secret_key
        self._by_hmac = {token_hmac(i, key): i for i in tokens} if key else {}
        self._scram = {k: v for k, v in self._scram.items() if k[0] in tokens}

    def tokens(self) -> list[Token]:
        return list(self._tokens.values())

    def hmac(self, token_id: str) -> bytes:
        return token_hmac(token_id, self.settings.secret_key)

    def by_hmac(self, hmac: bytes) -> Token | None:
        token_id = self._by_hmac.get(hmac)
        return None if token_id is None else self._tokens.get(token_id)

    async def apply(self, put: Token | None = None, remove: Iterable[str] = ()) -> None:
        """Store a token (new or changed) and remove others, in one durable write, after any
        change under way."""
        removed = list(remove)
        await self.change(lambda tokens: (put, removed, None))

    async def change(
        self, decide: Callable[[dict[str, Token]], tuple[Token | None, Iterable[str], T]]
    ) -> T:
        """``decide(tokens by id)`` -> (a token to store, ids to remove, its answer), on the
        tokens as they are once any change under way is written: Kafka's controller decides
        each create, renew, expire and sweep on the state the previous one left (a renew
        decided before a concurrent expire's write must not put the token back). The change is
        written durably, then ``decide``'s answer returned."""
        async with self._changing:
            put, remove, answer = decide(dict(self._tokens))
            removed = list(remove)
            if put is None and not removed:
                return answer
            tokens = dict(self._tokens)
            for token_id in removed:
                tokens.pop(token_id, None)
            if put is not None:
                tokens[put.token_id] = put
            await self._store.write_metadata(BLOB, encode(tokens.values()))
            self._set(tokens)
            return answer

    def scram_lookup(self, token_id: str, mechanism: str) -> TokenCredential | None:
        """The SCRAM side of a token (None: no such token, or the feature is off)."""
        token = self._tokens.get(token_id)
        if token is None or not self.settings.enabled or mechanism not in SCRAM_MECHANISMS:
            return None
        cred = self._scram.get((token_id, mechanism))
        if cred is None:
            password = base64.b64encode(self.hmac(token_id)).decode()
            cred = self._scram[(token_id, mechanism)] = new_credential(mechanism, password)
        return TokenCredential(cred, token.owner.name, token.expiry_ms)
