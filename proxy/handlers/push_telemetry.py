"""PushTelemetry (key 72), v0 (flexible; KIP-714): a client's metrics, an OTLP ``MetricsData``
protobuf compressed with the codec it chose. Checks, error codes and what is stored:
``proxy/metrics/telemetry.py``. Off (``kafkad.client.telemetry.enable=false``): not
advertised, answered UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.push_telemetry.v0 import PushTelemetryRequest, PushTelemetryResponse

from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import NO_THROTTLE


@handler(api_key=72, versions=(0, 0), request=PushTelemetryRequest, response=PushTelemetryResponse)
async def push_telemetry(ctx: RequestContext, req: PushTelemetryRequest) -> PushTelemetryResponse:
    store = ctx.broker.client_telemetry
    if not store.enabled:
        code = ErrorCode.unsupported_version
    else:
        code = store.push(
            req.client_instance_id,
            ctx.header.client_id or "",
            int(req.subscription_id),
            bool(req.terminating),
            int(req.compression_type),
            bytes(req.metrics),
            ctx.peer,
        )
    return PushTelemetryResponse(throttle_time=NO_THROTTLE, error_code=code)
