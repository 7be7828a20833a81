"""OAUTHBEARER's signed-JWT validation (KIP-768): Kafka's ``OAuthBearerValidatorCallbackHandler``
(its ``BrokerJwtValidator``, jose4j underneath), sans-I/O once the keys are loaded.

A listener chooses it with
``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class=`` ``VALIDATOR_CLASS``; the
keys come from a JWKS file named by ``sasl.oauthbearer.jwks.endpoint.url`` (``file:`` URL),
read once at start-up as Kafka's ``JwksFileVerificationKeyResolver`` reads it (a malformed
file stops the broker; a key that cannot be used is skipped, as jose4j's ``JsonWebKeySet``
skips it). Each ``sasl.oauthbearer.*`` name may be given broker-wide, per listener
(``listener.name.<l>.``) or per listener and mechanism (``listener.name.<l>.oauthbearer.``),
the last winning, as Kafka's ``ConfigurationUtils.get`` reads them.

A token is accepted, as jose4j's ``JwtConsumer`` with Kafka's settings accepts it, when

- it is three non-empty dot-separated sections (Kafka's ``SerializedJwt``);
- its header and claims are JSON objects without a repeated member name (jose4j's parser
  refuses one);
- its ``alg`` is a signature algorithm (``none`` is refused: ``DISALLOW_NONE``) and the key
  jose4j's ``VerificationJwkSelector`` picks verifies it: of the keys whose ``kid`` equals the
  header's (when the header has one), whose ``kty`` fits the algorithm, whose ``use`` is absent
  or ``sig`` and whose ``key_ops`` are absent or hold ``verify``, narrowed, only while more than
  one is left, to those whose ``alg`` is absent or the header's, then (EC, OKP) to the
  algorithm's curves; the first left. One key is tried, never each in turn. Keys shorter than
  jose4j allows (RSA < 2048 bits, an HMAC key shorter than its hash) fail;
- ``exp`` and ``iat`` are present numbers, ``exp`` not past, not before ``iat`` nor ``nbf``,
  and ``nbf`` (if present) not ahead, each within ``sasl.oauthbearer.clock.skew.seconds``
  (default 30); an ``exp`` or ``iat`` too large for jose4j's milliseconds is refused;
- ``iss`` equals ``sasl.oauthbearer.expected.issuer`` when that is set;
- ``aud`` holds one of ``sasl.oauthbearer.expected.audience`` when that is set (then ``aud``
  is required); a token with an ``aud`` is refused when no audience is expected, as jose4j
  refuses it;
- the ``sasl.oauthbearer.sub.claim.name`` claim (default ``sub``) is a non-blank string (the
  principal, trimmed), and the ``sasl.oauthbearer.scope.claim.name`` claim (default
  ``scope``), when present, is a string (one scope, not split) or a list of distinct non-blank
  strings.

A refused token is answered ``{"status":"invalid_token"}`` (``proxy/sasl/oauthbearer.py``),
and why is logged without the token. The session lasts until ``exp`` (KIP-368).

Deviations:
- ``http:`` / ``https:`` JWKS endpoints (fetched and refreshed by Kafka's
  ``RefreshingHttpsJwks``) are refused at start-up with a message saying to save the set to a
  file; ``sasl.oauthbearer.jwks.endpoint.refresh.ms`` and ``...retry.backoff[.max].ms`` are
  accepted and unused. The file is not re-read while the broker runs.
- Kafka 4 also requires the JWKS URL to be listed in the JVM system property
  ``org.apache.kafka.sasl.oauthbearer.allowed.urls`` (empty by default), a guard against
  configs that steer a client into reading files or calling URLs (CVE-2025-27817). kafkad has
  no system properties and its URL comes only from the operator's broker config, so it does
  not ask for it; a Kafka 4 broker given the same config needs
  ``-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=<the URL>`` in ``KAFKA_OPTS``.
- Token times are compared in milliseconds (jose4j compares whole seconds).
- A nested JWT (header ``cty: JWT``), which jose4j unwraps and checks layer by layer, is
  refused.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from jwt import PyJWS, PyJWTError
from jwt.algorithms import get_default_algorithms
from jwt.utils import base64url_decode

from wire.values import LONG_MAX

VALIDATOR_CLASS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
UNSECURED_CLASS = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
    "OAuthBearerUnsecuredValidatorCallbackHandler"
)
# Kafka 3.x's deprecated alias, removed in Kafka 4.0
REMOVED_CLASS = (
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler"
)

JWKS_URL = "sasl.oauthbearer.jwks.endpoint.url"
EXPECTED_AUDIENCE = "sasl.oauthbearer.expected.audience"
EXPECTED_ISSUER = "sasl.oauthbearer.expected.issuer"
SCOPE_CLAIM_NAME = "sasl.oauthbearer.scope.claim.name"
SUB_CLAIM_NAME = "sasl.oauthbearer.sub.claim.name"
CLOCK_SKEW_SECONDS = "sasl.oauthbearer.clock.skew.seconds"


def _int(v: str) -> int:
    return int(v)


def _long(v: str) -> int:
    return int(v)


# name -> (parser, default): Kafka's SaslConfigs defaults; each is also read per listener
# (listener.name.<l>.NAME) and per listener and mechanism (listener.name.<l>.oauthbearer.NAME)
OAUTH_CONFIGS: dict[str, tuple[Callable[[str], Any], str]] = {
    JWKS_URL: (str, ""),
    EXPECTED_AUDIENCE: (str, ""),
    EXPECTED_ISSUER: (str, ""),
    SCOPE_CLAIM_NAME: (str, "scope"),
    SUB_CLAIM_NAME: (str, "sub"),
    CLOCK_SKEW_SECONDS: (_int, "30"),
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": (_long, "3600000"),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": (_long, "100"),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": (_long, "10000"),
}

# the key type (and curves) each signature algorithm verifies with
_KTY: Mapping[str, tuple[str, frozenset[str] | None]] = {
    **{f"{f}{n}": ("RSA", None) for f in ("RS", "PS") for n in (256, 384, 512)},
    **{f"HS{n}": ("oct", None) for n in (256, 384, 512)},
    "ES256": ("EC", frozenset({"P-256"})),
    "ES384": ("EC", frozenset({"P-384"})),
    "ES512": ("EC", frozenset({"P-521"})),
    "ES256K": ("EC", frozenset({"secp256k1"})),
    "EdDSA": ("OKP", frozenset({"Ed25519", "Ed448"})),
}
_PARSE_AS = {"RSA": "RS256", "oct": "HS256", "EC": "ES256", "OKP": "EdDSA"}  # from_jwk's class


class InvalidToken(Exception):
    """Why a token was refused (never the token itself)."""


@dataclass(frozen=True)
class VerificationKey:
    kid: str | None
    kty: str
    crv: str | None
    use: str | None
    alg: str | None
    key: Any = field(repr=False)  # a cryptography public key, or bytes for "oct"
    key_ops: tuple[str, ...] | None = None

    def candidate(self, alg: str, kid: str | None) -> bool:
        """jose4j's SimpleJwkFilter for an inbound JWS: the kid (if the header has one),
        the algorithm's key type, use absent or sig, key_ops absent or holding verify."""
        return (
            (kid is None or self.kid == kid)
            and self.kty == _KTY[alg][0]
            and self.use in (None, "sig")
            and (self.key_ops is None or "verify" in self.key_ops)
        )


def select_key(
    keys: tuple[VerificationKey, ...], alg: str, kid: str | None
) -> VerificationKey | None:
    """jose4j's VerificationJwkSelector.select: the candidates, narrowed by alg (absent or
    the header's) only while more than one is left, then by curve for EC/OKP likewise; the
    first left, if any (one key is tried, never each in turn)."""
    found = [k for k in keys if k.candidate(alg, kid)]
    if len(found) > 1:
        found = [k for k in found if k.alg in (None, alg)]
    curves = _KTY[alg][1]
    if len(found) > 1 and curves is not None:
        found = [k for k in found if k.crv is None or k.crv in curves]
    return found[0] if found else None


def _unique_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """jose4j's JSON objects refuse a repeated member name (DupeKeyDisallowingLinkedHashMap)."""
    out: dict[str, Any] = {}
    for name, value in pairs:
        if name in out:
            raise ValueError(f"An entry for {name!r} already exists. Names must be unique.")
        out[name] = value
    return out


def _json(text: str | bytes) -> Any:
    return json.loads(text, object_pairs_hook=_unique_names)


def load_jwks(text: str) -> tuple[VerificationKey, ...]:
    """The usable keys of a JWKS document; ValueError if it is not one."""
    doc = _json(text)
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise ValueError('not a JSON Web Key Set (a JSON object with a "keys" array)')
    keys = []
    for jwk in doc["keys"]:
        if not isinstance(jwk, dict) or jwk.get("kty") not in _PARSE_AS:
            continue
        try:
            key = get_default_algorithms()[_PARSE_AS[jwk["kty"]]].from_jwk(jwk)
        except (PyJWTError, ValueError, TypeError, KeyError):
            continue  # jose4j's JsonWebKeySet skips a key it cannot read
        if hasattr(key, "public_key"):  # a private key's JWK: verify with its public half
            key = key.public_key()
        attrs = {n: jwk.get(n) if isinstance(jwk.get(n), str) else None for n in ("kid", "crv")}
        use, alg, ops = jwk.get("use"), jwk.get("alg"), jwk.get("key_ops")
        keys.append(
            VerificationKey(
                attrs["kid"],
                jwk["kty"],
                attrs["crv"],
                use if isinstance(use, str) else None,
                alg if isinstance(alg, str) else None,
                key,
                tuple(o for o in ops if isinstance(o, str)) if isinstance(ops, list) else None,
            )
        )
    return tuple(keys)


@dataclass(frozen=True)
class ValidToken:
    principal: str
    scopes: frozenset[str]
    expires_ms: int
    issued_at_ms: int


@dataclass(frozen=True)
class JwtValidator:
    keys: tuple[VerificationKey, ...]
    expected_audiences: frozenset[str] = frozenset()
    expected_issuer: str | None = None
    clock_skew_s: int = 30
    scope_claim: str = "scope"
    sub_claim: str = "sub"

    def validate(self, token: str, now_ms: int) -> ValidToken:
        """The token's principal, scopes and times, or InvalidToken saying why not."""
        sections = token.strip().split(".")
        if len(sections) != 3 or not all(s.strip() for s in sections):
            raise InvalidToken("malformed JWT: not three sections (header, payload, signature)")
        jws = PyJWS()
        try:
            header = jws.get_unverified_header(token)
            _json(base64url_decode(sections[0].strip()))  # PyJWT keeps a repeated name's last
        except (PyJWTError, ValueError, RecursionError) as exc:
            raise InvalidToken(f"malformed JWS: {exc}") from None
        alg, kid, cty = header.get("alg"), header.get("kid"), header.get("cty")
        if isinstance(cty, str) and cty.lower() in ("jwt", "application/jwt"):
            # jose4j takes the payload for a nested JWT; kafkad does not unwrap one
            raise InvalidToken("a nested JWT (cty JWT) is not supported")
        if not isinstance(alg, str) or alg not in _KTY:
            raise InvalidToken(f"the JWS algorithm {alg!r} is not allowed")
        key = select_key(self.keys, alg, kid)
        if key is None:
            raise InvalidToken(f"no key of the JWKS verifies alg {alg} with kid {kid!r}")
        try:
            verified = jws.decode_complete(
                token, key.key, algorithms=[alg], options={"enforce_minimum_key_length": True}
            )
            claims = _json(verified["payload"])
        except (PyJWTError, ValueError, RecursionError) as exc:
            raise InvalidToken(f"could not verify the JWS: {exc}") from None
        if not isinstance(claims, dict):
            raise InvalidToken("the JWT's payload is not a JSON object")
        return self._claims(claims, now_ms)

    def _claims(self, claims: Mapping[str, Any], now_ms: int) -> ValidToken:
        skew_ms = self.clock_skew_s * 1000
        exp_ms = _numeric_date(claims, "exp", required=True)
        iat_ms = _numeric_date(claims, "iat", required=True)
        nbf_ms = _numeric_date(claims, "nbf", required=False)
        assert exp_ms is not None and iat_ms is not None
        if now_ms - skew_ms >= exp_ms:
            raise InvalidToken(f"expired: exp {exp_ms} ms is not after now {now_ms} ms - skew")
        if exp_ms < iat_ms:
            raise InvalidToken(f"exp {exp_ms} ms is before iat {iat_ms} ms")
        if nbf_ms is not None and exp_ms < nbf_ms:
            raise InvalidToken(f"exp {exp_ms} ms is before nbf {nbf_ms} ms")
        if nbf_ms is not None and now_ms + skew_ms < nbf_ms:
            raise InvalidToken(f"not yet valid: nbf {nbf_ms} ms is after now {now_ms} ms + skew")
        if self.expected_issuer is not None:
            if "iss" not in claims:
                raise InvalidToken("no issuer (iss) claim")
            if claims["iss"] != self.expected_issuer:
                raise InvalidToken(f"issuer {claims['iss']!r} is not {self.expected_issuer!r}")
        self._audience(claims)
        sub = claims.get(self.sub_claim)
        if sub is not None and not isinstance(sub, str):
            raise InvalidToken(f"the {self.sub_claim!r} claim is not a string")
        if sub is None or not sub.strip():
            raise InvalidToken(f"the {self.sub_claim!r} claim is missing or blank")
        if exp_ms < 0 or iat_ms < 0:
            raise InvalidToken("exp and iat must not be negative")
        return ValidToken(sub.strip(), self._scopes(claims), exp_ms, iat_ms)

    def _audience(self, claims: Mapping[str, Any]) -> None:
        aud = claims.get("aud")
        if aud is None:
            if self.expected_audiences:
                raise InvalidToken("no audience (aud) claim")
            return
        auds = [aud] if isinstance(aud, str) else aud
        if not isinstance(auds, list) or not all(isinstance(a, str) for a in auds):
            raise InvalidToken("the audience (aud) claim is not a string or a list of strings")
        if not self.expected_audiences.intersection(auds):
            raise InvalidToken(
                f"audience {auds} is not one of {sorted(self.expected_audiences)}"
                if self.expected_audiences
                else f"audience {auds} present but sasl.oauthbearer.expected.audience is not set"
            )

    def _scopes(self, claims: Mapping[str, Any]) -> frozenset[str]:
        raw = claims.get(self.scope_claim)
        values = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
        scopes: set[str] = set()
        for s in values:
            if not isinstance(s, str) or not s.strip():
                raise InvalidToken(f"the {self.scope_claim!r} claim holds a blank or non-string")
            if s.strip() in scopes:
                raise InvalidToken(f"the {self.scope_claim!r} claim repeats {s.strip()!r}")
            scopes.add(s.strip())
        return frozenset(scopes)


def _numeric_date(claims: Mapping[str, Any], name: str, *, required: bool) -> int | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise InvalidToken(f"no {name} claim")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidToken(f"the {name} claim is not a number")
    ms = int(value * 1000)
    if abs(ms) > LONG_MAX:  # jose4j's getValueInMillis overflows: Kafka fails the login
        raise InvalidToken(f"the {name} claim is too large to be milliseconds")
    return ms


_PROTOCOL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")


def jwt_validator(get: Callable[[str], Any]) -> JwtValidator:
    """The validator a listener's configs describe (``get(NAME)`` resolves the overrides);
    reads the JWKS file. ValueError says, in Kafka's words where it has them, what is wrong."""
    url = str(get(JWKS_URL)).strip()
    if not url:
        raise ValueError(f"The OAuth configuration option {JWKS_URL} value is required")
    m = _PROTOCOL.match(url)
    protocol = m.group(1).lower() if m else ""
    if protocol in ("http", "https"):
        raise ValueError(
            f"{JWKS_URL}={url}: kafkad reads the JWKS from a file: URL only (it does not fetch "
            "an http(s) JWKS endpoint); save the provider's key set to a file and give "
            "file:///path/to/jwks.json"
        )
    if protocol != "file":
        raise ValueError(
            f"The OAuth configuration option {JWKS_URL} contains a URL ({url}) that contains an "
            f'invalid protocol ({protocol}); only "http", "https", and "file" protocol are '
            "supported"
        )
    path = os.path.abspath(urlsplit(url).path)
    if not os.path.exists(path):
        raise ValueError(
            f"The OAuth configuration option {JWKS_URL} contains a file ({path}) that doesn't exist"
        )
    if os.path.isdir(path):
        raise ValueError(
            f"The OAuth configuration option {JWKS_URL} references a directory ({path}), not a file"
        )
    try:
        with open(path, encoding="utf-8") as f:
            keys = load_jwks(f.read())
    except OSError as exc:
        raise ValueError(f"{JWKS_URL}: cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ValueError(f"{JWKS_URL}: {path} is not a JWKS: {exc}") from None
    audiences = frozenset(a.strip() for a in str(get(EXPECTED_AUDIENCE)).split(",") if a.strip())
    issuer = str(get(EXPECTED_ISSUER)).strip() or None
    names = {}
    for name in (SCOPE_CLAIM_NAME, SUB_CLAIM_NAME):
        names[name] = str(get(name)).strip()
        if not names[name]:
            raise ValueError(f"The OAuth configuration option {name} value is required")
    return JwtValidator(
        keys,
        audiences,
        issuer,
        int(get(CLOCK_SKEW_SECONDS)),
        names[SCOPE_CLAIM_NAME],
        names[SUB_CLAIM_NAME],
    )
