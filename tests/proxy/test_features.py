"""The finalized features over the wire: ApiVersions' supported/finalized features and epoch,
``--feature`` at format time, UpdateFeatures v0-2 (Kafka's rules, all or nothing, validate
only, authorization) and the level kept across a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.update_features.v0 import request as uf0
from kio.schema.update_features.v1 import request as uf1
from kio.schema.update_features.v2 import request as uf2

from proxy.cli import _parse_features, build_parser
from proxy.features import parse_feature
from tests.proxy.acl.harness import Op, Type, secured
from tests.proxy.harness import RawClient, connect, running_broker

E = ErrorCode
TV = "transaction.version"
UPGRADE, SAFE, UNSAFE = 1, 2, 3
FAILED = "The update failed for all features since the following feature had an error: "


async def versions(c: RawClient) -> tuple[dict[str, Any], dict[str, int], int]:
    v = await c.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    supported = {f.name: (f.min_version, f.max_version) for f in v.supported_features}
    finalized = {f.name: f.max_version_level for f in v.finalized_features}
    return supported, finalized, v.finalized_features_epoch


def update(*changes: tuple[str, int, int], validate_only: bool = False) -> Any:
    return uf2.UpdateFeaturesRequest(
        feature_updates=tuple(
            uf2.FeatureUpdateKey(feature=n, max_version_level=lvl, upgrade_type=kind)
            for n, lvl, kind in changes
        ),
        validate_only=validate_only,
    )


async def test_a_new_cluster_has_transaction_version_2() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        supported, finalized, epoch = await versions(c)
        assert supported == {TV: (0, 2), "group.version": (0, 1)}
        assert finalized == {TV: 2, "group.version": 1}
        assert epoch == 0
        v = await c.request(
            ApiVersionsRequest(client_software_name="t", client_software_version="1")
        )
        assert {k.api_key: k.max_version for k in v.api_keys}[57] == 2


async def test_below_v4_supported_features_with_a_zero_minimum_are_left_out() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        v = await c.request(ApiVersionsV3(client_software_name="t", client_software_version="1"))
        assert v.supported_features == ()
        assert {f.name: f.max_version_level for f in v.finalized_features} == {
            TV: 2,
            "group.version": 1,
        }


async def test_level_0_is_not_listed_as_finalized() -> None:
    async with running_broker(features={TV: 0}) as (_, port), connect(port) as c:
        supported, finalized, _ = await versions(c)
        assert supported[TV] == (0, 2)
        assert TV not in finalized


async def test_upgrade_and_downgrade_follow_kafkas_rules() -> None:
    async with running_broker(features={TV: 0}) as (server, port), connect(port) as c:
        r = await c.request(update((TV, 2, UPGRADE), validate_only=True))
        assert (r.error_code, r.error_message) == (E.none, None)
        assert (await versions(c))[1:] == ({"group.version": 1}, 0)  # nothing changed
        r = await c.request(update((TV, 2, UPGRADE)))
        assert r.error_code is E.none
        assert (await versions(c))[1:] == ({TV: 2, "group.version": 1}, 1)
        assert server.broker.txns.config.transaction_version == 2
        r = await c.request(update((TV, 1, UPGRADE)))
        assert r.error_code is E.invalid_update_version
        assert r.error_message == (
            FAILED + "Invalid update version 1 for feature transaction.version. Can't downgrade "
            "the version of this feature without setting the upgrade type to either safe or "
            "unsafe downgrade."
        )
        r = await c.request(update((TV, 3, UPGRADE)))
        assert r.error_message == (
            FAILED + "Invalid update version 3 for feature transaction.version. Local "
            "controller 1 only supports versions 0-2"
        )
        r = await c.request(update((TV, 1, SAFE)))
        assert r.error_code is E.none
        assert (await versions(c))[1:] == ({TV: 1, "group.version": 1}, 2)
        assert server.broker.txns.config.transaction_version == 1


async def test_all_or_nothing_and_features_kafkad_does_not_have() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        r = await c.request(update((TV, 0, UNSAFE), ("metadata.version", 27, UPGRADE)))
        assert r.error_code is E.invalid_update_version
        assert r.error_message == (
            FAILED + "Invalid update version 27 for feature metadata.version. Local controller "
            "1 does not support this feature."
        )
        assert (await versions(c))[1:] == ({TV: 2, "group.version": 1}, 0)
        r = await c.request(update(("group.version", 0, SAFE)))
        assert r.error_code is E.invalid_update_version
        assert "group.coordinator.rebalance.protocols" in r.error_message
        r = await c.request(update(("group.version", 1, UPGRADE)))
        assert r.error_code is E.none


async def test_v0_and_v1_list_each_feature() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        r1 = await c.request(
            uf1.UpdateFeaturesRequest(
                feature_updates=(
                    uf1.FeatureUpdateKey(feature=TV, max_version_level=2, upgrade_type=UPGRADE),
                ),
                validate_only=False,
            )
        )
        assert [(x.feature, x.error_code, x.error_message) for x in r1.results] == [
            (TV, E.none, "NONE")
        ]
        # v0's AllowDowngrade is not read (Kafka's controller reads UpgradeType: UPGRADE)
        r0 = await c.request(
            uf0.UpdateFeaturesRequest(
                feature_updates=(
                    uf0.FeatureUpdateKey(feature=TV, max_version_level=0, allow_downgrade=True),
                ),
            )
        )
        assert (r0.error_code, r0.results) == (E.invalid_update_version, ())


async def test_the_level_survives_a_restart_and_format_time_features_are_kept(
    tmp_path: Path,
) -> None:
    data = f"file://{tmp_path}"
    async with running_broker(data, features={TV: 0}) as (_, port), connect(port) as c:
        assert (await c.request(update((TV, 2, UPGRADE)))).error_code is E.none
    # a formatted data dir keeps its levels: --feature only formats a new one
    async with running_broker(data, features={TV: 0}) as (server, port), connect(port) as c:
        assert (await versions(c))[1:] == ({TV: 2, "group.version": 1}, 1)
        assert server.broker.txns.config.transaction_version == 2


async def test_update_features_needs_alter_on_the_cluster() -> None:
    async with secured() as (c, grants, _):
        grants.open = False
        r = await c.request(update((TV, 0, SAFE)))
        assert r.error_code is E.cluster_authorization_failed
        grants.grant(Op.ALTER, Type.CLUSTER)
        assert (await c.request(update((TV, 0, SAFE)))).error_code is E.none


def test_feature_option() -> None:
    assert parse_feature("transaction.version=0") == (TV, 0)
    for bad in ("transaction.version", "transaction.version=3", "group.version=1", "x=1"):
        with pytest.raises(ValueError):
            parse_feature(bad)


def test_the_serve_option_and_its_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKAD_FEATURE", "transaction.version=0")
    args = build_parser().parse_args(["serve"])
    assert _parse_features(args.feature) == {TV: 0}
    args = build_parser().parse_args(["serve", "--feature", "transaction.version=1"])
    assert _parse_features(args.feature) == {TV: 1}  # the last one wins
