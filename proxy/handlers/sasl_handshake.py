"""SaslHandshake (key 17), v0-1: the client names its mechanism (proxy/sasl/session.py).

v0: the exchange that follows is raw size-prefixed tokens; v1: SaslAuthenticate requests. On a
listener without SASL, or once authenticated when re-authentication is not possible (no session
expiry, or one begun less than a second ago), Kafka's KafkaApis answers ILLEGAL_SASL_STATE;
an unserved mechanism is UNSUPPORTED_SASL_MECHANISM with the enabled ones, and the connection
is then closed.
"""

from __future__ import annotations

import trio
from kio.schema.errors import ErrorCode
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from proxy.context import RequestContext
from proxy.registry import handler


@handler(api_key=17, versions=(0, 1), request=SaslHandshakeRequest, response=SaslHandshakeResponse)
async def sasl_handshake(ctx: RequestContext, req: SaslHandshakeRequest) -> SaslHandshakeResponse:
    session = ctx.session
    if session is None:
        return SaslHandshakeResponse(error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    code = session.handshake(req.mechanism, ctx.version, int(trio.current_time() * 1000))
    if code is ErrorCode.illegal_sasl_state:  # KafkaApis' answer: no mechanisms listed
        return SaslHandshakeResponse(error_code=code, mechanisms=())
    return SaslHandshakeResponse(error_code=code, mechanisms=session.settings.mechanisms)
