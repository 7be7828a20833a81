"""The SASL mechanisms and the session state machine, pure (no sockets)."""

from __future__ import annotations

import base64
import hashlib

import pytest
from kio.schema.errors import ErrorCode
from scramp import ScramClient

from proxy.config import load_config
from proxy.principal import KafkaPrincipal
from proxy.sasl.mechanisms import (
    AuthFailed,
    InvalidCredentials,
    PlainServer,
    ScramCredential,
    ScramServer,
    new_credential,
)
from proxy.sasl.scram_cli import parse_add_scram
from proxy.sasl.scram_store import decode, encode
from proxy.sasl.session import Close, Refuse, Reply, SaslSession, State
from proxy.sasl.settings import PLAIN_MODULE, SaslSettings, listener_sasl, parse_jaas

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
        # Kafka's extractTokens stops at 4, and Java decodes bad UTF-8 as U+FFFD
        (b"\0a\0b\0c\0d\0e", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
        (b"\0alice\0\xff\xfe", "Authentication failed: Invalid username or password"),
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


def test_a_wrong_password_fails_with_the_generic_message() -> None:
    with pytest.raises(InvalidCredentials):  # SaslException: the client sees the generic one
        scram_exchange("SCRAM-SHA-512", "carol", "wrong")


def test_an_unknown_user_fails_at_the_client_first_message_as_in_kafka() -> None:
    server = ScramServer("SCRAM-SHA-512", lambda u: lookup(u, "SCRAM-SHA-512"))
    client = ScramClient(["SCRAM-SHA-512"], "nobody", "x")
    with pytest.raises(InvalidCredentials, match="Invalid user credentials"):
        server.step(client.get_client_first().encode())


def test_scram_out_of_order_and_forged_messages_fail() -> None:
    server = ScramServer("SCRAM-SHA-256", lambda u: lookup(u, "SCRAM-SHA-256"))
    with pytest.raises(InvalidCredentials):  # a client-final first
        server.step(b"c=biws,r=abc,p=Zm9v")
    server = ScramServer("SCRAM-SHA-256", lambda u: lookup(u, "SCRAM-SHA-256"))
    client = ScramClient(["SCRAM-SHA-256"], "carol", "carol-secret")
    first = server.step(client.get_client_first().encode()).decode()
    nonce = dict(kv.split("=", 1) for kv in first.split(","))["r"]
    with pytest.raises(InvalidCredentials):  # a forged proof with the right nonce
        server.step(f"c=biws,r={nonce},p={'A' * 44}".encode())
    with pytest.raises(InvalidCredentials):  # and nothing after the exchange failed
        server.step(b"n,,n=carol,r=x")


def _server_first(mechanism: str = "SCRAM-SHA-256") -> tuple[ScramServer, ScramClient, str]:
    server = ScramServer(mechanism, lambda u: lookup(u, mechanism))
    client = ScramClient([mechanism], "carol", "carol-secret")
    first = server.step(client.get_client_first().encode()).decode()
    client.set_server_first(first)
    return server, client, first


def test_a_proof_that_is_not_base64_fails_the_exchange() -> None:
    server, client, _ = _server_first()
    final = client.get_client_final()
    with pytest.raises(InvalidCredentials):  # not an escaping binascii.Error
        server.step((final.rsplit("p=", 1)[0] + "p=abc").encode())


def test_a_client_final_nonce_other_than_the_server_firsts_is_refused() -> None:
    """Kafka: the client-final nonce must end with the server-first nonce (client's + server's
    halves). The proof here is a valid one, computed over the altered message."""
    import hashlib
    import hmac

    server, client, first = _server_first()
    fields = dict(kv.split("=", 1) for kv in first.split(","))
    salted = hashlib.pbkdf2_hmac(
        "sha256", b"carol-secret", base64.b64decode(fields["s"]), int(fields["i"])
    )
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    server_nonce = fields["r"][len(client.c_nonce) :]
    without_proof = f"c=biws,r=forged{server_nonce}"
    auth_message = f"{client.client_first_bare},{first},{without_proof}".encode()
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth_message, "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    with pytest.raises(InvalidCredentials, match="Invalid client nonce"):
        server.step(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    assert not server.complete


def test_a_saslname_is_unescaped_as_kafkas_scram_formatter_does() -> None:
    name = "a=b,c"
    cred = new_credential("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", lambda u: cred if u == name else None)
    client = ScramClient(["SCRAM-SHA-256"], "a=3Db=2Cc", "pw")  # escaped as clients send it
    client.set_server_first(server.step(client.get_client_first().encode()).decode())
    client.set_server_final(server.step(client.get_client_final().encode()).decode())
    assert server.complete and server.username == name
    server = ScramServer("SCRAM-SHA-256", lambda u: cred)
    with pytest.raises(InvalidCredentials):  # a bare '=' is not a valid saslname
        server.step(b"n,,n=a=b,r=abcdef")


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


@pytest.mark.parametrize(
    ("argument", "message"),
    [  # Kafka's ScramParser refuses each of these
        ("SCRAM-SHA-256=[name=a,password=b,iterations=16385]", "must be <= 16384"),
        ("SCRAM-SHA-256=[name=a,password=b,colour=red]", "Unknown SCRAM configurations: colour"),
        ("SCRAM-SHA-256=[name=a,password=b,c]", "No equals sign found in SCRAM component: c"),
        ("SCRAM-SHA-256=[name=a,saltedpassword=AAAA]", "supply 'salt' with 'saltedpassword'"),
        ("SCRAM-SHA-256=[name=a,password=b,iterations=x]", "Failed to parse iterations count"),
    ],
)
def test_add_scram_refuses_what_kafka_storage_refuses(argument: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_add_scram(argument)


def test_add_scram_takes_quotes_a_salt_and_a_salted_password_as_kafka_storage() -> None:
    salt = b"0123456789abcdef"
    user, _, cred = parse_add_scram(
        f'SCRAM-SHA-256=[name="a b",password="p q",salt={base64.b64encode(salt).decode()}]'
    )
    assert (user, cred) == ("a b", new_credential("SCRAM-SHA-256", "p q", 4096, salt))
    salted = hashlib.pbkdf2_hmac("sha256", b"pw", salt, 4096)
    _, _, from_salted = parse_add_scram(
        f"SCRAM-SHA-256=[name=a,salt={base64.b64encode(salt).decode()},"
        f"saltedpassword={base64.b64encode(salted).decode()}]"
    )
    assert from_salted == new_credential("SCRAM-SHA-256", "pw", 4096, salt)


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
    assert s.route(request(18), 0) is None and s.state is State.VERSIONS_OR_HANDSHAKE
    s.versions_answered()  # the ApiVersions handler, having answered NONE
    assert s.state is State.HANDSHAKE
    assert isinstance(s.route(request(18), 0), Close)  # ApiVersions once, first
    s = session()
    assert s.route(request(17), 0) is None
    assert s.handshake("PLAIN", 1, 0) is ErrorCode.none and s.state is State.AUTHENTICATE
    # Metadata before authenticating: answered with its ILLEGAL_SASL_STATE error reply
    assert s.route(request(3), 0) == Refuse(answer=True)
    assert s.failed


def test_a_request_before_the_handshake_closes() -> None:
    for key in (0, 3, 36):  # Kafka's IllegalSaslStateException: no answer, delayed close
        s = session()
        assert s.route(request(key), 0) == Refuse(answer=False) and s.failed


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
    assert s.route(b"\0alice\0nope", 0) == Refuse(answer=False)  # no answer, delayed close
    assert s.failed


def _scram_login(s: SaslSession, user: str, password: str, now_ms: int) -> None:
    client = ScramClient(["SCRAM-SHA-512"], user, password)
    assert s.handshake("SCRAM-SHA-512", 1, now_ms) is ErrorCode.none
    client.set_server_first(s.authenticate(client.get_client_first().encode(), now_ms)[0].decode())
    s.authenticate(client.get_client_final().encode(), now_ms)


def test_a_scram_failure_answers_kafkas_generic_message_naming_re_authentication() -> None:
    s = session(reauth_ms=60_000)
    with pytest.raises(AuthFailed) as exc:
        _scram_login(s, "nobody", "x", 0)
    assert str(exc.value) == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-512"
    )
    assert s.failed and s.failure == "Authentication failed: Invalid user credentials"
    s = session(reauth_ms=60_000)
    _scram_login(s, "carol", "carol-secret", 0)
    assert s.principal == KafkaPrincipal("User", "carol")
    with pytest.raises(AuthFailed) as exc:
        _scram_login(s, "carol", "wrong", 2000)
    assert str(exc.value) == (
        "Authentication failed during re-authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-512"
    )


def test_reauthentication_refusals_carry_kafkas_messages() -> None:
    s = session(reauth_ms=1000)
    s.handshake("PLAIN", 1, 0)
    s.authenticate(b"\0alice\0alice-secret", 0)
    s.handshake("PLAIN", 1, 10)
    with pytest.raises(AuthFailed) as exc:
        s.authenticate(b"\0bob\0b=o,b", 10)
    assert str(exc.value) == (
        "Cannot change principals during re-authentication from User.alice: User.bob"
    )
    s = session(reauth_ms=1000)
    s.handshake("PLAIN", 1, 0)
    s.authenticate(b"\0alice\0alice-secret", 0)
    # another mechanism: the handshake is answered NONE (Kafka's REAUTH_BAD_MECHANISM), the
    # next frame fails the re-authentication unanswered, and the connection closes later
    assert s.handshake("SCRAM-SHA-512", 1, 10) is ErrorCode.none
    assert s.route(request(36), 10) == Refuse(answer=False)
    assert s.failed and s.failure == (
        "SASL mechanism 'SCRAM-SHA-512' requested by client is not supported for "
        "re-authentication of mechanism 'PLAIN'"
    )


def test_an_expired_session_closes_on_a_handshake_that_cannot_reauthenticate() -> None:
    """Kafka's Processor: a SaslHandshake that does not begin a re-authentication (one began
    less than a second ago) is processed as any request, and an expired session closes."""
    s = session(reauth_ms=500)
    s.handshake("PLAIN", 1, 0)
    s.authenticate(b"\0alice\0alice-secret", 0)
    assert s.handshake("PLAIN", 1, 400) is ErrorCode.none  # re-authenticates at 400 ms
    s.authenticate(b"\0alice\0alice-secret", 400)
    assert s.expires_at_ms == 900
    assert isinstance(s.route(request(17), 1000), Close)  # expired; < 1 s since 400
    s = session(reauth_ms=500)
    s.handshake("PLAIN", 1, 0)
    s.authenticate(b"\0alice\0alice-secret", 0)
    s.handshake("PLAIN", 1, 400)
    s.authenticate(b"\0alice\0alice-secret", 400)
    assert s.route(request(17), 1400) is None  # expired, and a re-authentication may begin


def test_a_mechanisms_own_reauth_lifetime_overrides_the_listeners() -> None:
    # Kafka's SaslChannelBuilder: listener.name.<l>.<mechanism>.connections.max.reauth.ms
    # first, else the listener's connections.max.reauth.ms
    settings = SaslSettings(
        "SASL",
        ("PLAIN", "SCRAM-SHA-512"),
        USERS,
        60_000,
        100,
        reauth_ms_by_mechanism={"PLAIN": 5_000},
    )
    s = SaslSession(settings, lookup)
    s.handshake("PLAIN", 1, 0)
    assert s.authenticate(b"\0alice\0alice-secret", 1_000)[1] == 5_000
    assert settings.max_reauth_ms("SCRAM-SHA-512") == 60_000


def test_the_per_mechanism_reauth_config_is_read_from_the_listener_prefix() -> None:
    cfg = load_config(
        listen=None,
        advertise=None,
        data_dir=None,
        config_file=None,
        overrides={
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                f'{PLAIN_MODULE} required user_alice="alice-secret";'
            ),
            "connections.max.reauth.ms": "60000",
            "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms": "7000",
        },
        environ={},
    )
    assert cfg.values is not None
    settings = listener_sasl(cfg.values, "SASL_PLAINTEXT")
    assert settings.max_reauth_ms("SCRAM-SHA-256") == 7_000
    assert settings.max_reauth_ms("PLAIN") == 60_000
