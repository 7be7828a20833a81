"""Kafka's ConfigDef number parsing for broker configs: a whole number, and the INT/LONG ranges
(``Range.atLeast``), with the texts kafkad's start-up and IncrementalAlterConfigs errors give.
Its own module so that the config tables of proxy/config.py and proxy/tls.py (which config.py
imports) share one parser."""

from __future__ import annotations

from collections.abc import Callable

from wire.values import LONG_MAX


def whole_number(v: str) -> int:
    try:
        return int(v.strip())
    except ValueError:
        raise ValueError("must be a whole number") from None


def at_least(low: int, high: int = LONG_MAX) -> Callable[[str], int]:
    """Kafka's ``Range.atLeast(low)`` for an INT (high=INT_MAX) or LONG config."""

    def parse(v: str) -> int:
        n = whole_number(v)
        if not low <= n <= high:
            raise ValueError(
                f"must be between {low} and {high}" if n > high else f"must be at least {low}"
            )
        return n

    return parse
