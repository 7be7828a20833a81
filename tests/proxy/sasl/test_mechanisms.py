"""The SASL mechanisms and the session state machine, pure (no sockets)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode
from scramp import ScramClient

from proxy.principal import KafkaPrincipal
from proxy.sasl.mechanisms import (
    AuthFailed,
    PlainServer,
    ScramCredential,
    ScramServer,
    generic_failure,
    new_credential,
)
from proxy.sasl.scram_cli import parse_add_scram
from proxy.sasl.scram_store import decode, encode
from proxy.sasl.session import Close, Reply, SaslSession, State
from proxy.sasl.settings import PLAIN_MODULE, SaslSettings, parse_jaas

USERS = {"alice": "alice-secret", "bob": "b=o,b"}
CREDS = {
    ("carol", m): new_credential(m, "carol-secret") for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
}


def lookup(user: str, mechanism: str) -> ScramCredential | None:
    return CREDS.get((user, mechanism))


# -- PLAIN (messages: Kafka's PlainSaslServer) ----------------------------------------------


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
        (b"\0nobody\0x", "Authentication failed: Invalid username or password"),
        (b"\0\0x", "Authentication failed: username not specified"),
        (b"\0alice\0", "Authentication failed: password not specified"),
        (b"alice\0x", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
        (
            b"bob\0alice\0alice-secret",
            "Authentication failed: Client requested an authorization id that is different "
            "from username",
        ),
    ],
)
def test_plain_refusals(token: bytes, message: str) -> None:
    server = PlainServer(USERS)
    with pytest.raises(AuthFailed) as exc:
        server.step(token)
    assert str(exc.value) == message and not server.complete


def test_plain_accepts_the_user_and_an_equal_authorization_id() -> None:
    for token in (b"\0alice\0alice-secret", b"alice\0alice\0alice-secret", b"\0bob\0b=o,b"):
        server = PlainServer(USERS)
        assert server.step(token) == b""
        assert server.complete and server.username == token.split(b"\0")[1].decode()


# -- SCRAM (RFC 5802 / 7677 via scramp; a stock scramp client on the other side) ------------


def scram_exchange(mechanism: str, user: str, password: str) -> ScramServer:
    server = ScramServer(mechanism, lambda u: lookup(u, mechanism))
    client = ScramClient([mechanism], user, password)
    first = server.step(client.get_client_first().encode())
    client.set_server_first(first.decode())
    final = server.step(client.get_client_final().encode())
    client.set_server_final(final.decode())  # the client checks the server's signature
    return server


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_with_a_stock_client(mechanism: str) -> None:
    server = scram_exchange(mechanism, "carol", "carol-secret")
    assert server.complete and server.username == "carol"


@pytest.mark.parametrize(("user", "password"), [("carol", "wrong"), ("nobody", "carol-secret")])
def test_a_wrong_password_and_an_unknown_user_fail_alike(user: str, password: str) -> None:
    with pytest.raises(AuthFailed) as exc:
        scram_exchange("SCRAM-SHA-512", user, password)
    assert str(exc.value) == str(generic_failure("SCRAM-SHA-512"))  # nothing about the user


def test_scram_out_of_order_and_forged_messages_fail() -> None:
    server = ScramServer("SCRAM-SHA-256", lambda u: lookup(u, "SCRAM-SHA-256"))
    with pytest.raises(AuthFailed):  # a client-final first
        server.step(b"c=biws,r=abc,p=Zm9v")
    server = ScramServer("SCRAM-SHA-256", lambda u: lookup(u, "SCRAM-SHA-256"))
    client = ScramClient(["SCRAM-SHA-256"], "carol", "carol-secret")
    first = server.step(client.get_client_first().encode()).decode()
    nonce = dict(kv.split("=", 1) for kv in first.split(","))["r"]
    with pytest.raises(AuthFailed):  # a forged proof with the right nonce
        server.step(f"c=biws,r={nonce},p={'A' * 44}".encode())
    with pytest.raises(AuthFailed):  # and nothing after the exchange failed
        server.step(b"n,,n=carol,r=x")


def test_scram_refuses_another_authorization_id() -> None:
    server = ScramServer("SCRAM-SHA-256", lambda u: lookup(u, "SCRAM-SHA-256"))
    with pytest.raises(AuthFailed, match="authorization id"):
        server.step(b"n,a=alice,n=carol,r=abcdef")


def test_credentials_round_trip_and_never_hold_the_password() -> None:
    users = {"carol": {"SCRAM-SHA-256": CREDS[("carol", "SCRAM-SHA-256")]}}
    blob = encode(users)
    assert b"carol-secret" not in blob
    assert decode(blob) == users


def test_add_scram_arguments_as_kafka_storage_writes_them() -> None:
    user, mech, cred = parse_add_scram("SCRAM-SHA-512=[name=alice,password=s3cret,iterations=8192]")
    assert (user, mech, cred.iterations) == ("alice", "SCRAM-SHA-512", 8192)
    for bad in ("SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-256=[name=a]", "PLAIN=[x]"):
        with pytest.raises(ValueError):
            parse_add_scram(bad)
    with pytest.raises(ValueError, match="4096"):
        parse_add_scram("SCRAM-SHA-256=[name=a,password=b,iterations=10]")


def test_jaas_entries_as_kafka_writes_them() -> None:
    module, options = parse_jaas(
        f'{PLAIN_MODULE} required username="admin" password="a\\"b" user_admin="x y" '
        "user_bob=plain;"
    )
    assert module == PLAIN_MODULE
    assert options == {
        "username": "admin",
        "password": 'a"b',
        "user_admin": "x y",
        "user_bob": "plain",
    }
    for bad in (
        f"{PLAIN_MODULE} required",
        f"{PLAIN_MODULE} maybe;",
        f'{PLAIN_MODULE} required x="y;',
    ):
        with pytest.raises(ValueError):
            parse_jaas(bad)


# -- the session (Kafka's SaslServerAuthenticator states) ------------------------------------


def request(api_key: int) -> bytes:
    return api_key.to_bytes(2, "big") + b"\0\x01" + b"rest"


def session(reauth_ms: int = 0) -> SaslSession:
    settings = SaslSettings("SASL", ("PLAIN", "SCRAM-SHA-512"), USERS, reauth_ms, 100)
    return SaslSession(settings, lookup)


def test_only_versions_then_handshake_then_authenticate_pass_before_authentication() -> None:
    s = session()
    assert s.route(request(18), 0) is None and s.state is State.HANDSHAKE
    assert isinstance(s.route(request(18), 0), Close)  # ApiVersions once, first
    s = session()
    assert s.route(request(17), 0) is None
    assert s.handshake("PLAIN", 1, 0) is ErrorCode.none and s.state is State.AUTHENTICATE
    assert isinstance(s.route(request(3), 0), Close)  # Metadata before authenticating
    assert s.failed


def test_a_request_before_the_handshake_closes() -> None:
    for key in (0, 3, 36):
        s = session()
        closed = s.route(request(key), 0)
        assert isinstance(closed, Close) and s.failed


def test_an_unserved_mechanism_fails_the_session() -> None:
    s = session()
    assert s.handshake("GSSAPI", 1, 0) is ErrorCode.unsupported_sasl_mechanism
    assert s.failed and isinstance(s.route(request(17), 0), Close)


def test_success_sets_the_principal_and_the_session_lifetime() -> None:
    s = session(reauth_ms=60_000)
    s.handshake("PLAIN", 1, 0)
    token, lifetime = s.authenticate(b"\0alice\0alice-secret", 1_000)
    assert (token, lifetime) == (b"", 60_000)
    assert s.principal == KafkaPrincipal("User", "alice") and s.state is State.COMPLETE
    assert s.route(request(3), 60_999) is None
    # past its lifetime only a re-authentication may begin (KIP-368)
    assert isinstance(s.route(request(3), 61_000), Close)
    assert s.route(request(17), 61_000) is None


def test_reauthentication_keeps_the_mechanism_and_the_principal() -> None:
    s = session(reauth_ms=1000)
    s.handshake("PLAIN", 1, 0)
    s.authenticate(b"\0alice\0alice-secret", 0)
    assert s.handshake("PLAIN", 1, 900) is ErrorCode.none
    assert s.authenticate(b"\0alice\0alice-secret", 900)[1] == 1000
    assert s.expires_at_ms == 1900
    # at most one re-authentication a second (Kafka's KafkaChannel): an ordinary request then
    assert s.handshake("PLAIN", 1, 1500) is ErrorCode.illegal_sasl_state
    assert s.state is State.COMPLETE and not s.failed
    s.handshake("PLAIN", 1, 1900)
    with pytest.raises(AuthFailed, match="Cannot change principals"):
        s.authenticate(b"\0bob\0b=o,b", 1900)
    s = session(reauth_ms=1000)
    s.handshake("PLAIN", 1, 0)
    s.authenticate(b"\0alice\0alice-secret", 0)
    s.handshake("SCRAM-SHA-512", 1, 10)
    with pytest.raises(AuthFailed, match="re-authentication"):
        s.authenticate(b"n,,n=carol,r=abc", 10)


def test_without_a_session_expiry_a_second_handshake_is_illegal_state() -> None:
    s = session()  # connections.max.reauth.ms=0 and a credential that never expires
    s.handshake("PLAIN", 1, 0)
    s.authenticate(b"\0alice\0alice-secret", 0)
    assert s.expires_at_ms is None
    assert s.handshake("PLAIN", 1, 5000) is ErrorCode.illegal_sasl_state
    assert s.state is State.COMPLETE


def test_handshake_v0_carries_raw_tokens() -> None:
    s = session()
    s.handshake("PLAIN", 0, 0)
    reply = s.route(b"\0alice\0alice-secret", 0)
    assert reply == Reply(b"\0\0\0\0") and s.state is State.COMPLETE
    s = session()
    s.handshake("PLAIN", 0, 0)
    assert isinstance(s.route(b"\0alice\0nope", 0), Close)
