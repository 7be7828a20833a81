"""``open_store(url)``: the backend named by a URL.

``memory://`` (anything after the scheme is ignored) is the in-memory backend. ``file:///abs``
or a plain path is the file backend rooted there; it runs a nursery for background work
(sealing rolled segments) that lives as long as the store. Leaving the context closes the store
(flush, index files, clean-shutdown marker), shielded from cancellation so that a cancelled
broker still shuts its logs down cleanly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from storage.api import Store
from storage.memory import MemoryStore
from storage.segment.datadir import DataDirError
from storage.segment.store import FileStore, open_root


def store_path(url: str) -> Path | None:
    """The directory of a file store URL or path; None for ``memory://``."""
    if url.startswith("memory://"):
        return None
    if url.startswith("file://"):
        return Path(url[len("file://") :])  # file:///abs; file://rel is taken as relative
    if "://" in url:
        raise DataDirError(
            f"unknown store URL scheme in data dir {url!r}: use a directory, file:///path or "
            "memory://"
        )
    return Path(url)


@asynccontextmanager
async def open_store(url: str, *, clock: Callable[[], int] | None = None) -> AsyncIterator[Store]:
    """``clock`` (milliseconds) drives segment ages; tests pass their own."""
    path = store_path(url)
    if path is None:
        memory = MemoryStore(clock)
        try:
            yield memory
        finally:
            await memory.close()
        return
    opened = await open_root(path)
    async with trio.open_nursery() as nursery:
        store = FileStore.from_root(opened, nursery, clock)
        try:
            yield store
        finally:
            with trio.CancelScope(shield=True):
                await store.close()
