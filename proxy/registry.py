"""The handler registry: one entry per API key, with the version range it serves.

Versions are declared only in the ``@handler`` decorator; ApiVersions is answered from this
table, so what kafkad advertises cannot drift from what it implements. The table is complete
once ``proxy.handlers`` is imported (``proxy.dispatch`` does so); reading it before is a bug
and raises, rather than advertising nothing. This module imports no handler: handlers import it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

HandlerFn = Callable[[Any, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Handler:
    api_key: int
    min_version: int
    max_version: int
    fn: HandlerFn
    # Versions below this are advertised but refused (Produce: advertised from 0, served from 3,
    # see spec §1.1 / KAFKA-18659).
    min_served: int | None = None


REGISTRY: dict[int, Handler] = {}


def handler(
    api_key: int, versions: tuple[int, int], *, min_served: int | None = None
) -> Callable[[HandlerFn], HandlerFn]:
    def register(fn: HandlerFn) -> HandlerFn:
        if api_key in REGISTRY:
            raise RuntimeError(f"api key {api_key} registered twice")
        REGISTRY[api_key] = Handler(api_key, versions[0], versions[1], fn, min_served)
        return fn

    return register


def _table() -> dict[int, Handler]:
    if not REGISTRY:
        raise RuntimeError("no handler registered yet: import proxy.handlers first")
    return REGISTRY


def advertised() -> dict[int, tuple[int, int]]:
    """api_key -> (min, max) as ApiVersions reports them."""
    return {k: (h.min_version, h.max_version) for k, h in sorted(_table().items())}


def served() -> dict[int, tuple[int, int]]:
    """api_key -> (min, max) that requests are decoded for."""
    return {
        k: (h.min_served if h.min_served is not None else h.min_version, h.max_version)
        for k, h in sorted(_table().items())
    }
