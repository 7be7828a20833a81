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

The protocol of a transaction is chosen from its client's request versions, as Kafka chooses
it: ``TV2_FROM`` gives the first version of each request type that speaks TV2 (Kafka's
``AddPartitionsToTxnManager.produceRequestVersionToTransactionSupportedOperation``, the
``ADD_PARTITION`` operation from Produce v12 and TxnOffsetCommit v5, EndTxn v5's epoch
bump, and ``TransactionVersion.transactionVersionForAddPartitionsToTxn``: every add of the
broker-only AddPartitionsToTxn v4+). ApiVersions lists these versions at every level, as
Kafka 4.x does: a Java client uses them only while it sees the feature finalized at 2
(``TransactionManager``), and stops at the version before otherwise.

The stored level lives in ``proxy/features.py``; UpdateFeatures is
``proxy/handlers/update_features.py``.
"""

from __future__ import annotations

import enum
from types import MappingProxyType
from typing import Final

from kio.schema.errors import ErrorCode

__all__ = [
    "FEATURE_NAME",
    "MAX_LEVEL",
    "MIN_LEVEL",
    "TV2_FROM",
    "UpgradeType",
    "check_update",
    "client_transaction_version",
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
    current: int,
    new: int,
    upgrade_type: int,
    node_id: int = 1,
    feature: str = FEATURE_NAME,
    supported: tuple[int, int] = (MIN_LEVEL, MAX_LEVEL),
) -> tuple[ErrorCode, str | None]:
    """Kafka's checks, in its order: the upgrade type is known; the level is not negative;
    the local controller supports it (``supported``: (0, 0) for a feature it does not have);
    a lower level needs a downgrade type, a higher one the upgrade type (the same level passes
    either way). Failures are INVALID_UPDATE_VERSION with Kafka's message."""
    if upgrade_type not in (
        UpgradeType.UPGRADE,
        UpgradeType.SAFE_DOWNGRADE,
        UpgradeType.UNSAFE_DOWNGRADE,
    ):
        return _invalid(feature, new, "The controller does not support the given upgrade type.")
    if new < 0:
        return _invalid(feature, new, "A feature version cannot be less than 0.")
    low, high = supported
    if not low <= new <= high:  # QuorumFeatures.reasonNotSupported, VersionRange.toString
        what = f"Local controller {node_id}"
        span = str(low) if low == high else f"{low}-{high}"
        reason = (
            f"{what} does not support this feature."
            if high == 0
            else f"{what} only supports versions {span}"
        )
        return _invalid(feature, new, reason)
    if new < current and upgrade_type == UpgradeType.UPGRADE:
        return _invalid(
            feature,
            new,
            "Can't downgrade the version of this feature without setting the upgrade type to"
            " either safe or unsafe downgrade.",
        )
    if new > current and upgrade_type != UpgradeType.UPGRADE:
        return _invalid(feature, new, "Can't downgrade to a newer version.")
    return ErrorCode.none, None


def _invalid(feature: str, new: int, reason: str) -> tuple[ErrorCode, str]:
    return (
        ErrorCode.invalid_update_version,
        f"Invalid update version {new} for feature {feature}. {reason}",
    )


# api key -> the first version with which a client speaks transaction version 2
TV2_FROM: Final = MappingProxyType(
    {
        0: 12,  # Produce: the first transactional batch adds the partition
        24: 4,  # AddPartitionsToTxn: a broker's add (transactionVersionForAddPartitionsToTxn)
        26: 5,  # EndTxn: epoch bump, producer id and epoch in the response
        28: 5,  # TxnOffsetCommit: the offsets partition added implicitly
    }
)


def client_transaction_version(api_key: int, version: int) -> int:
    """2 when a request of ``version`` belongs to a TV2 transaction, else 0."""
    return 2 if version >= TV2_FROM[api_key] else 0
