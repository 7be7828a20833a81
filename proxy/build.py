"""Building kio response entities across versions from one set of keyword arguments.

Handlers describe a response once, with Kafka's field names as kio spells them; ``make``
keeps the fields the target version has, drops the rest, and converts plain millisecond
integers into the ``timedelta``/``datetime`` types kio uses for time fields (a -1 timestamp
becomes null). Missing fields fall back to the schema default, so a handler never needs a
branch per version just to leave a field out.
"""

from __future__ import annotations

import dataclasses
import datetime
from functools import cache
from types import ModuleType
from typing import Any

from kio._kio_native import tz_aware_from_i64
from kio.schema.errors import ErrorCode
from kio.static.primitive import i64


@cache
def _fields(cls: type) -> dict[str, str]:
    return {f.name: f.metadata.get("kafka_type", "") for f in dataclasses.fields(cls)}


def _convert(kafka_type: str, value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        if kafka_type == "error_code" and not isinstance(value, ErrorCode):
            return ErrorCode(value)
        if kafka_type.startswith("timedelta"):
            return datetime.timedelta(milliseconds=value)
        if kafka_type == "datetime_i64":
            return None if value < 0 else tz_aware_from_i64(i64(value))
    return value


def make(cls: type, **kwargs: Any) -> Any:
    fields = _fields(cls)
    return cls(**{k: _convert(fields[k], v) for k, v in kwargs.items() if k in fields})


class Builder:
    """``b.Name(**kw)`` builds class ``Name`` of one kio module (one API version)."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        cls = getattr(self._module, name)
        return lambda **kw: make(cls, **kw)

    def has(self, cls_name: str, field_name: str) -> bool:
        return field_name in _fields(getattr(self._module, cls_name))
