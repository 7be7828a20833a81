"""OAUTHBEARER with Kafka's signed-JWT validator (proxy/sasl/oauthbearer_jwt.py): the token
checks, the key choice, the exchange's answers and the listener's configs."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
import trio
import trio.testing
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest as Auth2
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest as Hand1

from proxy.config import load_config
from proxy.properties_file import ConfigError
from proxy.sasl.mechanisms import AuthFailed
from proxy.sasl.oauthbearer import OAuthBearerServer
from proxy.sasl.oauthbearer_jwt import VALIDATOR_CLASS, InvalidToken, JwtValidator, load_jwks
from proxy.sasl.session import MAX_SESSION_LIFETIME_MS, SaslSession
from proxy.sasl.settings import SaslSettings, listener_sasl
from tests.proxy.harness import RawClient, encode_request
from tests.proxy.sasl.test_sasl_listener import METADATA
from tests.proxy.test_server_timeouts import closed_at, memory_broker
from wire.values import ms64

NOW_MS = 1_800_000_000_000
NOW_S = NOW_MS // 1000
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_RSA = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwk(key: Any, kid: str | None, **extra: Any) -> dict[str, Any]:
    algorithm = RSAAlgorithm if isinstance(key, rsa.RSAPublicKey) else ECAlgorithm
    out: dict[str, Any] = json.loads(algorithm.to_jwk(key))
    if kid is not None:
        out["kid"] = kid
    return {**out, **extra}


JWKS = {
    "keys": [
        {"kty": "XYZ", "kid": "unknown-type"},  # skipped, as jose4j skips it
        jwk(RSA_KEY.public_key(), "rsa-1", use="sig", alg="RS256"),
        jwk(EC_KEY.public_key(), "ec-1"),
        jwk(OTHER_RSA.public_key(), "rsa-enc", use="enc"),  # not a signing key
    ]
}
GOOD = {"sub": "alice", "iat": NOW_S - 10, "exp": NOW_S + 60, "scope": ["read", "write"]}


def sign(claims: dict[str, Any], key: Any = RSA_KEY, alg: str = "RS256", **header: Any) -> str:
    headers = {"kid": "rsa-1", **header} if "kid" not in header else header
    if headers.get("kid") is None:
        headers.pop("kid", None)
    return jwt.encode(claims, key, algorithm=alg, headers=headers)


def validator(**kw: Any) -> JwtValidator:
    return JwtValidator(load_jwks(json.dumps(JWKS)), **kw)


def test_a_good_rs256_token_gives_its_subject_scopes_and_expiry() -> None:
    token = validator().validate(sign(GOOD), NOW_MS)
    assert token.principal == "alice" and token.scopes == {"read", "write"}
    assert (token.expires_ms, token.issued_at_ms) == ((NOW_S + 60) * 1000, (NOW_S - 10) * 1000)


def test_an_es256_token_is_verified_with_the_ec_key_its_kid_names() -> None:
    token = validator().validate(sign(GOOD, EC_KEY, "ES256", kid="ec-1"), NOW_MS)
    assert token.principal == "alice"


def test_without_a_kid_the_first_key_of_the_algorithms_type_is_used() -> None:
    assert validator().validate(sign(GOOD, kid=None), NOW_MS).principal == "alice"
    assert validator().validate(sign(GOOD, EC_KEY, "ES256", kid=None), NOW_MS)


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (sign(GOOD, OTHER_RSA), "Signature verification failed"),  # wrong key, same kid
        (sign(GOOD, kid="nobody"), "no key of the JWKS"),  # unknown kid
        (sign(GOOD, OTHER_RSA, kid="rsa-enc"), "no key of the JWKS"),  # use=enc
        (sign(GOOD, EC_KEY, "ES256", kid="rsa-1"), "no key of the JWKS"),  # kid of another type
        # alg none: Kafka's SerializedJwt refuses the empty signature first; with one, DISALLOW_NONE
        (jwt.encode(GOOD, None, algorithm="none"), "not three sections"),
        (jwt.encode(GOOD, None, algorithm="none") + "c2ln", "'none' is not allowed"),
        (sign(GOOD) + "x", "malformed JWS"),
        (sign(GOOD)[:-4] + "AAAA", "Signature verification failed"),
        ("abc.def", "not three sections"),
        ("a..c", "not three sections"),
    ],
)
def test_tokens_the_keys_do_not_verify_are_refused(token: str, why: str) -> None:
    with pytest.raises(InvalidToken, match=why):
        validator().validate(token, NOW_MS)


def test_an_hs256_token_signed_with_the_rsa_public_key_is_refused() -> None:
    # the classic key confusion: HS256 needs an "oct" key, which this set has none of
    pem = jwk(RSA_KEY.public_key(), None)["n"].encode()
    with pytest.raises(InvalidToken, match="no key of the JWKS"):
        validator().validate(sign(GOOD, pem, "HS256"), NOW_MS)


@pytest.mark.parametrize(
    ("claims", "why"),
    [
        ({**GOOD, "exp": NOW_S - 31}, "expired"),  # past the 30 s skew
        ({k: v for k, v in GOOD.items() if k != "exp"}, "no exp claim"),
        ({k: v for k, v in GOOD.items() if k != "iat"}, "no iat claim"),
        ({**GOOD, "exp": "tomorrow"}, "exp claim is not a number"),
        ({**GOOD, "nbf": NOW_S + 31}, "not yet valid"),
        ({k: v for k, v in GOOD.items() if k != "sub"}, "'sub' claim is missing"),
        ({**GOOD, "sub": "  "}, "'sub' claim is missing or blank"),
        ({**GOOD, "sub": 42}, "'sub' claim is not a string"),
        ({**GOOD, "scope": ["read", "read"]}, "repeats 'read'"),
        ({**GOOD, "scope": ["read", 1]}, "blank or non-string"),
        ({**GOOD, "aud": "kafka"}, "sasl.oauthbearer.expected.audience is not set"),
    ],
)
def test_claims_kafka_refuses(claims: dict[str, Any], why: str) -> None:
    with pytest.raises(InvalidToken, match=why):
        validator().validate(sign(claims), NOW_MS)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def sign_raw(header: str, payload: str, key: Any = RSA_KEY) -> str:
    """An RS256 JWS over the header and payload JSON exactly as given."""
    signing_input = f"{b64url(header.encode())}.{b64url(payload.encode())}"
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64url(signature)}"


@pytest.mark.parametrize(
    ("claims", "why"),
    [
        ({**GOOD, "iat": NOW_S + 100}, "exp .* is before iat"),
        ({**GOOD, "nbf": NOW_S + 100}, "exp .* is before nbf"),
        ({**GOOD, "exp": 10**16}, "exp claim is too large"),  # jose4j's ms overflow
    ],
)
def test_times_jose4j_refuses(claims: dict[str, Any], why: str) -> None:
    with pytest.raises(InvalidToken, match=why):
        validator().validate(sign(claims), NOW_MS)


def test_a_repeated_name_in_the_header_or_claims_is_refused_as_jose4j_refuses_it() -> None:
    claims = f'"iat": {NOW_S}, "exp": {NOW_S + 60}'
    good = sign_raw('{"alg":"RS256","kid":"rsa-1"}', f'{{"sub": "alice", {claims}}}')
    assert validator().validate(good, NOW_MS).principal == "alice"
    for header, payload in (
        ('{"alg":"RS256","kid":"rsa-1"}', f'{{"sub": "alice", "sub": "root", {claims}}}'),
        ('{"alg":"none","alg":"RS256","kid":"rsa-1"}', f'{{"sub": "alice", {claims}}}'),
        ('{"alg":"RS256","kid":"rsa-1"}', f'{{"sub": "a", "x": {{"y": 1, "y": 2}}, {claims}}}'),
    ):
        with pytest.raises(InvalidToken, match="Names must be unique"):
            validator().validate(sign_raw(header, payload), NOW_MS)
    with pytest.raises(ValueError, match="Names must be unique"):
        load_jwks('{"keys": [], "keys": []}')


def test_a_nested_jwt_content_type_is_refused() -> None:
    # jose4j would take the payload for an inner JWT (and refuse these claims as one)
    claims = json.dumps(GOOD)
    for cty in ("JWT", "application/jwt"):
        header = f'{{"alg":"RS256","kid":"rsa-1","cty":"{cty}"}}'
        with pytest.raises(InvalidToken, match="nested JWT"):
            validator().validate(sign_raw(header, claims), NOW_MS)


def test_the_key_is_chosen_as_jose4js_verification_jwk_selector_chooses_it() -> None:
    # one candidate by kid and type: used whatever alg the JWK names (jose4j narrows by alg
    # only among several), so a PS256 token verifies with the RS256-labelled key
    assert validator().validate(sign(GOOD, RSA_KEY, "PS256"), NOW_MS).principal == "alice"
    # several kid-less RSA keys: narrowed by alg, then the first
    keys = load_jwks(
        json.dumps(
            {
                "keys": [
                    jwk(OTHER_RSA.public_key(), None, alg="RS384"),
                    jwk(RSA_KEY.public_key(), None, alg="RS256"),
                    jwk(OTHER_RSA.public_key(), None),
                ]
            }
        )
    )
    assert JwtValidator(keys).validate(sign(GOOD, kid=None), NOW_MS).principal == "alice"
    with pytest.raises(InvalidToken, match="Signature verification failed"):  # no retry
        JwtValidator(keys[1:][::-1]).validate(sign(GOOD, kid=None), NOW_MS)
    # several kid-less EC keys: narrowed by curve
    p384 = ec.generate_private_key(ec.SECP384R1()).public_key()
    keys = load_jwks(json.dumps({"keys": [jwk(p384, None), jwk(EC_KEY.public_key(), None)]}))
    token = sign(GOOD, EC_KEY, "ES256", kid=None)
    assert JwtValidator(keys).validate(token, NOW_MS).principal == "alice"
    # key_ops without verify is no candidate
    keys = load_jwks(json.dumps({"keys": [jwk(RSA_KEY.public_key(), "k", key_ops=["sign"])]}))
    with pytest.raises(InvalidToken, match="no key of the JWKS"):
        JwtValidator(keys).validate(sign(GOOD, kid="k"), NOW_MS)


def test_the_clock_skew_allows_a_just_expired_token() -> None:
    late = sign({**GOOD, "iat": NOW_S - 100, "exp": NOW_S - 29})
    assert validator().validate(late, NOW_MS).principal == "alice"
    with pytest.raises(InvalidToken, match="expired"):
        validator(clock_skew_s=0).validate(late, NOW_MS)


def test_audience_and_issuer_when_expected() -> None:
    v = validator(expected_audiences=frozenset({"kafka", "other"}), expected_issuer="https://idp")
    good = {**GOOD, "aud": ["x", "kafka"], "iss": "https://idp"}
    assert v.validate(sign(good), NOW_MS).principal == "alice"
    assert v.validate(sign({**good, "aud": "other"}), NOW_MS).principal == "alice"
    for claims, why in (
        ({**good, "aud": "web"}, r"audience \['web'\] is not one of"),
        ({k: x for k, x in good.items() if k != "aud"}, "no audience"),
        ({**good, "iss": "https://evil"}, "issuer 'https://evil' is not 'https://idp'"),
        ({k: x for k, x in good.items() if k != "iss"}, "no issuer"),
    ):
        with pytest.raises(InvalidToken, match=why):
            v.validate(sign(claims), NOW_MS)


def test_claim_names_are_configurable_and_a_string_scope_is_one_scope() -> None:
    v = validator(sub_claim="client_id", scope_claim="scp")
    claims = {**GOOD, "client_id": " svc ", "scp": "read write"}
    token = v.validate(sign(claims), NOW_MS)
    assert token.principal == "svc" and token.scopes == {"read write"}


def test_a_short_rsa_key_is_refused_as_jose4j_refuses_it() -> None:
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    v = JwtValidator(load_jwks(json.dumps({"keys": [jwk(small.public_key(), "s")]})))
    with pytest.warns(jwt.warnings.InsecureKeyLengthWarning):  # PyJWT signs, warning
        token = sign(GOOD, small, kid="s")
    with pytest.raises(InvalidToken, match="below the minimum"):
        v.validate(token, NOW_MS)


def test_a_document_that_is_not_a_key_set_is_refused() -> None:
    for text in ("[]", '{"keys": 1}', "not json"):
        with pytest.raises(ValueError):
            load_jwks(text)


def first(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def test_the_exchange_answers_invalid_token_then_fails_and_logs_why_not_the_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    s = OAuthBearerServer({}, lambda: NOW_MS, validator())
    bad = sign(GOOD, OTHER_RSA)
    with caplog.at_level("INFO", logger="kafkad.sasl"):
        assert json.loads(s.step(first(bad))) == {"status": "invalid_token"}
    assert "Signature verification failed" in caplog.text and bad not in caplog.text
    with pytest.raises(AuthFailed, match='"status":"invalid_token"'):
        s.step(b"\x01")


def test_an_unsecured_token_is_refused_by_the_signed_validator() -> None:
    unsecured = jwt.encode(GOOD, None, algorithm="none")
    s = OAuthBearerServer({}, lambda: NOW_MS, validator())
    assert json.loads(s.step(first(unsecured))) == {"status": "invalid_token"}


def test_the_tokens_exp_is_the_session_lifetime() -> None:
    settings = SaslSettings("SASL", ("OAUTHBEARER",), {}, 0, 100, {}, validator())
    session = SaslSession(settings, lambda user, mech: None, wall_ms=lambda: NOW_MS)
    session.handshake("OAUTHBEARER", 1, NOW_MS)
    assert session.authenticate(first(sign(GOOD)), NOW_MS) == (b"", 60_000)
    assert str(session.principal) == "User:alice"


def sasl_values(tmp_path: Path, **extra: str) -> dict[str, str]:
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(JWKS))
    return {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        f"listener.name.sasl_plaintext.oauthbearer.{'sasl.server.callback.handler.class'}": (
            VALIDATOR_CLASS
        ),
        "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        **extra,
    }


def load(values: dict[str, str]) -> SaslSettings:
    cfg = load_config(
        listen=None, advertise=None, data_dir=None, config_file=None, overrides=values, environ={}
    )
    assert cfg.values is not None
    return listener_sasl(cfg.values, "SASL_PLAINTEXT")


def test_the_listener_config_builds_the_validator_with_kafkas_override_order(
    tmp_path: Path,
) -> None:
    settings = load(
        sasl_values(
            tmp_path,
            **{
                "sasl.oauthbearer.expected.issuer": "global",
                "listener.name.sasl_plaintext.sasl.oauthbearer.expected.issuer": "listener",
                "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.expected.issuer": "mech",
                "sasl.oauthbearer.expected.audience": "a, b",
                "listener.name.sasl_plaintext.sasl.oauthbearer.clock.skew.seconds": "5",
            },
        )
    )
    v = settings.oauth_validator
    assert v is not None and v.expected_issuer == "mech" and v.clock_skew_s == 5
    assert v.expected_audiences == {"a", "b"} and len(v.keys) == 3
    # without the handler class: Kafka's default, the unsecured validator
    plain = sasl_values(tmp_path)
    del plain["listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"]
    assert load(plain).oauth_validator is None


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (
            {"sasl.oauthbearer.jwks.endpoint.url": "https://idp.example/keys"},
            "reads the JWKS from a file: URL only",
        ),
        ({"sasl.oauthbearer.jwks.endpoint.url": "ftp://x/keys"}, "invalid protocol"),
        ({"sasl.oauthbearer.jwks.endpoint.url": ""}, "jwks.endpoint.url value is required"),
        ({"sasl.oauthbearer.jwks.endpoint.url": "file:///nonexistent/j.json"}, "doesn't exist"),
        (
            {
                "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": (
                    "com.example.MyHandler"
                )
            },
            "cannot load a custom callback handler",
        ),
        (
            {
                "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": (
                    "org.apache.kafka.common.security.oauthbearer.secured."
                    "OAuthBearerValidatorCallbackHandler"
                )
            },
            "removed in Kafka 4.0",
        ),
    ],
)
def test_bad_validator_configs_stop_the_start(
    tmp_path: Path, extra: dict[str, str], why: str
) -> None:
    with pytest.raises(ConfigError, match=why):
        load(sasl_values(tmp_path, **extra))


def test_a_malformed_jwks_file_stops_the_start(tmp_path: Path) -> None:
    values = sasl_values(tmp_path)
    (tmp_path / "jwks.json").write_text("{")
    with pytest.raises(ConfigError, match="is not a JWKS"):
        load(values)


def test_the_session_lifetime_is_the_tokens_time_left_whatever_the_sessions_clock() -> None:
    # the session runs on the broker's monotonic clock (trio's), the token on the wall clock
    settings = SaslSettings("SASL", ("OAUTHBEARER",), {}, 0, 100, {}, validator())
    session = SaslSession(settings, lambda user, mech: None, wall_ms=lambda: NOW_MS)
    session.handshake("OAUTHBEARER", 1, 5_000)
    assert session.authenticate(first(sign(GOOD)), 5_000) == (b"", 60_000)
    assert session.expires_at_ms == 65_000


def test_a_token_expiring_ages_from_now_gets_the_longest_lifetime_an_answer_carries() -> None:
    settings = SaslSettings("SASL", ("OAUTHBEARER",), {}, 0, 100, {}, validator())
    session = SaslSession(settings, lambda user, mech: None, wall_ms=lambda: NOW_MS)
    session.handshake("OAUTHBEARER", 1, 0)
    _, lifetime = session.authenticate(first(sign({**GOOD, "exp": 9 * 10**15})), 0)
    assert lifetime == MAX_SESSION_LIFETIME_MS
    ms64(lifetime)  # encodable


def listener_values(tmp_path: Path) -> dict[str, str]:
    values = sasl_values(tmp_path)
    values["listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"] = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;"
    )
    return values


def wall_token(sub: str, lifetime_s: int) -> str:
    now = int(time.time())
    return sign({"sub": sub, "iat": now, "exp": now + lifetime_s})


async def test_the_token_bounds_the_connection_and_a_fresh_one_renews_it(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # KIP-368 over a real listener: SaslAuthenticate v1 answers the token's time left, the
    # connection closes past it, and re-authenticating with a fresh token extends it
    async with memory_broker(None, **listener_values(tmp_path)) as (_, listener):
        c = RawClient(await listener.connect())  # type: ignore[arg-type]
        assert (await c.request(Hand1(mechanism="OAUTHBEARER"))).error_code == ErrorCode.none
        auth = await c.request(Auth2(auth_bytes=first(wall_token("alice", 60))))
        assert auth.error_code == ErrorCode.none
        assert 58 <= auth.session_lifetime.total_seconds() <= 60
        await trio.sleep(50)
        assert (await c.request(METADATA)).brokers
        assert (await c.request(Hand1(mechanism="OAUTHBEARER"))).error_code == ErrorCode.none
        renewed = await c.request(Auth2(auth_bytes=first(wall_token("alice", 120))))
        assert renewed.error_code == ErrorCode.none
        assert 118 <= renewed.session_lifetime.total_seconds() <= 120
        await trio.sleep(60)  # past the first token's exp, within the second's
        assert (await c.request(METADATA)).brokers
        await trio.sleep(61)
        await c.send_raw(encode_request(METADATA, 99))
        assert await c.read_frame() is None  # the session expired: closed


async def test_reauthenticating_with_another_subjects_token_fails(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with memory_broker(None, **listener_values(tmp_path)) as (_, listener):
        c = RawClient(await listener.connect())  # type: ignore[arg-type]
        await c.request(Hand1(mechanism="OAUTHBEARER"))
        assert (await c.request(Auth2(auth_bytes=first(wall_token("alice", 60))))).error_code == 0
        await trio.sleep(2)
        await c.request(Hand1(mechanism="OAUTHBEARER"))
        refused = await c.request(Auth2(auth_bytes=first(wall_token("bob", 60))))
        assert refused.error_code == ErrorCode.sasl_authentication_failed
        assert "Cannot change principals" in refused.error_message
        assert await closed_at(c) > 0
