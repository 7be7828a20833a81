"""OAUTHBEARER (RFC 7628) with Kafka's unsecured-token validation, for development: Kafka's
``OAuthBearerSaslServer`` with ``OAuthBearerUnsecuredValidatorCallbackHandler`` (what a broker
uses when no validator class is configured), sans-I/O.

The client's one message is ``n,[a=AUTHZID],^Aauth=Bearer TOKEN^A[key=value^A]*^A``. The token
is an unsecured JWS (``alg: none``, an empty signature); its claims must hold the principal
(``unsecuredValidatorPrincipalClaimName``, default ``sub``, a string), an expiry ``exp`` not
past (``unsecuredValidatorAllowableClockSkewMs``), an ``iat`` not in the future if present, and
every scope of ``unsecuredValidatorRequiredScope`` in the scope claim
(``unsecuredValidatorScopeClaimName``, default ``scope``). The options come from the
listener's ``oauthbearer.sasl.jaas.config``. A token that fails is answered with Kafka's JSON
error (``{"status":"invalid_token"}`` or ``insufficient_scope``); the client acknowledges with
``^A`` and the exchange fails with that message. Extensions are accepted and ignored. A
message that is not one (matched whole, with Kafka's ``OAuthBearerClientInitialResponse``
patterns) is Kafka's SaslException (InvalidCredentials): the client sees the generic "invalid
credentials" message, the cause is logged.

The token's expiry bounds the session (KIP-368, ``proxy/sasl/session.py``).

Given a ``JwtValidator`` (a listener whose callback handler is Kafka's
``OAuthBearerValidatorCallbackHandler``), the same exchange validates a signed JWT instead
(``proxy/sasl/oauthbearer_jwt.py``); a refused token is answered
``{"status":"invalid_token"}``, and why is logged (never the token).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from proxy.sasl.mechanisms import OAUTHBEARER, AuthFailed, InvalidCredentials
from proxy.sasl.oauthbearer_jwt import InvalidToken, JwtValidator

log = logging.getLogger("kafkad.sasl")

_SEP = "\x01"
# Kafka's OAuthBearerClientInitialResponse, matched whole: an authzid is a non-empty SASL name
# (ASCII but "," and "=", which are escaped =2C and =3D), an extension's value is not empty
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_FIRST = re.compile(rf"n,(?:a=({_SASLNAME}))?,\x01((?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*)\x01")
_AUTH = re.compile(r"(\w+) +([-_~+/.a-zA-Z0-9]+=*)", re.ASCII)


def _json_error(failure: Mapping[str, str]) -> str:
    """Kafka's OAuthBearerSaslServer.jsonErrorResponse, byte for byte (a space before "scope")."""
    out = f'{{"status":"{failure["status"]}"'
    if "scope" in failure:
        out += f', "scope":"{failure["scope"]}"'
    return out + "}"


def _b64url_json(part: str) -> Any:
    padded = part + "=" * (-len(part) % 4)
    return json.loads(base64.urlsafe_b64decode(padded))


class OAuthBearerServer:
    mechanism = OAUTHBEARER

    def __init__(
        self,
        options: Mapping[str, str],
        now_ms: Callable[[], int] | None = None,
        validator: JwtValidator | None = None,
    ) -> None:
        self._options = options
        self._validator = validator
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._error: str | None = None
        self.complete = False
        self.username: str | None = None
        # the token's exp (wall clock, epoch ms): the session takes it less the wall clock
        # (proxy/sasl/session.py), as Kafka's ReauthInfo takes credentialExpirationMs -
        # time.milliseconds(), its own clock being monotonic
        self.expires_at_ms: int | None = None

    def step(self, token: bytes) -> bytes:
        if token == b"\x01" and self._error is not None:
            raise AuthFailed(self._error)
        self._error = None
        try:
            message = token.decode()
        except UnicodeDecodeError:
            raise InvalidCredentials("Invalid OAUTHBEARER client first message") from None
        m = _FIRST.fullmatch(message)
        if m is None:
            raise InvalidCredentials("Invalid OAUTHBEARER client first message")
        authzid = m.group(1) or ""
        pairs = dict(kv.split("=", 1) for kv in m.group(2).split(_SEP) if kv)
        auth = pairs.get("auth")
        if auth is None:
            raise InvalidCredentials(
                "Invalid OAUTHBEARER client first message: 'auth' not specified"
            )
        am = _AUTH.fullmatch(auth)
        if am is None:
            raise InvalidCredentials(
                "Invalid OAUTHBEARER client first message: invalid 'auth' format"
            )
        if am.group(1).lower() != "bearer":
            raise InvalidCredentials(
                f"Invalid scheme in OAUTHBEARER client first message: {am.group(1)}"
            )
        now = self._now_ms()
        principal, failure, expires = self._validate(am.group(2), now)
        if principal is None:
            self._error = _json_error(failure)
            return self._error.encode()
        if authzid and authzid != principal:
            raise AuthFailed(
                "Authentication failed: Client requested an authorization id "
                f"({authzid}) that is different from the token's principal name ({principal})"
            )
        self.complete, self.username, self.expires_at_ms = True, principal, expires
        return b""

    def _validate(self, jws: str, now: int) -> tuple[str | None, dict[str, str], int | None]:
        if self._validator is not None:
            try:
                token = self._validator.validate(jws, now)
            except InvalidToken as exc:
                log.info("OAUTHBEARER: token refused: %s", exc)
                return None, {"status": "invalid_token"}, None
            return token.principal, {}, token.expires_ms
        return self._unsecured(jws, now)

    def _unsecured(self, jws: str, now: int) -> tuple[str | None, dict[str, str], int | None]:
        invalid = {"status": "invalid_token"}
        parts = jws.split(".")
        if len(parts) != 3 or parts[2] != "":
            return None, invalid, None
        try:
            header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
        except ValueError:
            return None, invalid, None
        if not isinstance(header, dict) or header.get("alg") != "none":
            return None, invalid, None
        if not isinstance(claims, dict):
            return None, invalid, None
        principal = claims.get(self._options.get("unsecuredValidatorPrincipalClaimName", "sub"))
        if not isinstance(principal, str) or not principal:
            return None, invalid, None
        skew = int(self._options.get("unsecuredValidatorAllowableClockSkewMs", "0"))
        # NumericDate seconds, maybe fractional, to whole milliseconds as Kafka's
        # OAuthBearerUnsecuredJws truncates them (a token issued this millisecond is not early)
        exp, iat = claims.get("exp"), claims.get("iat")
        if not isinstance(exp, int | float) or isinstance(exp, bool):
            return None, invalid, None
        exp_ms = int(exp * 1000)
        if now >= exp_ms + skew:
            return None, invalid, None
        if iat is not None:
            if not isinstance(iat, int | float) or isinstance(iat, bool):
                return None, invalid, None
            iat_ms = int(iat * 1000)
            if iat_ms > now + skew or exp_ms <= iat_ms:
                return None, invalid, None
        required = self._options.get("unsecuredValidatorRequiredScope", "").split()
        if required:
            scope = claims.get(self._options.get("unsecuredValidatorScopeClaimName", "scope"))
            have = set(scope.split() if isinstance(scope, str) else scope or [])
            missing = [s for s in required if s not in have]
            if missing:
                # Kafka's OAuthBearerValidationUtils.validateScope: the required list's toString
                scope = f"[{', '.join(required)}]"
                return None, {"status": "insufficient_scope", "scope": scope}, None
        return principal, {}, exp_ms
