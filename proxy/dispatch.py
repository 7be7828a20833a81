"""From a request frame to a response frame.

Protocol violations (undecodable frames, unknown APIs, versions we do not serve) raise
``wire.errors.ProtocolError``: the connection logs it and closes, as Kafka does. The one
exception is ApiVersions at a version we do not know, answered per KIP-511. A bug in a
handler costs that one request: it is logged and answered with UNKNOWN_SERVER_ERROR in the
API's own response shape; the connection and the broker carry on.
"""

from __future__ import annotations

import dataclasses
import logging
import types
import typing
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

from proxy.broker import Broker
from proxy.context import RequestContext
from proxy.registry import REGISTRY, advertised, served
from wire.codec import (
    RequestHeader,
    api_versions_fallback,
    decode_request,
    encode_response,
    response_class,
)
from wire.errors import UnsupportedVersion

log = logging.getLogger("kafkad.dispatch")

API_VERSIONS_KEY = 18
NO_RESPONSE = object()  # a handler's answer when Kafka sends none (Produce with acks=0)


class CloseConnection(Exception):
    """Raised by a handler that must close the connection without answering: Kafka does this
    for a failed acks=0 produce, so the client notices and refreshes its metadata."""


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def error_response(cls: type, code: ErrorCode) -> Any:
    """A response of ``cls`` with every error code set to ``code`` and every list empty."""
    kwargs: dict[str, Any] = {}
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            if f.metadata.get("kafka_type") == "error_code":
                kwargs[f.name] = code
            continue
        kafka_type = f.metadata.get("kafka_type", "")
        hint = hints[f.name]
        if kafka_type == "error_code":
            kwargs[f.name] = code
        elif typing.get_origin(hint) in (types.UnionType, typing.Union) and type(None) in (
            typing.get_args(hint)
        ):
            kwargs[f.name] = None
        elif typing.get_origin(hint) is tuple:
            kwargs[f.name] = ()
        elif kafka_type.startswith("timedelta"):
            import datetime

            kwargs[f.name] = datetime.timedelta(0)
        elif kafka_type in ("string",):
            kwargs[f.name] = ""
        elif kafka_type == "bool":
            kwargs[f.name] = False
        elif kafka_type in ("bytes", "records"):
            kwargs[f.name] = b""
        elif dataclasses.is_dataclass(hint):
            kwargs[f.name] = error_response(hint, code)  # type: ignore[arg-type]
        else:
            kwargs[f.name] = 0
    return cls(**kwargs)


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
            response = self._failure(header)
        if response is NO_RESPONSE:
            return None
        return encode_response(header, response)

    @staticmethod
    def _failure(header: RequestHeader) -> Any:
        return error_response(
            response_class(header.api_key, header.api_version), ErrorCode.unknown_server_error
        )
