"""The iteration order of a ``java.util.HashMap``, where Kafka's answers show it.

Kafka builds AlterClientQuotas' results and DescribeClientQuotas' entries from HashMaps, and an
entity's ``toString`` (in error messages) is its HashMap's. A HashMap iterates its table by
bucket (``spread(hash) & (capacity - 1)``), each bucket in insertion order (a resize splits a
bucket keeping that order), so the order follows from the keys' hashes and the final capacity.
Treeified buckets (eight keys in one bucket of a table of 64+) are not modelled.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

from coordinator.placement import java_string_hash

K = TypeVar("K", bound=Hashable)

LOAD_FACTOR = 0.75


def _int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def string_hash(s: str | None) -> int:
    """``String.hashCode`` over UTF-16 code units (``Objects.hashCode``: 0 for null)."""
    return 0 if s is None else java_string_hash(s)


def map_hash(entries: Mapping[str, str | None]) -> int:
    """``AbstractMap.hashCode`` of a String -> String map."""
    return _int32(sum(string_hash(k) ^ string_hash(v) for k, v in entries.items()))


def entity_hash(entries: Mapping[str, str | None]) -> int:
    """``ClientQuotaEntity.hashCode``: ``Objects.hash(entries)``."""
    return _int32(31 + map_hash(entries))


def _table_size_for(n: int) -> int:
    cap = 1
    while cap < n:
        cap <<= 1
    return cap


def final_capacity(initial: int | None, size: int) -> int:
    """The table size after ``size`` distinct keys were put into ``new HashMap<>(initial)``
    (``None``: ``new HashMap<>()``)."""
    cap = 16 if initial is None else _table_size_for(max(initial, 1))
    threshold = int(cap * LOAD_FACTOR)
    for n in range(1, size + 1):
        if n > threshold:
            cap <<= 1
            threshold = int(cap * LOAD_FACTOR)
    return cap


def copy_capacity(size: int) -> int:
    """The initial table of ``new HashMap<>(map)`` for a map of ``size`` (Java 21)."""
    return final_capacity(_table_size_for(math.ceil(size / LOAD_FACTOR)), size) if size else 16


def order(keys: Sequence[K], hashes: Iterable[int], capacity: int) -> list[K]:
    """``keys`` (distinct, in insertion order) in the order a table of ``capacity`` iterates."""
    buckets = [((h ^ ((h & 0xFFFFFFFF) >> 16)) & (capacity - 1)) for h in hashes]
    return [k for _, _, k in sorted(zip(buckets, range(len(keys)), keys, strict=True))]


def string_map_order(keys: Sequence[str], initial: int | None) -> list[str]:
    """The iteration order of ``new HashMap<>(initial)`` after putting ``keys`` in order."""
    distinct = list(dict.fromkeys(keys))
    cap = final_capacity(initial, len(distinct))
    return order(distinct, (string_hash(k) for k in distinct), cap)


def to_string(entries: Sequence[tuple[str, str | None]]) -> str:
    """``AbstractMap.toString`` of entries already in iteration order."""
    return "{" + ", ".join(f"{k}={'null' if v is None else v}" for k, v in entries) + "}"
