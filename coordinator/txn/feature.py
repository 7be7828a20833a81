"""The ``transaction.version`` feature: its levels and Kafka's rules for changing it (pure).

Theory of operation
-------------------
Kafka finalizes ``transaction.version`` per cluster (``kafka-storage format --feature``, then
UpdateFeatures / ``kafka-features upgrade|downgrade``). Level 0 is the classic protocol, 1
writes the flexible ``__transaction_state`` value (v1, with the tagged previous/next producer
id and client transaction version), 2 adds the epoch bump on every EndTxn and the partition
added by the produce itself (KIP-890 part 2). ``check_update`` is the decision of Kafka's
``FeatureControlManager.updateFeature`` for this feature on a one-node cluster (the local
controller's supported range is the only one), with its error code and message; nothing here
stores or advertises the level.

``api_version_caps`` are the maximum versions of the four TV2 request types that go with a
finalized level: a client enables TV2 only when it sees the feature finalized at 2 *and*
Produce v12 / TxnOffsetCommit v5 (Java's TransactionManager), and uses EndTxn v5 then; offering
the versions without the level (or the reverse) makes it skip AddPartitionsToTxn and fail, so
ApiVersions must take both from the same level.

Not wired yet: kafkad neither advertises the feature nor serves UpdateFeatures.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from kio.schema.errors import ErrorCode

__all__ = [
    "FEATURE_NAME",
    "MAX_LEVEL",
    "MIN_LEVEL",
    "UpgradeType",
    "api_version_caps",
    "check_update",
]

FEATURE_NAME: Final = "transaction.version"
MIN_LEVEL: Final = 0
MAX_LEVEL: Final = 2  # TV_2, Kafka 4.x's latest production level


class UpgradeType(enum.IntEnum):
    """UpdateFeatures v1+ ``UpgradeType`` (v0's AllowDowngrade maps to SAFE_DOWNGRADE)."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


def check_update(
    current: int, new: int, upgrade_type: int, node_id: int = 1
) -> tuple[ErrorCode, str | None]:
    """Kafka's checks, in its order: the upgrade type is known; the level is not negative;
    the local controller supports it; a lower level needs a downgrade type, a higher one the
    upgrade type (the same level passes either way). Failures are INVALID_UPDATE_VERSION with
    Kafka's message."""
    if upgrade_type not in (
        UpgradeType.UPGRADE,
        UpgradeType.SAFE_DOWNGRADE,
        UpgradeType.UNSAFE_DOWNGRADE,
    ):
        return _invalid(new, "The controller does not support the given upgrade type.")
    if new < 0:
        return _invalid(new, "A feature version cannot be less than 0.")
    if not MIN_LEVEL <= new <= MAX_LEVEL:
        return _invalid(new, f"Local controller {node_id} only supports versions 0-{MAX_LEVEL}")
    if new < current and upgrade_type == UpgradeType.UPGRADE:
        return _invalid(
            new,
            "Can't downgrade the version of this feature without setting the upgrade type to"
            " either safe or unsafe downgrade.",
        )
    if new > current and upgrade_type != UpgradeType.UPGRADE:
        return _invalid(new, "Can't downgrade to a newer version.")
    return ErrorCode.none, None


def _invalid(new: int, reason: str) -> tuple[ErrorCode, str]:
    return (
        ErrorCode.invalid_update_version,
        f"Invalid update version {new} for feature {FEATURE_NAME}. {reason}",
    )


# api key -> (max version below level 2, max version at level 2)
_TV2_VERSIONS: Final = MappingProxyType(
    {
        0: (11, 12),  # Produce v12: the first transactional batch adds the partition
        24: (4, 5),  # AddPartitionsToTxn v5: the broker's add on a TV2 producer's behalf
        26: (4, 5),  # EndTxn v5: epoch bump, producer id and epoch in the response
        28: (4, 5),  # TxnOffsetCommit v5: the offsets partition added implicitly
    }
)


def api_version_caps(level: int) -> Mapping[int, int]:
    """Maximum versions of the TV2 request types consistent with ``level``."""
    return MappingProxyType({key: pair[level >= 2] for key, pair in _TV2_VERSIONS.items()})
