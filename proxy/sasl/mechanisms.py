"""The server side of each SASL mechanism kafkad serves, sans-I/O: bytes from the client in,
bytes to the client out; a failure raises ``AuthFailed`` or ``InvalidCredentials``.

As Kafka's SaslServers, a mechanism fails in one of two ways: ``AuthFailed`` (Kafka's
``SaslAuthenticationException``) carries the message the client sees; ``InvalidCredentials``
(Kafka's ``SaslException``) carries a reason for the broker's log only, and the client sees
the generic "Authentication failed during authentication due to invalid credentials with SASL
mechanism M" (proxy/sasl/session.py words it, "re-authentication" when re-authenticating).

- PLAIN (RFC 4616): one client message ``authzid NUL authcid NUL password``, checked against
  the listener's JAAS users (``user_NAME="secret"``); the messages are Kafka's
  ``PlainSaslServer``'s (all shown to the client).
- SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802 / 7677) through ``scramp``: client-first,
  server-first, client-final, server-final, against salted keys (never a password) from the
  credential store. As Kafka's ``ScramSaslServer``: the client's saslname is unescaped
  (``=2C`` is ``,``, ``=3D`` is ``=``); an unknown user, or a credential with too few
  iterations, fails at the client-first message; an authorization id other than the user is
  refused with its own message; the client-final nonce must end with the server-first one;
  anything else (a wrong or undecodable proof, a malformed or out-of-order message) fails
  with the generic message.

SCRAM extensions (RFC 5802 extensions after the nonce) are read as Kafka's
``ScramExtensions``: ``tokenauth=true`` authenticates with a delegation token (KIP-48: the
token id as the user, the base64 of its HMAC as the password; the principal is the token's
owner, and the session ends when the token expires); other extensions are ignored. The
extensions stay part of the AuthMessage the proofs are computed over.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from scramp import ScramException, ScramMechanism

PLAIN = "PLAIN"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
OAUTHBEARER = "OAUTHBEARER"  # proxy/sasl/oauthbearer.py
SERVED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS, OAUTHBEARER)
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations


class AuthFailed(Exception):
    """The exchange failed; ``str(exc)`` is the message the client sees (Kafka's
    SaslAuthenticationException)."""


class InvalidCredentials(Exception):
    """The exchange failed; the client sees only ``generic_failure``'s message, ``str(exc)``
    is for the broker's log and never holds a secret (Kafka's SaslException)."""


@dataclass(frozen=True)
class ScramCredential:
    """What the store keeps per user and mechanism (Kafka's ScramCredential)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True)
class TokenCredential:
    """A delegation token's side of a ``tokenauth=true`` exchange (``proxy/delegation/``):
    its credential for the mechanism, its owner's name, and when it expires (wall-clock ms)."""

    credential: ScramCredential
    owner: str
    expiry_ms: int


def generic_failure(mechanism: str, reauthenticating: bool = False) -> AuthFailed:
    """Kafka's answer to a SaslException (SaslServerAuthenticator.handleSaslToken): it names
    the mechanism, never the cause."""
    during = "re-authentication" if reauthenticating else "authentication"
    return AuthFailed(
        f"Authentication failed during {during} due to invalid credentials with SASL "
        f"mechanism {mechanism}"
    )


class PlainServer:
    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.username: str | None = None

    def step(self, token: bytes) -> bytes:
        if self.complete:
            raise AuthFailed("Authentication failed: the PLAIN exchange is already complete")
        # Kafka's extractTokens: split at most 4 times, so 4 or more NULs count as 4 tokens;
        # bytes that are not UTF-8 decode to U+FFFD, as Java's String(bytes, UTF_8)
        parts = token.decode(errors="replace").split("\0", 4)[:4]
        if len(parts) != 3:
            raise AuthFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, user, password = parts
        if not user:
            raise AuthFailed("Authentication failed: username not specified")
        if not password:
            raise AuthFailed("Authentication failed: password not specified")
        expected = self._users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise AuthFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise AuthFailed(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        self.complete, self.username = True, user
        return b""


class ScramServer:
    """One SCRAM exchange. ``lookup(user)`` gives the user's credential for this mechanism."""

    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str], ScramCredential | None],
        token_lookup: Callable[[str], TokenCredential | None] | None = None,
    ) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._token_lookup = token_lookup
        self._server = ScramMechanism(mechanism).make_server(self._auth_info)
        self._step = 0
        self.complete = False
        self.username: str | None = None
        self._user: str | None = None
        # a delegation token's exchange: the token's owner, and its expiry (wall-clock ms),
        # which ends the session (proxy/sasl/session.py)
        self.token_authenticated = False
        self._token_owner: str | None = None
        self.expires_at_ms: int | None = None

    def _auth_info(self, saslname: str) -> tuple[bytes, bytes, bytes, int]:
        """scramp's callback, inside set_client_first: Kafka's credential lookup (a token's,
        with ``tokenauth=true``: ScramServerCallbackHandler's DelegationTokenCredentialCallback)."""
        user = scram_username(saslname)
        if self.token_authenticated:
            token = None if self._token_lookup is None else self._token_lookup(user)
            if token is None:
                raise InvalidCredentials(f"Token Authentication failed: Invalid tokenId : {user}")
            self._token_owner, self.expires_at_ms = token.owner, token.expiry_ms
            cred: ScramCredential | None = token.credential
        else:
            cred = self._lookup(user)
        if cred is None:
            raise InvalidCredentials("Authentication failed: Invalid user credentials")
        if cred.iterations < MIN_ITERATIONS:
            raise InvalidCredentials(
                f"Iterations {cred.iterations} is less than the minimum {MIN_ITERATIONS} for "
                f"{self.mechanism}"
            )
        self._user = user
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def step(self, token: bytes) -> bytes:
        try:
            message = token.decode()
        except UnicodeDecodeError:
            raise InvalidCredentials("a SCRAM message that is not UTF-8") from None
        try:
            if self._step == 0:
                self._step = 1
                header, bare, extensions = _split_client_first(message)
                self.token_authenticated = extensions.get("tokenauth", "").lower() == "true"
                self._server.set_client_first(header + _without_extensions(bare))
                self._server.client_first_bare = bare  # the AuthMessage has the extensions
                assert self._user is not None
                authzid = _authzid(message)
                if authzid and authzid != self._user:
                    raise AuthFailed(
                        "Authentication failed: Client requested an authorization id that is "
                        "different from username"
                    )
                first: str = self._server.get_server_first()
                return first.encode()
            if self._step == 1:
                self._step = 2
                # Kafka's check; scramp's own looks at the server's half of the nonce only
                if not _attribute(message, "r").endswith(self._server.nonce):
                    raise InvalidCredentials("Invalid client nonce in the final client message.")
                self._server.set_client_final(message)
                final_message: str = self._server.get_server_final()
                final = final_message.encode()
                self.complete = True
                # a token's owner, even "" (an SSL principal may be): never the token id
                self.username = self._token_owner if self.token_authenticated else self._user
                return final
        except (ScramException, ValueError) as exc:  # ValueError: e.g. a proof not in base64
            raise InvalidCredentials(f"Authentication failed: {exc}") from None
        raise InvalidCredentials(f"Unexpected SCRAM message after step {self._step}")


def scram_username(saslname: str) -> str:
    """Kafka's ScramFormatter.username: ``=2C`` is ``,`` and ``=3D`` is ``=``; any other
    ``=`` makes the name invalid."""
    user = saslname.replace("=2C", ",")
    if "=" in user.replace("=3D", ""):
        raise InvalidCredentials("Invalid username")
    return user.replace("=3D", "=")


def _split_client_first(message: str) -> tuple[str, str, dict[str, str]]:
    """(the GS2 header with its trailing comma, client-first-message-bare, its extensions:
    the ``key=value`` attributes after ``n=`` and ``r=``, as Kafka's ScramExtensions)."""
    parts = message.split(",", 2)
    if len(parts) < 3:
        return message, "", {}
    header, bare = f"{parts[0]},{parts[1]},", parts[2]
    attrs = bare.split(",")
    extensions = dict(a.partition("=")[::2] for a in attrs[2:])
    return header, bare, extensions


def _without_extensions(bare: str) -> str:
    return ",".join(bare.split(",")[:2])


def _attribute(message: str, key: str) -> str:
    """The value of ``key=`` in a SCRAM message's comma-separated attributes ("" if none)."""
    for part in message.split(","):
        if part.startswith(f"{key}="):
            return part[len(key) + 1 :]
    return ""


def _authzid(client_first: str) -> str:
    """The ``a=`` of a client-first message's GS2 header ("n,a=alice,n=alice,r=..."), or ""."""
    header = client_first.split(",", 2)
    if len(header) < 2 or not header[1].startswith("a="):
        return ""
    return header[1][2:].replace("=2C", ",").replace("=3D", "=")


def new_credential(
    mechanism: str, password: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """A credential from a password, as Kafka's ScramFormatter makes one: SaltedPassword =
    PBKDF2(UTF-8 password, a random 32-byte salt, iterations), then the stored and server keys
    (RFC 5802)."""
    salt = os.urandom(32) if salt is None else salt
    name = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
    salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)
    return credential(mechanism, salt, salted, iterations)


def credential(
    mechanism: str, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """RFC 5802: StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey =
    HMAC(SaltedPassword, "Server Key")."""
    h = hashlib.sha256 if mechanism == "SCRAM-SHA-256" else hashlib.sha512
    client_key = hmac.new(salted_password, b"Client Key", h).digest()
    server_key = hmac.new(salted_password, b"Server Key", h).digest()
    return ScramCredential(salt, h(client_key).digest(), server_key, iterations)
