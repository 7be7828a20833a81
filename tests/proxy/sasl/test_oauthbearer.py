"""OAUTHBEARER with Kafka's unsecured-token validation (proxy/sasl/oauthbearer.py)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from proxy.sasl.mechanisms import AuthFailed, InvalidCredentials
from proxy.sasl.oauthbearer import OAuthBearerServer

NOW_MS = 1_800_000_000_000


def b64(obj: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def jws(claims: dict[str, Any], alg: str = "none") -> str:
    return f"{b64({'alg': alg})}.{b64(claims)}."


def first(token: str, authzid: str = "", extensions: str = "") -> bytes:
    gs2 = f"n,{'a=' + authzid if authzid else ''},"
    return f"{gs2}\x01auth=Bearer {token}\x01{extensions}\x01".encode()


def server(**options: str) -> OAuthBearerServer:
    return OAuthBearerServer(options, lambda: NOW_MS)


GOOD = {"sub": "alice", "exp": NOW_MS / 1000 + 60, "iat": NOW_MS / 1000 - 1, "scope": "a b"}


def test_a_good_token_logs_in_as_its_subject() -> None:
    s = server()
    assert s.step(first(jws(GOOD), extensions="traceId=123\x01")) == b""
    assert s.complete and s.username == "alice"
    assert s.expires_at_ms == NOW_MS + 60_000  # the token's exp bounds the session


def test_the_tokens_expiry_is_the_session_lifetime() -> None:
    from proxy.sasl.session import SaslSession
    from proxy.sasl.settings import SaslSettings

    # the token's exp is wall-clock time; the session's own clock is the connection's
    # monotonic one (trio.current_time), which has nothing to do with it
    monotonic_ms = 5_000
    for reauth_ms, lifetime in ((0, 60_000), (10_000, 10_000), (120_000, 60_000)):
        settings = SaslSettings("SASL", ("OAUTHBEARER",), {}, reauth_ms, 100)
        session = SaslSession(settings, lambda user, mech: None, wall_ms=lambda: NOW_MS)
        session.handshake("OAUTHBEARER", 1, monotonic_ms)
        token = first(jws(GOOD))
        assert session.authenticate(token, monotonic_ms) == (b"", lifetime)
        assert session.expires_at_ms == monotonic_ms + lifetime


@pytest.mark.parametrize(
    "claims",
    [
        {**GOOD, "exp": NOW_MS / 1000 - 1},  # expired
        {k: v for k, v in GOOD.items() if k != "exp"},  # no expiry
        {k: v for k, v in GOOD.items() if k != "sub"},  # no principal
        {**GOOD, "iat": NOW_MS / 1000 + 60},  # issued in the future
        {**GOOD, "sub": 7},  # a principal that is not a string
    ],
)
def test_an_invalid_token_is_answered_then_fails_on_the_clients_ack(claims: dict[str, Any]) -> None:
    s = server()
    answer = s.step(first(jws(claims)))
    assert json.loads(answer) == {"status": "invalid_token"} and not s.complete
    with pytest.raises(AuthFailed) as exc:
        s.step(b"\x01")
    assert json.loads(str(exc.value)) == {"status": "invalid_token"}


def test_a_signed_token_or_a_missing_scope_is_refused() -> None:
    assert json.loads(server().step(first(jws(GOOD, alg="RS256")))) == {"status": "invalid_token"}
    s = server(unsecuredValidatorRequiredScope="a c")
    # Kafka's jsonErrorResponse byte for byte, the scope being the required list's toString
    assert s.step(first(jws(GOOD))) == b'{"status":"insufficient_scope", "scope":"[a, c]"}'
    assert server(unsecuredValidatorRequiredScope="b").step(first(jws(GOOD))) == b""


def test_fractional_times_are_truncated_to_milliseconds_as_kafka_does() -> None:
    # a client stamps iat with its clock's sub-millisecond time just before the broker reads
    # its own: Kafka truncates to whole milliseconds, so that is not "issued in the future"
    claims = {"sub": "alice", "iat": (NOW_MS + 0.7) / 1000, "exp": NOW_MS / 1000 + 60}
    assert server().step(first(jws(claims))) == b""


def test_options_name_the_claims_and_the_skew() -> None:
    claims = {"user": "bob", "exp": NOW_MS / 1000 - 1}
    s = server(
        unsecuredValidatorPrincipalClaimName="user", unsecuredValidatorAllowableClockSkewMs="5000"
    )
    assert s.step(first(jws(claims))) == b"" and s.username == "bob"


@pytest.mark.parametrize(
    ("message", "why"),
    [
        (b"y,,\x01auth=Bearer x\x01\x01", "Invalid OAUTHBEARER client first message"),
        (b"n,,\x01host=a\x01\x01", "'auth' not specified"),
        (b"n,,\x01auth=Basic abc\x01\x01", "Invalid scheme"),
        # as Kafka's OAuthBearerClientInitialResponse: an extension's value is not empty, an
        # authzid not empty nor holding a bare "=", the message matched whole
        (first(jws(GOOD), extensions="traceId=\x01"), "first message$"),
        (f"n,a=,\x01auth=Bearer {jws(GOOD)}\x01\x01".encode(), "first message$"),
        (first(jws(GOOD), authzid="a=b"), "first message$"),
        (first(jws(GOOD)) + b"\n", "first message$"),
        (f"n,,\x01auth=Bearer {jws(GOOD)}\n\x01\x01".encode(), "invalid 'auth' format"),
        (b"n,,\x01auth=Bearer \xff\x01\x01", "first message$"),
    ],
)
def test_malformed_first_messages(message: bytes, why: str) -> None:
    # Kafka's SaslException: the reason is logged, the client sees the generic message
    with pytest.raises(InvalidCredentials, match=why):
        server().step(message)


def test_an_escaped_authorization_id_is_compared_as_sent() -> None:
    s = server()
    assert s.step(first(jws({**GOOD, "sub": "a=2Cb"}), authzid="a=2Cb")) == b""


def test_a_malformed_first_message_answers_kafkas_generic_message() -> None:
    from proxy.sasl.session import SaslSession
    from proxy.sasl.settings import SaslSettings

    settings = SaslSettings("SASL", ("OAUTHBEARER",), {}, 0, 100)
    session = SaslSession(settings, lambda user, mech: None, wall_ms=lambda: NOW_MS)
    session.handshake("OAUTHBEARER", 1, 0)
    with pytest.raises(AuthFailed) as exc:
        session.authenticate(b"garbage", 0)
    assert str(exc.value) == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism OAUTHBEARER"
    )
    assert session.failure == "Invalid OAUTHBEARER client first message"  # logged at close


def test_another_authorization_id_is_refused() -> None:
    with pytest.raises(AuthFailed, match="different from the token's principal"):
        server().step(first(jws(GOOD), authzid="bob"))
