"""One connection's SASL state, as Kafka's ``SaslServerAuthenticator`` runs it.

Theory of operation::

    VERSIONS_OR_HANDSHAKE --ApiVersions (answered NONE)--> HANDSHAKE
    HANDSHAKE --SaslHandshake(ok)--> AUTHENTICATE
    VERSIONS_OR_HANDSHAKE --SaslHandshake(ok)--> AUTHENTICATE
    AUTHENTICATE --SaslAuthenticate...(exchange complete)--> COMPLETE
    COMPLETE --SaslHandshake (KIP-368 re-authentication)--> AUTHENTICATE (same mechanism,
                                                            same principal at the end)
    any --a refused mechanism, a failed exchange, a request out of turn--> FAILED

Before COMPLETE only ApiVersions (once, first), SaslHandshake and then SaslAuthenticate are
admitted. Anything else fails the session as Kafka's IllegalSaslStateException does (once
SaslAuthenticate is expected, the request is answered with its API's ILLEGAL_SASL_STATE error
reply; before, it is not answered) and the connection is closed
``connection.failed.authentication.delay.ms`` later; a second ApiVersions closes it at once
(Kafka: an IllegalStateException). A failed exchange is answered (SASL_AUTHENTICATION_FAILED
and a message) and closed after the same delay. SaslHandshake v0 means the client sends the
exchange as raw size-prefixed tokens instead of SaslAuthenticate requests (``raw``); a failed
raw exchange gets no answer, only the delayed close.

With ``connections.max.reauth.ms`` > 0, or a credential that expires (an OAUTHBEARER token),
the session lasts until the earlier of the two (SaslAuthenticate v1+ answers it as
``session_lifetime_ms``); a request after that closes the connection, unless it is a
SaslHandshake that begins a re-authentication, as Kafka's Processor closes an expired
session. Re-authentication needs such an expiry and at most one start per second; otherwise
a SaslHandshake on an authenticated connection is answered ILLEGAL_SASL_STATE.

Pure: the caller passes the time (``now_ms``, the connection's monotonic clock); a
credential's expiry (a token's ``exp``) is wall-clock time, read through the ``wall_ms`` the
session is given. ``proxy/connection.py`` acts on what ``route`` answers, the SaslHandshake /
SaslAuthenticate handlers call ``handshake`` and ``authenticate``.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from proxy.principal import USER_TYPE, KafkaPrincipal
from proxy.sasl.mechanisms import (
    OAUTHBEARER,
    PLAIN,
    AuthFailed,
    InvalidCredentials,
    PlainServer,
    ScramCredential,
    ScramServer,
    TokenCredential,
    generic_failure,
)
from proxy.sasl.oauthbearer import OAuthBearerServer
from proxy.sasl.oauthbearer_jwt import JwtValidator
from proxy.sasl.settings import SaslSettings

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
# the longest session_lifetime_ms answered (~146 years): Java clients add the lifetime, in
# nanoseconds, to System.nanoTime() in a long (SaslClientAuthenticator's ReauthInfo), which
# overflows for a token's exp a few centuries away, and kio reads it into a timedelta
MAX_SESSION_LIFETIME_MS = 2**62 // 1_000_000


class State(enum.Enum):
    VERSIONS_OR_HANDSHAKE = "waiting for ApiVersions or SaslHandshake"
    HANDSHAKE = "waiting for SaslHandshake"
    AUTHENTICATE = "authenticating"
    COMPLETE = "authenticated"
    FAILED = "failed"


@dataclass(frozen=True)
class Close:
    reason: str


@dataclass(frozen=True)
class Refuse:
    """The session failed on this request: answer it with its API's ILLEGAL_SASL_STATE error
    reply if ``answer``, then close after ``connection.failed.authentication.delay.ms``."""

    answer: bool


@dataclass(frozen=True)
class Reply:
    """A raw token to send back, size-prefixed (the SaslHandshake v0 exchange)."""

    frame: bytes


DISPATCH = None  # ``route``'s answer for a request the broker handles as any other


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def make_server(
    mechanism: str,
    plain_users: Mapping[str, str],
    scram_lookup: Callable[[str, str], ScramCredential | None],
    oauth_options: Mapping[str, str],
    oauth_validator: JwtValidator | None = None,
    wall_ms: Callable[[], int] = wall_clock_ms,
    token_lookup: Callable[[str, str], TokenCredential | None] | None = None,
) -> PlainServer | ScramServer | OAuthBearerServer:
    """The server side of ``mechanism``'s exchange (``step``, ``complete``, ``username``)."""
    if mechanism == PLAIN:
        return PlainServer(plain_users)
    if mechanism == OAUTHBEARER:
        return OAuthBearerServer(oauth_options, wall_ms, oauth_validator)
    tokens = None if token_lookup is None else (lambda tid: token_lookup(tid, mechanism))
    return ScramServer(mechanism, lambda user: scram_lookup(user, mechanism), tokens)


class SaslSession:
    def __init__(
        self,
        settings: SaslSettings,
        scram_lookup: Callable[[str, str], ScramCredential | None],
        wall_ms: Callable[[], int] = wall_clock_ms,
        token_lookup: Callable[[str, str], TokenCredential | None] | None = None,
    ) -> None:
        self.settings = settings
        self._scram_lookup = scram_lookup
        self._wall_ms = wall_ms
        self._token_lookup = token_lookup  # delegation tokens (SCRAM's tokenauth=true)
        self.token_authenticated = False  # Kafka's KafkaPrincipal.tokenAuthenticated
        self.state = State.VERSIONS_OR_HANDSHAKE
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        self.raw = False
        self.expires_at_ms: int | None = None
        self.failure: str | None = None  # why it failed (logged; never a credential)
        self._server: PlainServer | ScramServer | OAuthBearerServer | None = None
        self._reauth_from: str | None = None  # the mechanism a re-authentication must keep
        self._reauth_started_ms: int | None = None

    @property
    def authenticated(self) -> bool:
        """Authenticated and not re-authenticating: requests up to socket.request.max.bytes;
        before that, up to sasl.server.max.receive.size (Kafka's SaslServerAuthenticator)."""
        return self.state is State.COMPLETE

    @property
    def failed(self) -> bool:
        return self.state is State.FAILED

    def _fail(self, why: str) -> None:
        self.state, self.failure = State.FAILED, why

    def route(self, frame: bytes, now_ms: int) -> Close | Refuse | Reply | None:
        """What to do with the next frame from the client: DISPATCH (None), a raw token's
        reply, refuse it (the session failed), or close the connection at once."""
        if self.state is State.FAILED:
            return Close(f"SASL authentication failed: {self.failure}")
        if self.raw and self.state is State.AUTHENTICATE:
            try:
                out = self.authenticate(frame, now_ms)[0]
            except AuthFailed:
                return Refuse(answer=False)  # Kafka answers nothing on a raw exchange
            return Reply(len(out).to_bytes(4, "big") + out)
        api_key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
        if self.state is State.COMPLETE:
            expired = self.expires_at_ms is not None and now_ms >= self.expires_at_ms
            if expired and not (api_key == SASL_HANDSHAKE and self._may_reauthenticate(now_ms)):
                return Close("SASL session expired (connections.max.reauth.ms)")
            return DISPATCH
        if self.state is State.HANDSHAKE and api_key == API_VERSIONS:
            return Close("SASL: a second ApiVersions request")
        allowed = {
            State.VERSIONS_OR_HANDSHAKE: (API_VERSIONS, SASL_HANDSHAKE),
            State.HANDSHAKE: (SASL_HANDSHAKE,),
            State.AUTHENTICATE: (SASL_AUTHENTICATE,),
        }[self.state]
        if (
            self.state is State.AUTHENTICATE
            and self._reauth_from is not None
            and self._reauth_from != self.mechanism
        ):
            # Kafka's REAUTH_BAD_MECHANISM: the handshake was answered NONE, the next frame
            # fails the re-authentication unanswered (then the delayed close)
            self._fail(
                f"SASL mechanism '{self.mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self._reauth_from}'"
            )
            return Refuse(answer=False)
        if api_key not in allowed:
            answer = self.state is State.AUTHENTICATE
            during = "authentication" if answer else "handshake"
            self._fail(f"Unexpected Kafka request (api key {api_key}) during SASL {during}")
            return Refuse(answer)
        return DISPATCH

    def versions_answered(self) -> None:
        """ApiVersions was answered without an error: only SaslHandshake may follow. (Kafka's
        handleApiVersionsRequest: an ApiVersions of an unknown version, or an invalid one, is
        answered with an error and the client may send another.)"""
        if self.state is State.VERSIONS_OR_HANDSHAKE:
            self.state = State.HANDSHAKE

    def _may_reauthenticate(self, now_ms: int) -> bool:
        """Kafka's KafkaChannel.maybeBeginServerReauthentication: only with a session expiry,
        and at most one start a second."""
        return self.expires_at_ms is not None and (
            self._reauth_started_ms is None or now_ms - self._reauth_started_ms >= 1000
        )

    def handshake(self, mechanism: str, version: int, now_ms: int) -> ErrorCode:
        """SaslHandshake: NONE and the exchange begins, or UNSUPPORTED_SASL_MECHANISM (the
        connection then fails). On an authenticated connection it starts re-authentication
        if ``_may_reauthenticate``; else it is an ordinary request, which Kafka's KafkaApis
        answers ILLEGAL_SASL_STATE."""
        reauth = self.state is State.COMPLETE
        if reauth and not self._may_reauthenticate(now_ms):
            return ErrorCode.illegal_sasl_state
        if mechanism not in self.settings.mechanisms:
            self._fail(f"Unsupported SASL mechanism {mechanism}")
            return ErrorCode.unsupported_sasl_mechanism
        if reauth:
            self._reauth_started_ms = now_ms
            self._reauth_from = self.mechanism
        self.mechanism = mechanism
        self._server = make_server(
            mechanism,
            self.settings.plain_users,
            self._scram_lookup,
            self.settings.oauth_options,
            self.settings.oauth_validator,
            self._wall_ms,
            token_lookup=self._token_lookup,
        )
        self.raw = version == 0 and not reauth
        self.state = State.AUTHENTICATE
        return ErrorCode.none

    def authenticate(self, token: bytes, now_ms: int) -> tuple[bytes, int]:
        """One client token: (the server's token, session lifetime ms once complete, else 0).
        Raises AuthFailed (the session is then FAILED) with the message the client sees."""
        if self.state is not State.AUTHENTICATE or self._server is None:
            raise AuthFailed("SaslAuthenticate request received out of turn")
        reauthenticating = self._reauth_from is not None
        try:
            if self._reauth_from is not None and self._reauth_from != self.mechanism:
                raise AuthFailed(
                    f"SASL mechanism '{self.mechanism}' requested by client is not supported "
                    f"for re-authentication of mechanism '{self._reauth_from}'"
                )
            try:
                out = self._server.step(token)
            except InvalidCredentials as exc:
                self._fail(str(exc))  # the reason, for the log
                raise generic_failure(self.mechanism or "", reauthenticating) from None
        except AuthFailed as exc:
            if not self.failed:
                self._fail(str(exc))
            raise
        if not self._server.complete:
            return out, 0
        assert self._server.username is not None
        principal = KafkaPrincipal(USER_TYPE, self._server.username)
        if self.principal is not None and principal != self.principal:
            old, new = self.principal, principal
            message = (
                "Cannot change principals during re-authentication from "
                f"{old.principal_type}.{old.name}: {new.principal_type}.{new.name}"
            )
            self._fail(message)
            raise AuthFailed(message)
        self.principal = principal
        self.token_authenticated = getattr(self._server, "token_authenticated", False)
        self.state = State.COMPLETE
        self._reauth_from = None
        # Kafka's ReauthInfo: the lifetime is connections.max.reauth.ms, or the credential's
        # own expiry (an OAUTHBEARER token's exp less the wall clock, as ReauthInfo takes
        # credentialExpirationMs - time.milliseconds()), whichever ends first; neither: no
        # expiry. now_ms is the monotonic clock: a token enters by its time left
        max_reauth = self.settings.max_reauth_ms(self.mechanism)
        credential_ends = getattr(self._server, "expires_at_ms", None)
        ends = [] if credential_ends is None else [credential_ends - self._wall_ms()]
        if max_reauth > 0:
            ends.append(max_reauth)
        if not ends:
            self.expires_at_ms = None
            return out, 0
        # a token's exp may be ages away: no further than a SaslAuthenticate answer can say
        lifetime = max(0, min(*ends, MAX_SESSION_LIFETIME_MS))
        self.expires_at_ms = now_ms + lifetime
        return out, lifetime
