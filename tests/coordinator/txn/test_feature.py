"""``transaction.version`` update rules (Kafka's FeatureControlManager.updateFeature on one
node) and the API versions that go with each level."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coordinator.txn.feature import UpgradeType, api_version_caps, check_update

E = ErrorCode
U, SAFE, UNSAFE = UpgradeType.UPGRADE, UpgradeType.SAFE_DOWNGRADE, UpgradeType.UNSAFE_DOWNGRADE


@pytest.mark.parametrize(
    "current, new, kind, reason",
    [
        (0, 2, U, None),
        (0, 1, U, None),
        (2, 2, U, None),  # same level: fine
        (2, 2, SAFE, None),
        (2, 0, SAFE, None),
        (2, 1, UNSAFE, None),
        (2, 0, U, "Can't downgrade the version of this feature without setting the upgrade"),
        (0, 2, SAFE, "Can't downgrade to a newer version."),
        (0, 3, U, "Local controller 1 only supports versions 0-2"),
        (0, -1, U, "A feature version cannot be less than 0."),
        (0, 2, UpgradeType.UNKNOWN, "The controller does not support the given upgrade type."),
    ],
)
def test_update_rules(current: int, new: int, kind: int, reason: str | None) -> None:
    code, message = check_update(current, new, kind)
    if reason is None:
        assert (code, message) == (E.none, None)
    else:
        assert code is E.invalid_update_version and message is not None
        assert message.startswith(f"Invalid update version {new} for feature transaction.version.")
        assert reason in message


def test_versions_follow_the_level() -> None:
    assert api_version_caps(0) == api_version_caps(1) == {0: 11, 24: 4, 26: 4, 28: 4}
    assert api_version_caps(2) == {0: 12, 24: 5, 26: 5, 28: 5}
