"""kio request objects from plain dicts, for whichever version was negotiated.

Requests are written once as nested dicts in the newest shape the client speaks; ``build``
fills the fields of the chosen version's kio class from it: a field the version lacks is
dropped, a field the dict lacks takes kio's default (or None, (), False, 0 where kio has
none), nested entities and tuples of them are built recursively, and ints become
``timedelta`` milliseconds where kio wants one.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
import uuid
from collections.abc import Mapping
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema

__all__ = ["build", "request_class", "response_class"]

_ZERO_UUID = uuid.UUID(int=0)


@cache
def request_class(api_key: int, version: int) -> type[Any]:
    return typing.cast(type[Any], load_request_schema(api_key, version))


@cache
def response_class(api_key: int, version: int) -> type[Any]:
    return typing.cast(type[Any], load_response_schema(api_key, version))


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, _union_type()) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0], True
    return tp, False


def _union_type() -> Any:
    import types

    return types.UnionType


def _convert(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    inner, _ = _strip_optional(tp)
    if typing.get_origin(inner) is tuple:
        (item,) = typing.get_args(inner)[:1]
        if dataclasses.is_dataclass(item):
            return tuple(build(typing.cast(type[Any], item), v) for v in value)
        return tuple(value)
    if dataclasses.is_dataclass(inner) and isinstance(value, Mapping):
        return build(typing.cast(type[Any], inner), value)
    timedelta = isinstance(inner, type) and issubclass(inner, datetime.timedelta)
    if timedelta and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    return value


def _empty(tp: Any) -> Any:
    inner, optional = _strip_optional(tp)
    if optional:
        return None
    if typing.get_origin(inner) is tuple:
        return ()
    if inner is bool:
        return False
    if inner is str:
        return ""
    if inner is uuid.UUID:
        return _ZERO_UUID
    if isinstance(inner, type) and issubclass(inner, datetime.timedelta):
        return datetime.timedelta(0)
    if dataclasses.is_dataclass(inner):
        return build(typing.cast(type[Any], inner), {})
    return 0


def build(cls: type[Any], data: Mapping[str, Any]) -> Any:
    """An instance of kio class ``cls`` from ``data`` (see the module docstring)."""
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kwargs[f.name] = _empty(hints[f.name])
    return cls(**kwargs)
