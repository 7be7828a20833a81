"""UpdateFeatures (key 57), v0-2 (flexible): finalize feature levels (KIP-584, KIP-1022), as
Kafka 4.x's controller does (``QuorumController.updateFeatures``,
``FeatureControlManager.updateFeatures``). v1 adds UpgradeType and ValidateOnly; v2 answers
without the per-feature results.

Needs ALTER on the cluster (Kafka's ``ControllerApis.handleUpdateFeatures``), else the whole
request is CLUSTER_AUTHORIZATION_FAILED. The updates are checked in request order and are all
or nothing: the first failing one answers the request (top level, INVALID_UPDATE_VERSION with
"The update failed for all features since the following feature had an error: " and Kafka's
reason) and nothing changes. ``validate_only`` checks without changing. Otherwise every level
is finalized at once, durably, and the finalized-features epoch grows by one
(``proxy/features.py``). v0/v1 list each feature with NONE when the request succeeded, and no
results when it failed. v0's AllowDowngrade is not read, as in Kafka (its controller reads the
UpgradeType, which v0 requests leave at UPGRADE).

Features (the checks are ``coordinator/txn/feature.check_update``):

- ``transaction.version``: 0-2. A change takes effect for new decisions at once (the
  coordinator's own fences); each transaction keeps the protocol its client chose.
- ``group.version``: supported 0-1 while the consumer protocol is served (else as a feature
  this broker does not have). Deviation: its level follows
  ``group.coordinator.rebalance.protocols``, so only its current level is accepted (a no-op);
  another one is INVALID_UPDATE_VERSION naming the config.
- ``metadata.version`` and any other name: a feature this one-node broker does not have
  (Kafka's reason for a controller without it: "Local controller N does not support this
  feature."). Deviation: Kafka's metadata.version has levels a KRaft cluster can move between.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.update_features.v1.response import UpdatableFeatureResult
from kio.schema.update_features.v2.request import UpdateFeaturesRequest
from kio.schema.update_features.v2.response import UpdateFeaturesResponse

from coordinator.txn.feature import check_update
from proxy.acl.checks import require_cluster
from proxy.acl.model import AclOperation
from proxy.context import RequestContext
from proxy.features import SUPPORTED
from proxy.handlers.api_versions import GROUP_VERSION, features
from proxy.registry import handler
from wire.values import NO_THROTTLE

FAILED_ALL = "The update failed for all features since the following feature had an error: "


def _results(resp: UpdateFeaturesResponse, req: Any, version: int) -> Mapping[str, Any]:
    """v0/v1: each feature asked for, with NONE (Errors.NONE.message()), when all succeeded."""
    if resp.error_code is not ErrorCode.none:
        return {"results": ()}
    return {
        "results": tuple(
            UpdatableFeatureResult(
                feature=u.feature, error_code=ErrorCode.none, error_message="NONE"
            )
            for u in req.feature_updates
        )
    }


def _v0(old: Any, version: int) -> Mapping[str, Any]:
    """v0's AllowDowngrade is not read: the request goes on at UpgradeType's default, UPGRADE."""
    return {}


@handler(
    api_key=57,
    versions=(0, 2),
    request=UpdateFeaturesRequest,
    response=UpdateFeaturesResponse,
    upgrade=_v0,
    downgrade=_results,
)
async def update_features(
    ctx: RequestContext, req: UpdateFeaturesRequest
) -> UpdateFeaturesResponse:
    require_cluster(ctx, AclOperation.ALTER)
    store = ctx.broker.features
    async with store.lock:
        offered = features(ctx)
        node_id = ctx.broker.node_id
        changes: dict[str, int] = {}
        for update in req.feature_updates:
            name, new = update.feature, int(update.max_version_level)
            supported, current = offered.get(name, ((0, 0), 0))
            code, message = check_update(
                current, new, int(update.upgrade_type), node_id, name, supported
            )
            if code is ErrorCode.none and name == GROUP_VERSION and new != current:
                code, message = (
                    ErrorCode.invalid_update_version,
                    f"Invalid update version {new} for feature {name}. kafkad finalizes it "
                    "from group.coordinator.rebalance.protocols (1 while it includes consumer).",
                )
            if code is not ErrorCode.none:
                return UpdateFeaturesResponse(
                    throttle_time=NO_THROTTLE,
                    error_code=code,
                    error_message=FAILED_ALL + str(message),
                )
            if name in SUPPORTED:
                changes[name] = new
        if changes and not req.validate_only:
            await store.change(changes)
    return UpdateFeaturesResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None
    )
