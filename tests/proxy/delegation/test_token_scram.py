"""SCRAM with extensions (proxy/sasl/mechanisms.py): ``tokenauth=true`` looks the user up as
a delegation token and authenticates its owner; other extensions are ignored; either way the
extensions are part of the AuthMessage both proofs cover."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from kio.schema.describe_delegation_token.v3 import request as describe3
from kio.schema.errors import ErrorCode
from scramp import ScramClient

from proxy.sasl.mechanisms import AuthFailed, ScramServer, TokenCredential, new_credential
from tests.proxy.delegation.test_token_apis import broker, create_v3, login, password
from wire.values import ms64

MECH = "SCRAM-SHA-512"
USER_CRED = new_credential(MECH, "carol-secret")
TOKEN_CRED = new_credential(MECH, "the-hmac-b64")


def tokens(token_id: str) -> TokenCredential | None:
    return TokenCredential(TOKEN_CRED, "alice", 5000) if token_id == "tok1" else None


def exchange(user: str, pw: str, ext: str, in_auth_message: bool = True) -> ScramServer:
    server = ScramServer(MECH, lambda u: USER_CRED if u == "carol" else None, tokens)
    client = ScramClient([MECH], user, pw)
    first = client.get_client_first() + ext
    if in_auth_message:
        client.client_first_bare += ext
    client.set_server_first(server.step(first.encode()).decode())
    final = server.step(client.get_client_final().encode())
    client.set_server_final(final.decode())
    return server


def test_tokenauth_authenticates_the_tokens_owner() -> None:
    server = exchange("tok1", "the-hmac-b64", ",tokenauth=true")
    assert server.complete and server.username == "alice"
    assert server.token_authenticated and server.lifetime_ms == 5000


def test_an_unknown_extension_is_ignored() -> None:
    server = exchange("carol", "carol-secret", ",foo=bar")
    assert (server.username, server.token_authenticated, server.lifetime_ms) == (
        "carol",
        False,
        None,
    )


@pytest.mark.parametrize(
    ("user", "pw", "ext"),
    [
        ("tok1", "the-hmac-b64", ""),  # a token id is no user
        ("carol", "carol-secret", ",tokenauth=true"),  # a user is no token
        ("tok1", "wrong", ",tokenauth=true"),
    ],
)
def test_token_and_user_credentials_do_not_mix(user: str, pw: str, ext: str) -> None:
    with pytest.raises(AuthFailed, match="invalid credentials"):
        exchange(user, pw, ext)


def test_the_extension_is_covered_by_the_proof() -> None:
    with pytest.raises(AuthFailed, match="invalid credentials"):
        exchange("tok1", "the-hmac-b64", ",tokenauth=true", in_auth_message=False)


async def test_expired_tokens_are_swept_and_an_expired_one_gets_a_spent_session(
    autojump_clock: trio.testing.MockClock,
) -> None:
    settings = {
        "delegation.token.expiry.time.ms": "10000",
        "delegation.token.expiry.check.interval.ms": "60000",
    }
    async with broker(**settings) as listener:
        server = listener.server  # type: ignore[attr-defined]
        server.broker.tokens.now_ms = lambda: int(trio.current_time() * 1000)
        alice, _ = await login(listener, "alice", "alice-secret")
        made = await alice.request(create_v3(max_lifetime=ms64(-1)))
        await trio.sleep(20)  # expired (10 s), not yet swept (60 s)
        tok, ok = await login(listener, made.token_id, password(made.hmac), tokenauth=True)
        assert ok.error_code == ErrorCode.none and ok.session_lifetime.total_seconds() == 0
        await tok.stream.send_all(b"\0\0\0\x0a\0\x03\0\x0c\0\0\0\x01\0\0")
        assert await tok.read_frame() is None  # the session is over: closed
        seen = await alice.request(describe3.DescribeDelegationTokenRequest(owners=None))
        assert len(seen.tokens) == 1
        await trio.sleep(60)
        seen = await alice.request(describe3.DescribeDelegationTokenRequest(owners=None))
        assert seen.tokens == ()
