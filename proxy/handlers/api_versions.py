"""ApiVersions (key 18), v0-4. v1: throttle time. v3: flexible, client software name and
version in the request. v4: nothing new for the broker. Answered from the handler registry.
An ApiVersions request of an unknown version is answered by the dispatcher (KIP-511).

The KIP-714 telemetry APIs (71, 72) are left out with ``kafkad.client.telemetry.enable=false``,
as Kafka leaves them out without a metrics-receiver plugin.

Features (``proxy/features.py``): ``transaction.version`` is supported (0-2) and finalized at
the stored level (left out at level 0, as Kafka leaves out a level-0 feature); the epoch is the
store's. While ``group.coordinator.rebalance.protocols`` includes "consumer" (the default, as in
Kafka 4), the ``group.version`` feature is supported (0-1) and finalized at 1 and
ConsumerGroupHeartbeat/ConsumerGroupDescribe (68, 69) are listed; without it neither the feature
nor those APIs are advertised (KIP-848). Below v4 the supported features whose minimum is 0
(both of them) are left out, as Kafka leaves them out (``maybeFilterSupportedFeatureKeys``,
KAFKA-17492: Java clients before 3.9 fail to read a minimum of 0); the finalized ones stay.

The API versions do not depend on ``transaction.version``, as in Kafka 4.x (its
ApiVersionManager lists the same versions at every level): Produce v12+, TxnOffsetCommit v5 and
EndTxn v5 are always listed, and a Java client uses them only when it sees the feature at 2
(``TransactionManager.isTransactionV2Enabled``; below that its request builders stop at the
last version before TV2). The broker follows the version of each request, as Kafka does.
"""

from __future__ import annotations

import dataclasses
import re

from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.api_versions.v4.response import (
    ApiVersion,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i64

from proxy.context import RequestContext
from proxy.features import SUPPORTED
from proxy.registry import advertised, handler
from wire.values import NO_THROTTLE

TELEMETRY_KEYS = frozenset({71, 72})
CONSUMER_GROUP_KEYS = frozenset({68, 69})
GROUP_VERSION = "group.version"
# Kafka's check of client_software_name/version (ApiVersionsRequest.isValid: Pattern.matches,
# the whole string; fullmatch, as "$" would also match before a trailing newline).
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


@handler(api_key=18, versions=(0, 4), request=ApiVersionsRequest, response=ApiVersionsResponse)
async def api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
    consumer = ctx.broker.groups.consumer_protocol_enabled
    keys = tuple(
        ApiVersion(api_key=i16(k), min_version=i16(lo), max_version=i16(hi))
        for k, (lo, hi) in advertised().items()
        if (k not in TELEMETRY_KEYS or ctx.broker.client_telemetry.enabled)
        and (k not in CONSUMER_GROUP_KEYS or consumer)
    )
    if ctx.version >= 3 and not _valid_software(req):
        # Kafka's ApiVersionsRequest.getErrorResponse: no api keys but for UNSUPPORTED_VERSION
        return ApiVersionsResponse(
            error_code=ErrorCode.invalid_request, api_keys=(), throttle_time=NO_THROTTLE
        )
    if ctx.session is not None:  # a SASL listener: now only SaslHandshake may follow
        ctx.session.versions_answered()
    if ctx.version >= 3:  # KIP-714 telemetry names the instance's software from this
        ctx.broker.client_telemetry.software_seen(
            ctx.peer, req.client_software_name, req.client_software_version
        )
    resp = ApiVersionsResponse(error_code=ErrorCode.none, api_keys=keys, throttle_time=NO_THROTTLE)
    return _with_features(resp, features(ctx), ctx.broker.features.epoch, ctx.version >= 4)


def features(ctx: RequestContext) -> dict[str, tuple[tuple[int, int], int]]:
    """name -> ((supported min, max), finalized level): what this broker offers now."""
    offered = {
        name: (supported, ctx.broker.features.level(name)) for name, supported in SUPPORTED.items()
    }
    if ctx.broker.groups.consumer_protocol_enabled:
        offered[GROUP_VERSION] = ((0, 1), 1)
    return offered


def _with_features(
    resp: ApiVersionsResponse,
    offered: dict[str, tuple[tuple[int, int], int]],
    epoch: int,
    zero_minimum: bool,
) -> ApiVersionsResponse:
    return dataclasses.replace(
        resp,
        supported_features=tuple(
            SupportedFeatureKey(name=name, min_version=i16(low), max_version=i16(high))
            for name, ((low, high), _) in offered.items()
            if low != 0 or zero_minimum
        ),
        finalized_features_epoch=i64(epoch),
        finalized_features=tuple(
            FinalizedFeatureKey(
                name=name, max_version_level=i16(level), min_version_level=i16(level)
            )
            for name, (_, level) in offered.items()
            if level != 0
        ),
    )


def _valid_software(req: ApiVersionsRequest) -> bool:
    return bool(_SOFTWARE.fullmatch(req.client_software_name)) and bool(
        _SOFTWARE.fullmatch(req.client_software_version)
    )
