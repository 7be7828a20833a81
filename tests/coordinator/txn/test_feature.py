"""``transaction.version`` update rules (Kafka's FeatureControlManager.updateFeature on one
node) and the request versions that speak TV2."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coordinator.txn.feature import UpgradeType, check_update, client_transaction_version

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


def test_the_request_version_chooses_the_protocol() -> None:
    assert [client_transaction_version(0, v) for v in (11, 12, 13)] == [0, 2, 2]
    assert [client_transaction_version(k, v) for k in (26, 28) for v in (4, 5)] == [0, 2] * 2
    # AddPartitionsToTxn v4+ is broker-only: Kafka counts every add from v4 on as TV2
    assert [client_transaction_version(24, v) for v in (3, 4, 5)] == [0, 2, 2]
