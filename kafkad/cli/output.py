"""How the CLI prints: aligned text tables for people, JSON for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from kafkad.client.errors import ClientError, KafkaError

__all__ = ["emit", "report_deletions", "table"]


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


def report_deletions(
    as_json: bool, noun: str, deleted: Sequence[str], failed: Sequence[tuple[str, KafkaError]]
) -> int:
    """What a delete of several names did, each one, as Kafka's tools report it: the deleted
    and the failed (``{"deleted": [...], "failed": [{noun, "error_code", "message"}]}``);
    then, if any failed, one error line naming every failure (exit 1)."""
    rows = [(name, "deleted") for name in deleted]
    rows += [(name, f"failed: {exc}") for name, exc in failed]
    data = {
        "deleted": list(deleted),
        "failed": [
            {noun: name, "error_code": exc.code, "message": str(exc)} for name, exc in failed
        ],
    }
    emit(as_json, data, (noun.upper(), "OUTCOME"), rows)
    if failed:
        raise ClientError("; ".join(str(exc).rstrip(".") for _, exc in failed))
    return 0
