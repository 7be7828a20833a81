"""GetTelemetrySubscriptions (key 71), v0 (flexible; KIP-714): the client's instance id (a
fresh one for the zero id), its subscription id, the metrics to push (kafkad: all, ``"*"``),
the push interval, the accepted compression types, ``telemetry.max.bytes`` and delta
temporality. Semantics and deviations: ``proxy/metrics/telemetry.py``. Off
(``kafkad.client.telemetry.enable=false``): not advertised, answered UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.get_telemetry_subscriptions.v0 import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
)
from kio.static.primitive import i8, i32

from proxy.context import RequestContext
from proxy.metrics.telemetry import ZERO_ID
from proxy.registry import handler
from wire.values import NO_THROTTLE, ms32


@handler(
    api_key=71,
    versions=(0, 0),
    request=GetTelemetrySubscriptionsRequest,
    response=GetTelemetrySubscriptionsResponse,
)
async def get_telemetry_subscriptions(
    ctx: RequestContext, req: GetTelemetrySubscriptionsRequest
) -> GetTelemetrySubscriptionsResponse:
    store = ctx.broker.client_telemetry
    if not store.enabled:
        sub = None
        code = ErrorCode.unsupported_version
    else:
        sub = store.get_subscription(req.client_instance_id, ctx.header.client_id or "", ctx.peer)
        code = sub.error
    if sub is None or code is not ErrorCode.none:
        return GetTelemetrySubscriptionsResponse(
            throttle_time=NO_THROTTLE,
            error_code=code,
            client_instance_id=ZERO_ID,
            subscription_id=i32(0),
            push_interval=NO_THROTTLE,
            telemetry_max_bytes=i32(0),
            delta_temporality=False,
        )
    return GetTelemetrySubscriptionsResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        client_instance_id=sub.instance_id,
        subscription_id=i32(sub.subscription_id),
        accepted_compression_types=tuple(i8(c) for c in sub.compression),
        push_interval=ms32(sub.push_interval_ms),
        telemetry_max_bytes=i32(sub.max_bytes),
        delta_temporality=True,
        requested_metrics=sub.metrics,
    )
