"""Where a key lives in an internal topic: Kafka's ``Utils.abs(key.hashCode()) % partitions``,
with Java's ``String.hashCode`` (over UTF-16 code units, wrapping at 32 bits) and ``Utils.abs``
mapping ``Integer.MIN_VALUE`` to 0. One implementation for both coordinators: a transactional
id on ``__transaction_state`` and a group id on ``__consumer_offsets`` are placed alike."""

from __future__ import annotations

import functools
import struct

__all__ = ["java_string_hash", "partition_for"]


@functools.lru_cache(maxsize=65536)  # transactional ids and group ids recur on every request
def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units (a lone surrogate is one unit, as a
    Java string may hold one), wrapping at 32 bits (signed)."""
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", units):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % numPartitions``."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
