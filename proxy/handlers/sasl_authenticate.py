"""SaslAuthenticate (key 36), v0-2: one token of the SASL exchange (proxy/sasl/session.py).

v1 answers the session lifetime (KIP-368: ``connections.max.reauth.ms``, 0 = no expiry); v2
is flexible. A failed exchange answers SASL_AUTHENTICATION_FAILED with the mechanism's
message (never a credential), and the connection is closed
``connection.failed.authentication.delay.ms`` later. Outside an exchange (a listener without
SASL, an authenticated connection) Kafka's KafkaApis answers ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

import trio
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse

from proxy.context import RequestContext
from proxy.registry import handler
from proxy.sasl.mechanisms import AuthFailed
from proxy.sasl.session import State
from wire.values import ms64


def _answer(
    code: ErrorCode, message: str | None, token: bytes = b"", ms: int = 0
) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=code,
        error_message=message,
        auth_bytes=token,
        session_lifetime=ms64(ms),
    )


@handler(
    api_key=36, versions=(0, 2), request=SaslAuthenticateRequest, response=SaslAuthenticateResponse
)
async def sasl_authenticate(
    ctx: RequestContext, req: SaslAuthenticateRequest
) -> SaslAuthenticateResponse:
    session = ctx.session
    if session is None or session.state is not State.AUTHENTICATE:
        return _answer(
            ErrorCode.illegal_sasl_state,
            "SaslAuthenticate request received after successful authentication",
        )
    try:
        token, lifetime = session.authenticate(req.auth_bytes, int(trio.current_time() * 1000))
    except AuthFailed as exc:
        return _answer(ErrorCode.sasl_authentication_failed, str(exc))
    return _answer(ErrorCode.none, None, token, lifetime)
