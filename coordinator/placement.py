"""Where a key lives in an internal topic: Kafka's ``Utils.abs(key.hashCode()) % partitions``,
with Java's ``String.hashCode`` (over UTF-16 code units, wrapping at 32 bits) and ``Utils.abs``
mapping ``Integer.MIN_VALUE`` to 0. One implementation for both coordinators: a transactional
id on ``__transaction_state`` and a group id on ``__consumer_offsets`` are placed alike."""

from __future__ import annotations

import functools
import struct

__all__ = ["java_string_hash", "partition_for"]

# Keys up to this long are cached: transactional ids and group ids recur on every request. A
# longer one (a Kafka string may be 32767 characters, sent by any client) is hashed each time,
# so the cache holds at most 65536 short keys, not 65536 of whatever clients chose to send.
_CACHED_LENGTH = 256


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units (a lone surrogate is one unit, as a
    Java string may hold one), wrapping at 32 bits (signed)."""
    if len(s) <= _CACHED_LENGTH:
        return _cached_hash(s)
    return _hash(s)


@functools.lru_cache(maxsize=65536)
def _cached_hash(s: str) -> int:
    return _hash(s)


def _hash(s: str) -> int:
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", units):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % numPartitions``."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
