"""How the CLI prints: aligned text tables for people, JSON for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

__all__ = ["emit", "table"]


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns left-aligned and padded to their widest cell; None prints as ``-``."""
    cells = [[("-" if c is None else str(c)) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    lines = [[*headers], *cells]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines
    )


def emit(
    as_json: bool,
    data: Any,
    headers: Sequence[str] = (),
    rows: Sequence[Sequence[Any]] = (),
    out: TextIO | None = None,
) -> None:
    """``data`` as one JSON document, or the table of ``headers`` and ``rows``."""
    out = out or sys.stdout
    if as_json:
        json.dump(data, out, indent=None, sort_keys=False, default=str)
        out.write("\n")
    elif headers:
        out.write(table(headers, rows) + "\n")


def rows_of(items: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[list[Any]]:
    return [[item.get(k) for k in keys] for item in items]
