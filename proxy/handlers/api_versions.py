"""ApiVersions (key 18), v0-4. v1: throttle time. v3: flexible, client software name and
version in the request. v4: nothing new for the broker. Answered from the handler registry.
An ApiVersions request of an unknown version is answered by the dispatcher (KIP-511).

The KIP-714 telemetry APIs (71, 72) are left out with ``kafkad.client.telemetry.enable=false``,
as Kafka leaves them out without a metrics-receiver plugin.

No ``transaction.version`` feature is advertised: every client uses the classic
transaction protocol (spec §1.1).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from proxy.context import RequestContext
from proxy.registry import advertised, handler

TELEMETRY_KEYS = frozenset({71, 72})


@handler(api_key=18, versions=(0, 4))
async def api_versions(ctx: RequestContext, req: Any) -> Any:
    b = ctx.b
    keys = tuple(
        b.ApiVersion(api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in advertised().items()
        if k not in TELEMETRY_KEYS or ctx.broker.client_telemetry.enabled
    )
    if ctx.version >= 3 and not _valid_software(req):
        return b.ApiVersionsResponse(
            error_code=ErrorCode.invalid_request, api_keys=keys, throttle_time=0
        )
    if ctx.version >= 3:  # KIP-714 telemetry names the instance's software from this
        ctx.broker.client_telemetry.software_seen(
            ctx.peer, req.client_software_name, req.client_software_version
        )
    return b.ApiVersionsResponse(error_code=ErrorCode.none, api_keys=keys, throttle_time=0)


def _valid_software(req: Any) -> bool:
    """Kafka checks client_software_name/version against [a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*...)."""
    import re

    pattern = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")
    return bool(pattern.match(req.client_software_name or "")) and bool(
        pattern.match(req.client_software_version or "")
    )
