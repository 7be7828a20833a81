"""The token store's changes are serialized (proxy/delegation/store.py): each create, renew,
expire and sweep is decided on the state the previous one left, as Kafka's controller does,
even while a durable write is under way."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from proxy.delegation.store import TokenStore, decode
from proxy.delegation.tokens import Token, TokenSettings, expire, renew
from proxy.principal import KafkaPrincipal
from storage.api import StorageError

ALICE = KafkaPrincipal("User", "alice")
SETTINGS = TokenSettings(secret_key="s3cret", max_lifetime_ms=10_000, expiry_time_ms=1_000)


class SlowStore:
    """A metadata store whose writes take a while (as the file store's, in a thread)."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    async def read_metadata(self, name: str) -> bytes | None:
        return self.blobs.get(name)

    async def write_metadata(self, name: str, data: bytes) -> None:
        for _ in range(5):
            await trio.lowlevel.checkpoint()
        self.blobs[name] = data


def token(token_id: str) -> Token:
    return Token(token_id, ALICE, ALICE, (), 0, 10_000, 1_000)


async def test_concurrent_creates_keep_both_tokens() -> None:
    disk = SlowStore()
    store = TokenStore(disk, SETTINGS, lambda: 500)
    async with trio.open_nursery() as n:
        n.start_soon(lambda: store.apply(put=token("a")))
        n.start_soon(lambda: store.apply(put=token("b")))
    assert {t.token_id for t in store.tokens()} == {"a", "b"}
    assert {t.token_id for t in decode(disk.blobs["delegation-tokens"])} == {"a", "b"}


async def test_a_renew_after_a_concurrent_expire_does_not_bring_the_token_back() -> None:
    store = TokenStore(SlowStore(), SETTINGS, lambda: 500)
    await store.apply(put=token("a"))
    hmac = store.hmac("a")
    codes = []

    def decide_expire(tokens: dict[str, Token]) -> tuple[Token | None, list[str], None]:
        out = expire(SETTINGS, store.by_hmac(hmac), ALICE, -1, 500)
        codes.append(("expire", out.code))
        return out.token, [out.removed] if out.removed else [], None

    def decide_renew(tokens: dict[str, Token]) -> tuple[Token | None, list[str], None]:
        out = renew(SETTINGS, store.by_hmac(hmac), ALICE, -1, 500)
        codes.append(("renew", out.code))
        return out.token, [], None

    async with trio.open_nursery() as n:
        n.start_soon(lambda: store.change(decide_expire))
        await trio.testing.wait_all_tasks_blocked()
        n.start_soon(lambda: store.change(decide_renew))
    assert store.tokens() == [] and store.by_hmac(hmac) is None
    assert [c for c, _ in codes] == ["expire", "renew"]
    assert codes[1][1].name == "delegation_token_not_found"


@pytest.mark.parametrize("blob", [b"{not json", b'{"version": 1}', b'{"version": 2, "tokens": []}'])
async def test_a_damaged_blob_is_one_storage_error_at_start_up(blob: bytes) -> None:
    disk = SlowStore()
    disk.blobs["delegation-tokens"] = blob
    with pytest.raises(StorageError, match="delegation-tokens"):
        await TokenStore(disk, SETTINGS, lambda: 500).load()
