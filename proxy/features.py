"""The cluster's finalized features (KIP-584/KIP-1022), kept durably as Kafka keeps them in its
metadata log: what ApiVersions reports and UpdateFeatures changes.

On-disk format: the broker metadata blob ``finalized-features`` (``Store.write_metadata``:
replaced atomically and fsynced), JSON::

    {"version": 1, "epoch": 3, "levels": {"transaction.version": 2}}

The blob is written at the first start of a data dir (Kafka's ``kafka-storage format``), with
each feature at its default or at the level a ``--feature NAME=LEVEL`` serve option asks for;
later starts keep the stored levels (a differing ``--feature`` is logged and ignored, as
formatting a formatted log dir is refused in Kafka). ``epoch`` is ApiVersions'
``finalized_features_epoch``: it grows by one with every change (Kafka: the metadata offset of
the change), so a client can tell a newer answer from an older one.

Features:

- ``transaction.version`` (``coordinator/txn/feature.py``): 0-2, default 2, the level Kafka
  4.x formats a new cluster with (``Feature.TRANSACTION_VERSION.defaultValue`` of the latest
  production metadata version: TV_2's bootstrap metadata version is 4.0-IV2). A level of 0 is
  stored but not listed as finalized (Kafka's ``ApiVersionsResponse.createFinalizedFeatureKeys``
  leaves out level 0).
- ``group.version``: not stored. Deviation: it follows ``group.coordinator.rebalance.protocols``
  (1 while "consumer" is served, else not offered), so UpdateFeatures can only keep it where it
  is (``proxy/handlers/update_features.py``).
- ``metadata.version``: not offered (a one-node kafkad has no metadata log to version).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Final, Protocol

import trio

from coordinator.txn import feature as txn_feature

__all__ = ["BLOB", "DEFAULTS", "SUPPORTED", "FeatureStore", "parse_feature"]

log = logging.getLogger(__name__)

BLOB: Final = "finalized-features"
# name -> (min, max) this broker supports; group.version only while the consumer protocol is on
SUPPORTED: Final = MappingProxyType(
    {txn_feature.FEATURE_NAME: (txn_feature.MIN_LEVEL, txn_feature.MAX_LEVEL)}
)
DEFAULTS: Final = MappingProxyType({txn_feature.FEATURE_NAME: txn_feature.MAX_LEVEL})


class MetadataStore(Protocol):
    async def read_metadata(self, name: str) -> bytes | None: ...

    async def write_metadata(self, name: str, data: bytes) -> None: ...


def parse_feature(item: str) -> tuple[str, int]:
    """``NAME=LEVEL`` of a ``--feature`` option; ValueError with a one-line reason."""
    name, sep, value = item.partition("=")
    name = name.strip()
    if not sep or not value.strip().lstrip("-").isdigit():
        raise ValueError(f"--feature {item!r}: expected NAME=LEVEL, e.g. transaction.version=2")
    if name not in SUPPORTED:
        raise ValueError(
            f"--feature {item!r}: unknown feature (kafkad sets {', '.join(SUPPORTED)})"
        )
    level = int(value)
    low, high = SUPPORTED[name]
    if not low <= level <= high:
        raise ValueError(f"--feature {item!r}: {name} supports levels {low}-{high}")
    return name, level


def _encode(epoch: int, levels: Mapping[str, int]) -> bytes:
    return json.dumps({"version": 1, "epoch": epoch, "levels": dict(levels)}).encode()


def _decode(data: bytes) -> tuple[int, dict[str, int]]:
    doc = json.loads(data)
    if doc.get("version") != 1:
        raise ValueError(f"{BLOB}: unknown version {doc.get('version')!r}")
    return int(doc["epoch"]), {str(k): int(v) for k, v in doc["levels"].items()}


class FeatureStore:
    def __init__(self, store: MetadataStore, bootstrap: Mapping[str, int] | None = None) -> None:
        self._store = store
        self._bootstrap = dict(bootstrap or {})
        self._levels: dict[str, int] = {**DEFAULTS, **self._bootstrap}
        self.epoch = 0
        self.lock = trio.Lock()  # held across an UpdateFeatures' read-decide-write
        self.listeners: list[Callable[[Mapping[str, int]], None]] = []

    @property
    def levels(self) -> Mapping[str, int]:
        return MappingProxyType(self._levels)

    def level(self, name: str) -> int:
        return self._levels.get(name, 0)

    async def load(self) -> None:
        data = await self._store.read_metadata(BLOB)
        if data is None:  # a new data dir: "format" it with the defaults and --feature levels
            await self._store.write_metadata(BLOB, _encode(self.epoch, self._levels))
        else:
            self.epoch, stored = _decode(data)
            for name, level in self._bootstrap.items():
                if stored.get(name, 0) != level:
                    log.warning(
                        "--feature %s=%d ignored: this data dir has %s finalized at %d (change "
                        "it with UpdateFeatures, e.g. kafka-features.sh upgrade/downgrade)",
                        name,
                        level,
                        name,
                        stored.get(name, 0),
                    )
            self._levels = {**{k: 0 for k in DEFAULTS}, **stored}
        self._tell()

    async def change(self, levels: Mapping[str, int]) -> None:
        """Finalize ``levels`` (a new epoch): durable first, then visible. Callers hold
        ``lock`` around their read-decide-change."""
        new = {**self._levels, **levels}
        await self._store.write_metadata(BLOB, _encode(self.epoch + 1, new))
        self.epoch += 1
        self._levels = new
        self._tell()

    def _tell(self) -> None:
        for listener in self.listeners:
            listener(self.levels)
