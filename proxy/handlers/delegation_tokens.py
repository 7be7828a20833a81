"""CreateDelegationToken (38, v1-3), RenewDelegationToken (39, v1-2), ExpireDelegationToken
(40, v1-2), DescribeDelegationToken (41, v1-3): KIP-48 delegation tokens, as a combined
broker + controller answers them (``KafkaApis`` then ``ControllerApis`` then
``DelegationTokenControlManager``; the rules in ``proxy/delegation/tokens.py``).

Versions: v2 is the first flexible one; Create v3 and Describe v3 add the token requester
(KIP-373: creating a token owned by another user).

First, on the broker, each is refused DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (timestamps -1) on
a PLAINTEXT listener, on an SSL one without a client certificate, or on a connection that
authenticated with a token. Create then needs, for an owner other than the requester,
CREATE_TOKENS on the USER resource named ``User:<owner>`` (else
DELEGATION_TOKEN_AUTHORIZATION_FAILED), and a ``User`` type for every renewer
(INVALID_PRINCIPAL_TYPE); those answers carry timestamps -1, an empty id and HMAC. The
controller's own failures (DELEGATION_TOKEN_AUTH_DISABLED, ...) carry timestamps 0, as its
response data defaults them. Describe answers DELEGATION_TOKEN_AUTH_DISABLED itself, and shows
tokens per DESCRIBE on DELEGATION_TOKEN or DESCRIBE_TOKENS on the owner's USER resource.
Every change is durable before the answer.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from kio._kio_native import tz_aware_from_i64
from kio.schema.create_delegation_token.v3.request import CreateDelegationTokenRequest
from kio.schema.create_delegation_token.v3.response import CreateDelegationTokenResponse
from kio.schema.describe_delegation_token.v3.request import DescribeDelegationTokenRequest
from kio.schema.describe_delegation_token.v3.response import (
    DescribedDelegationToken,
    DescribedDelegationTokenRenewer,
    DescribeDelegationTokenResponse,
)
from kio.schema.errors import ErrorCode
from kio.schema.expire_delegation_token.v2.request import ExpireDelegationTokenRequest
from kio.schema.expire_delegation_token.v2.response import ExpireDelegationTokenResponse
from kio.schema.renew_delegation_token.v2.request import RenewDelegationTokenRequest
from kio.schema.renew_delegation_token.v2.response import RenewDelegationTokenResponse
from kio.static.primitive import TZAware, i64

from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.delegation import tokens as rules
from proxy.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from proxy.registry import handler
from wire.values import NO_THROTTLE, millis


def _ts(ms: int) -> TZAware:
    return tz_aware_from_i64(i64(ms))


def allow_token_requests(ctx: RequestContext) -> bool:
    """Kafka's ``KafkaApis.allowTokenRequests``."""
    if ctx.session is not None and ctx.session.token_authenticated:
        return False
    name = ctx.listener or ctx.broker.first_listener
    protocol = next((e.protocol for e in ctx.broker.endpoints if e.name == name), "PLAINTEXT")
    if protocol == "PLAINTEXT":
        return False
    return not (protocol == "SSL" and ctx.principal == ANONYMOUS)


def _create_reply(
    code: ErrorCode,
    owner: KafkaPrincipal,
    requester: KafkaPrincipal,
    at: int = -1,
) -> CreateDelegationTokenResponse:
    return CreateDelegationTokenResponse(
        error_code=code,
        principal_type=owner.principal_type,
        principal_name=owner.name,
        token_requester_principal_type=requester.principal_type,
        token_requester_principal_name=requester.name,
        issue_timestamp=_ts(at),
        expiry_timestamp=_ts(at),
        max_timestamp=_ts(at),
        token_id="",
        hmac=b"",
        throttle_time=NO_THROTTLE,
    )


def _create_error(
    req: CreateDelegationTokenRequest, code: ErrorCode
) -> CreateDelegationTokenResponse:
    return _create_reply(code, KafkaPrincipal("", ""), KafkaPrincipal("", ""))


@handler(
    api_key=38,
    versions=(1, 3),
    request=CreateDelegationTokenRequest,
    response=CreateDelegationTokenResponse,
    error_reply=_create_error,
)
async def create_delegation_token(
    ctx: RequestContext, req: CreateDelegationTokenRequest
) -> CreateDelegationTokenResponse:
    requester = ctx.principal
    owner = requester
    if req.owner_principal_name:
        if req.owner_principal_type is None:  # Kafka's KafkaPrincipal: a null type throws
            return _create_reply(ErrorCode.unknown_server_error, requester, requester)
        owner = KafkaPrincipal(req.owner_principal_type, req.owner_principal_name)
    renewers = [KafkaPrincipal(r.principal_type, r.principal_name) for r in req.renewers]
    if not allow_token_requests(ctx):
        return _create_reply(ErrorCode.delegation_token_request_not_allowed, owner, requester)
    if owner != requester and not ctx.authorized(
        AclOperation.CREATE_TOKENS, ResourceType.USER, str(owner)
    ):
        return _create_reply(ErrorCode.delegation_token_authorization_failed, owner, requester)
    if any(r.principal_type != USER_TYPE for r in renewers):
        return _create_reply(ErrorCode.invalid_principal_type, owner, requester)
    store = ctx.broker.tokens
    created = rules.create(
        store.settings,
        requester,
        owner,
        renewers,
        millis(req.max_lifetime),
        store.now_ms(),
        lambda: str(uuid.uuid4()),
    )
    if created.token is None:
        return _create_reply(created.code, owner, requester, at=0)
    token = created.token
    await store.apply(put=token)  # durable before the answer
    return CreateDelegationTokenResponse(
        error_code=ErrorCode.none,
        principal_type=owner.principal_type,
        principal_name=owner.name,
        token_requester_principal_type=requester.principal_type,
        token_requester_principal_name=requester.name,
        issue_timestamp=_ts(token.issue_ms),
        expiry_timestamp=_ts(token.expiry_ms),
        max_timestamp=_ts(token.max_ms),
        token_id=token.token_id,
        hmac=store.hmac(token.token_id),
        throttle_time=NO_THROTTLE,
    )


# rules.renew / rules.expire: (settings, token found, principal, period ms, now ms)
_TokenRule = Callable[
    [rules.TokenSettings, rules.Token | None, KafkaPrincipal, int, int], rules.Changed
]


async def _change_token(
    ctx: RequestContext,
    hmac: bytes,
    period_ms: int,
    rule: _TokenRule,
) -> rules.Changed:
    """Renew or expire (``rule``) the token ``hmac`` names, decided under the store's lock
    after any change under way is written, and stored (the token changed, or removed)."""
    store = ctx.broker.tokens

    def decide(_: object) -> tuple[rules.Token | None, list[str], rules.Changed]:
        out = rule(store.settings, store.by_hmac(hmac), ctx.principal, period_ms, store.now_ms())
        return out.token, [out.removed] if out.removed else [], out

    return await store.change(decide)


def _renew_error(req: RenewDelegationTokenRequest, code: ErrorCode) -> RenewDelegationTokenResponse:
    return RenewDelegationTokenResponse(
        error_code=code, expiry_timestamp=_ts(-1), throttle_time=NO_THROTTLE
    )


@handler(
    api_key=39,
    versions=(1, 2),
    request=RenewDelegationTokenRequest,
    response=RenewDelegationTokenResponse,
    error_reply=_renew_error,
)
async def renew_delegation_token(
    ctx: RequestContext, req: RenewDelegationTokenRequest
) -> RenewDelegationTokenResponse:
    if not allow_token_requests(ctx):
        return _renew_error(req, ErrorCode.delegation_token_request_not_allowed)
    out = await _change_token(ctx, req.hmac, millis(req.renew_period), rules.renew)
    return RenewDelegationTokenResponse(
        error_code=out.code, expiry_timestamp=_ts(out.expiry_ms), throttle_time=NO_THROTTLE
    )


def _expire_error(
    req: ExpireDelegationTokenRequest, code: ErrorCode
) -> ExpireDelegationTokenResponse:
    return ExpireDelegationTokenResponse(
        error_code=code, expiry_timestamp=_ts(-1), throttle_time=NO_THROTTLE
    )


@handler(
    api_key=40,
    versions=(1, 2),
    request=ExpireDelegationTokenRequest,
    response=ExpireDelegationTokenResponse,
    error_reply=_expire_error,
)
async def expire_delegation_token(
    ctx: RequestContext, req: ExpireDelegationTokenRequest
) -> ExpireDelegationTokenResponse:
    if not allow_token_requests(ctx):
        return _expire_error(req, ErrorCode.delegation_token_request_not_allowed)
    out = await _change_token(ctx, req.hmac, millis(req.expiry_time_period), rules.expire)
    return ExpireDelegationTokenResponse(
        error_code=out.code, expiry_timestamp=_ts(out.expiry_ms), throttle_time=NO_THROTTLE
    )


def _describe_error(
    req: DescribeDelegationTokenRequest, code: ErrorCode
) -> DescribeDelegationTokenResponse:
    return DescribeDelegationTokenResponse(error_code=code, tokens=(), throttle_time=NO_THROTTLE)


@handler(
    api_key=41,
    versions=(1, 3),
    request=DescribeDelegationTokenRequest,
    response=DescribeDelegationTokenResponse,
    error_reply=_describe_error,
)
async def describe_delegation_token(
    ctx: RequestContext, req: DescribeDelegationTokenRequest
) -> DescribeDelegationTokenResponse:
    if not allow_token_requests(ctx):
        return _describe_error(req, ErrorCode.delegation_token_request_not_allowed)
    store = ctx.broker.tokens
    if not store.settings.enabled:
        return _describe_error(req, ErrorCode.delegation_token_auth_disabled)
    owners = (
        None
        if req.owners is None
        else [KafkaPrincipal(o.principal_type, o.principal_name) for o in req.owners]
    )
    shown = rules.describe(
        store.tokens(),
        ctx.principal,
        owners,
        lambda token_id: ctx.authorized(
            AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token_id
        ),
        lambda owner: ctx.authorized(AclOperation.DESCRIBE_TOKENS, ResourceType.USER, str(owner)),
    )
    return DescribeDelegationTokenResponse(
        error_code=ErrorCode.none,
        tokens=tuple(
            DescribedDelegationToken(
                principal_type=t.owner.principal_type,
                principal_name=t.owner.name,
                token_requester_principal_type=t.requester.principal_type,
                token_requester_principal_name=t.requester.name,
                issue_timestamp=i64(t.issue_ms),
                expiry_timestamp=i64(t.expiry_ms),
                max_timestamp=i64(t.max_ms),
                token_id=t.token_id,
                hmac=store.hmac(t.token_id),
                renewers=tuple(
                    DescribedDelegationTokenRenewer(
                        principal_type=r.principal_type, principal_name=r.name
                    )
                    for r in t.renewers
                ),
            )
            for t in shown
        ),
        throttle_time=NO_THROTTLE,
    )
