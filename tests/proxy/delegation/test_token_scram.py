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

from proxy.principal import KafkaPrincipal
from proxy.sasl.mechanisms import (
    InvalidCredentials,
    ScramServer,
    TokenCredential,
    new_credential,
)
from proxy.sasl.session import SaslSession
from proxy.sasl.settings import SaslSettings
from tests.proxy.delegation.test_token_apis import broker, create_v3, login, password
from wire.values import ms64

MECH = "SCRAM-SHA-512"
WALL = 1_700_000_000_000  # the fake wall clock (ms)
USER_CRED = new_credential(MECH, "carol-secret")
TOKEN_CRED = new_credential(MECH, "the-hmac-b64")


def tokens(token_id: str) -> TokenCredential | None:
    return TokenCredential(TOKEN_CRED, "alice", WALL + 5000) if token_id == "tok1" else None


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
    assert server.token_authenticated and server.expires_at_ms == WALL + 5000


def test_an_unknown_extension_is_ignored() -> None:
    server = exchange("carol", "carol-secret", ",foo=bar")
    assert (server.username, server.token_authenticated, server.expires_at_ms) == (
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
    with pytest.raises(InvalidCredentials):  # the client sees only the generic message
        exchange(user, pw, ext)


def test_an_unknown_token_fails_at_client_first_as_kafka() -> None:
    server = ScramServer(MECH, lambda u: None, tokens)
    client = ScramClient([MECH], "tok2", "x")
    first = client.get_client_first() + ",tokenauth=true"
    with pytest.raises(InvalidCredentials, match="Invalid tokenId : tok2"):
        server.step(first.encode())


@pytest.mark.parametrize(("now", "lifetime"), [(WALL, 5000), (WALL + 4000, 1000), (WALL + 9000, 0)])
def test_the_session_ends_when_the_token_expires(now: int, lifetime: int) -> None:
    """Kafka's ReauthInfo: the token's expiry less the wall clock, 0 once expired (the
    session is then over at the next request)."""
    settings = SaslSettings("SASL", (MECH,), {}, 0, 100)
    session = SaslSession(
        settings, lambda u, m: None, lambda: now, token_lookup=lambda t, m: tokens(t)
    )
    assert session.handshake(MECH, 1, 0) == ErrorCode.none
    client = ScramClient([MECH], "tok1", "the-hmac-b64")
    first = client.get_client_first() + ",tokenauth=true"
    client.client_first_bare += ",tokenauth=true"
    client.set_server_first(session.authenticate(first.encode(), 0)[0].decode())
    final, got = session.authenticate(client.get_client_final().encode(), 0)
    client.set_server_final(final.decode())
    assert got == lifetime and session.token_authenticated
    assert session.principal == KafkaPrincipal("User", "alice")


def test_the_extension_is_covered_by_the_proof() -> None:
    with pytest.raises(InvalidCredentials):
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
        _, ok = await login(listener, made.token_id, password(made.hmac), tokenauth=True)
        assert ok.error_code == ErrorCode.none  # (its session ends at once: tested above)
        seen = await alice.request(describe3.DescribeDelegationTokenRequest(owners=None))
        assert len(seen.tokens) == 1
        await trio.sleep(60)
        seen = await alice.request(describe3.DescribeDelegationTokenRequest(owners=None))
        assert seen.tokens == ()


def test_a_token_owned_by_an_empty_name_authenticates_that_name_not_the_token_id() -> None:
    # an SSL principal may be "" (an empty subject DN, or a mapping rule giving ""); Kafka's
    # authorizationId is then the token owner's "", never the token id
    def owned_by_empty(token_id: str) -> TokenCredential | None:
        return TokenCredential(TOKEN_CRED, "", WALL + 5000) if token_id == "tok1" else None

    server = ScramServer(MECH, lambda u: None, owned_by_empty)
    client = ScramClient([MECH], "tok1", "the-hmac-b64")
    first = client.get_client_first() + ",tokenauth=true"
    client.client_first_bare += ",tokenauth=true"
    client.set_server_first(server.step(first.encode()).decode())
    client.set_server_final(server.step(client.get_client_final().encode()).decode())
    assert server.complete and server.username == ""
