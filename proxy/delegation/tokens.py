"""Delegation tokens (KIP-48, KIP-373), pure: the rules of Kafka's
``DelegationTokenControlManager`` (create, renew, expire, the expiry sweep) and of
``DelegationTokenManager.filterToken`` (describe), under a clock the caller passes.

A token is an id (a random UUID string), an owner, the principal that asked for it (the
requester: the owner, or another user creating it on the owner's behalf, KIP-373), renewers,
and three times in wall-clock ms: issued, the latest it may ever live to (max), and when it
expires unless renewed (expiry). Its HMAC is HMAC-SHA512 of the id's UTF-8 bytes under
``delegation.token.secret.key``; renew and expire name a token by its HMAC.

- create: off (DELEGATION_TOKEN_AUTH_DISABLED) unless the secret key is set; a renewer that is
  not a ``User`` INVALID_PRINCIPAL_TYPE; max = now + min(``delegation.token.max.lifetime.ms``,
  the request's max lifetime when > 0); expiry = min(max, now +
  ``delegation.token.expiry.time.ms``).
- renew: an unknown HMAC DELEGATION_TOKEN_NOT_FOUND; past max or expiry
  DELEGATION_TOKEN_EXPIRED; neither owner nor renewer DELEGATION_TOKEN_OWNER_MISMATCH; else
  expiry = min(max, now + min(expiry.time.ms, the period asked when > 0)).
- expire: not found, then owner mismatch; a negative period removes the token at once (expiry
  answered = now); else a token past max or expiry DELEGATION_TOKEN_EXPIRED; else expiry =
  min(max, now + period) (which may lengthen it, as in Kafka).
- sweep: every token past its max or expiry is removed (Kafka's controller does it every
  ``delegation.token.expiry.check.interval.ms``); until then an expired token still
  authenticates, with a session that ends at once (``proxy/sasl/session.py``).
- describe: owners None = all, owners empty = none; a token is shown if it matches one of the
  owners asked for (as owner, requester or renewer), and the requester is its owner,
  requester or renewer, or may DESCRIBE the DELEGATION_TOKEN, or DESCRIBE_TOKENS on the owner.
"""

from __future__ import annotations

import hashlib
import hmac as hmac_lib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode

from proxy.principal import USER_TYPE, KafkaPrincipal
from wire.values import LONG_MAX


@dataclass(frozen=True)
class TokenSettings:
    secret_key: str  # "" : the feature is off
    max_lifetime_ms: int = 604_800_000  # delegation.token.max.lifetime.ms
    expiry_time_ms: int = 86_400_000  # delegation.token.expiry.time.ms
    check_interval_ms: int = 3_600_000  # delegation.token.expiry.check.interval.ms

    @property
    def enabled(self) -> bool:
        return bool(self.secret_key)

    @classmethod
    def from_values(cls, values: Mapping[str, object]) -> TokenSettings:
        def num(name: str, default: int) -> int:
            v = values.get(name, default)
            return int(v) if isinstance(v, int | str) else default

        key = values.get("delegation.token.secret.key") or ""
        return cls(
            secret_key=str(key),
            max_lifetime_ms=num("delegation.token.max.lifetime.ms", 604_800_000),
            expiry_time_ms=num("delegation.token.expiry.time.ms", 86_400_000),
            check_interval_ms=num("delegation.token.expiry.check.interval.ms", 3_600_000),
        )


@dataclass(frozen=True)
class Token:
    token_id: str
    owner: KafkaPrincipal
    requester: KafkaPrincipal
    renewers: tuple[KafkaPrincipal, ...]
    issue_ms: int
    max_ms: int
    expiry_ms: int

    def owner_or_renewer(self, p: KafkaPrincipal) -> bool:
        """Kafka's TokenInformation.ownerOrRenewer (the requester counts too)."""
        return p == self.owner or p == self.requester or p in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_ms < now_ms or self.expiry_ms < now_ms


def token_hmac(token_id: str, secret_key: str) -> bytes:
    return hmac_lib.new(secret_key.encode(), token_id.encode(), hashlib.sha512).digest()


def _sum(now: int, duration: int) -> int:
    return LONG_MAX if now > LONG_MAX - duration else now + duration


@dataclass(frozen=True)
class Created:
    code: ErrorCode
    token: Token | None = None


def create(
    settings: TokenSettings,
    requester: KafkaPrincipal,
    owner: KafkaPrincipal,
    renewers: Sequence[KafkaPrincipal],
    max_lifetime_ms: int,
    now_ms: int,
    new_id: Callable[[], str],
) -> Created:
    """The controller's part (the handler checks first whether the request is allowed and,
    for another owner, CREATE_TOKENS)."""
    if not settings.enabled:
        return Created(ErrorCode.delegation_token_auth_disabled)
    if any(r.principal_type != USER_TYPE for r in renewers):
        return Created(ErrorCode.invalid_principal_type)
    lifetime = settings.max_lifetime_ms
    if max_lifetime_ms > 0:
        lifetime = min(lifetime, max_lifetime_ms)
    max_ms = _sum(now_ms, lifetime)
    expiry_ms = min(max_ms, _sum(now_ms, settings.expiry_time_ms))
    token = Token(new_id(), owner, requester, tuple(renewers), now_ms, max_ms, expiry_ms)
    return Created(ErrorCode.none, token)


@dataclass(frozen=True)
class Changed:
    """A renew or expire: the code, the expiry answered (0 when failed, as the controller's
    response data defaults it), and what to store: the token changed, or removed."""

    code: ErrorCode
    expiry_ms: int = 0
    token: Token | None = None
    removed: str | None = None  # a token id


def renew(
    settings: TokenSettings,
    found: Token | None,
    principal: KafkaPrincipal,
    renew_period_ms: int,
    now_ms: int,
) -> Changed:
    if not settings.enabled:
        return Changed(ErrorCode.delegation_token_auth_disabled)
    if found is None:
        return Changed(ErrorCode.delegation_token_not_found)
    if found.expired(now_ms):
        return Changed(ErrorCode.delegation_token_expired)
    if principal != found.owner and principal not in found.renewers:
        return Changed(ErrorCode.delegation_token_owner_mismatch)
    period = settings.expiry_time_ms
    if renew_period_ms > 0:
        period = min(period, renew_period_ms)
    expiry = min(found.max_ms, now_ms + period)
    return Changed(ErrorCode.none, expiry, replace(found, expiry_ms=expiry))


def expire(
    settings: TokenSettings,
    found: Token | None,
    principal: KafkaPrincipal,
    period_ms: int,
    now_ms: int,
) -> Changed:
    if not settings.enabled:
        return Changed(ErrorCode.delegation_token_auth_disabled)
    if found is None:
        return Changed(ErrorCode.delegation_token_not_found)
    if principal != found.owner and principal not in found.renewers:
        return Changed(ErrorCode.delegation_token_owner_mismatch)
    if period_ms < 0:
        return Changed(ErrorCode.none, now_ms, removed=found.token_id)
    if found.expired(now_ms):
        return Changed(ErrorCode.delegation_token_expired)
    expiry = min(found.max_ms, _sum(now_ms, period_ms))
    return Changed(ErrorCode.none, expiry, replace(found, expiry_ms=expiry))


def sweep(tokens: Sequence[Token], now_ms: int) -> list[str]:
    """The ids of the tokens the expiry check removes."""
    return [t.token_id for t in tokens if t.expired(now_ms)]


def describe(
    tokens: Sequence[Token],
    requester: KafkaPrincipal,
    owners: Sequence[KafkaPrincipal] | None,
    may_describe_token: Callable[[str], bool],
    may_describe_owner: Callable[[KafkaPrincipal], bool],
) -> list[Token]:
    if owners is not None and not owners:
        return []
    out = []
    for t in tokens:
        if owners is not None and not any(t.owner_or_renewer(o) for o in owners):
            continue
        if (
            t.owner_or_renewer(requester)
            or may_describe_token(t.token_id)
            or may_describe_owner(t.owner)
        ):
            out.append(t)
    return out
