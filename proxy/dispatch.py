"""From a request frame to a response frame.

Protocol violations (undecodable frames, unknown APIs, versions we do not serve) raise
``wire.errors.ProtocolError``: the connection logs it and closes, as Kafka does. The one
exception is ApiVersions at a version we do not know, answered per KIP-511. A bug in a
handler costs that one request: it is logged and answered with UNKNOWN_SERVER_ERROR in the
API's own response shape; the connection and the broker carry on.
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from proxy.broker import Broker
from proxy.context import RequestContext
from proxy.error_replies import error_reply
from proxy.registry import REGISTRY, advertised, served
from wire.codec import (
    api_versions_fallback,
    decode_request,
    encode_response,
)
from wire.errors import UnsupportedVersion

log = logging.getLogger("kafkad.dispatch")

API_VERSIONS_KEY = 18
NO_RESPONSE = object()  # a handler's answer when Kafka sends none (Produce with acks=0)


class CloseConnection(Exception):
    """Raised by a handler that must close the connection without answering: Kafka does this
    for a failed acks=0 produce, so the client notices and refreshes its metadata."""


class Dispatcher:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.advertised = advertised()
        self.served = served()

    async def handle(self, frame: bytes, peer: str = "") -> bytes | None:
        try:
            header, body = decode_request(frame, self.served)
        except UnsupportedVersion as exc:
            hdr = exc.header
            if hdr is not None and hdr.api_key == API_VERSIONS_KEY:
                return api_versions_fallback(hdr, self.advertised)
            raise
        log.debug(
            "request %s v%d corr=%d client=%s",
            header.api_key,
            header.api_version,
            header.correlation_id,
            header.client_id,
        )
        ctx = RequestContext(header, self.broker, peer)
        try:
            response = await REGISTRY[header.api_key].fn(ctx, body)
        except CloseConnection:
            raise
        except Exception:
            log.exception(
                "handler for api %d v%d failed (client %s, corr %d)",
                header.api_key,
                header.api_version,
                header.client_id,
                header.correlation_id,
            )
            response = error_reply(header, body, ErrorCode.unknown_server_error)
        if response is NO_RESPONSE:
            return None
        return encode_response(header, response)
