"""``coordinator/placement.py``: the key hash's cache stays small whatever keys clients send."""

from __future__ import annotations

import gc
import tracemalloc

from coordinator.placement import java_string_hash, partition_for


def test_long_keys_are_not_kept_by_the_hash_cache() -> None:
    """A transactional id or group id may be 32767 characters; every AddOffsetsToTxn names a
    group (refused or not), so a cache keeping each key seen held ~30 KB per distinct long id
    (2000 requests: 57 MB, up to gigabytes at 65536 entries)."""
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for i in range(100):
            key = f"{i}-" + "g" * 20_000
            assert partition_for(key, 50) == partition_for(key, 50)
            del key
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - before < 500_000


def test_short_keys_hash_alike_cached_or_not() -> None:
    for key in ("bench-txn-0", "", "\ud800", "é" * 300, "x" * 5000):
        assert java_string_hash(key) == java_string_hash(key)
    assert java_string_hash("hello") == 99162322
