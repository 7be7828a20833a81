"""One request and one response shape per API: kio objects moved between versions.

Handlers are written against the newest version kafkad serves of their API (its kio request
and response classes), as Kafka's handlers are written against one generated message class.
``convert(obj, cls)`` moves a kio object of one version into the class of another:

- a field both versions have is copied; a nested entity (one, optional, or a tuple of them) is
  converted into the target version's nested class, field by field in the same way;
- a field the source version lacks takes the schema default (kio's dataclass default, which
  is Kafka's ``"default"``), or, where the schema gives none, the type's zero value: null for a
  nullable field, an empty list, an empty string, 0, false, a zero duration — what Kafka's
  generated ``Message`` classes hold for a field the version does not carry;
- a null in a field the target version declares non-nullable becomes that zero value.

A field that exists only in older versions (OffsetFetch v1-7's top-level ``topics``,
FindCoordinator v0-3's ``key``, ...) has nowhere to go in the newest class: a handler that
serves such versions says how they map with its own upgrade/downgrade hooks (as Kafka's request
classes do, e.g. ``LeaveGroupRequest.members()``). ``removed_fields`` lists them, so a test can
check that every one is handled.

Plans are built once per (source class, target class) pair; an object already of the target
class is returned as is, so a client speaking the newest version pays nothing.
``error_response(cls, code)`` builds a response with every error code set and every list empty:
the start of every handler's error reply (Kafka's ``AbstractRequest.getErrorResponse``).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import types
import typing
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from kio._kio_native import tz_aware_from_i64
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta, i64, i64Timedelta

T = TypeVar("T")
_Plan = tuple[tuple[str, Callable[[Any], Any] | None], ...]
_MISSING = dataclasses.MISSING


_HINTS: dict[Any, dict[str, Any]] = {}
_FIELDS: dict[Any, dict[str, dataclasses.Field[Any]]] = {}
_CONVERTERS: dict[tuple[Any, Any], Callable[[Any], Any]] = {}


def _hints(cls: Any) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


@functools.cache  # a type hint per field: the conversions of every request ask again
def _unwrap(hint: Any) -> tuple[Any, bool, bool]:
    """(inner type, nullable, is a tuple of inner) of a field's type hint."""
    nullable = False
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(hint))
        hint = args[0]
    if typing.get_origin(hint) is tuple:
        return typing.get_args(hint)[0], nullable, True
    return hint, nullable, False


def zero_value(cls: type, name: str) -> Any:
    """What a field of ``cls`` holds when nothing sets it: its schema default, else its type's
    zero (null where the field is nullable)."""
    field = _fields(cls)[name]
    if field.default is not _MISSING:
        return field.default
    if field.default_factory is not _MISSING:
        return field.default_factory()
    return _zero_of(field, _hints(cls)[name])


def _zero_of(field: dataclasses.Field[Any], hint: Any) -> Any:
    inner, nullable, many = _unwrap(hint)
    if nullable:
        return None
    if many:
        return ()
    kafka_type = field.metadata.get("kafka_type", "")
    if kafka_type == "error_code":
        return ErrorCode.none
    if kafka_type == "timedelta_i32":
        return i32Timedelta.parse(datetime.timedelta(0))
    if kafka_type == "timedelta_i64":
        return i64Timedelta.parse(datetime.timedelta(0))
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "uuid" or inner is uuid.UUID:
        return uuid.UUID(int=0)
    if dataclasses.is_dataclass(inner):
        return _empty(inner)  # type: ignore[arg-type]
    if inner is bool:
        return False
    if inner is str or (isinstance(inner, type) and issubclass(inner, str)):
        return ""
    return 0


def _fields(cls: Any) -> dict[str, dataclasses.Field[Any]]:
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = {f.name: f for f in dataclasses.fields(cls)}
    return fields


def _empty(cls: type[T]) -> T:
    """An entity of ``cls`` with every field at its zero value."""
    return cls(**{name: zero_value(cls, name) for name in _fields(cls)})


def _field_converter(src_hint: Any, dst_field: dataclasses.Field[Any], dst_hint: Any) -> Any:
    """How one field's value moves from the source class to the target's (None: as is)."""
    src_inner, src_nullable, _ = _unwrap(src_hint)
    dst_inner, dst_nullable, many = _unwrap(dst_hint)
    nested = (
        _converter(src_inner, dst_inner)
        if dataclasses.is_dataclass(dst_inner) and src_inner is not dst_inner
        else None
    )
    zero = None if dst_nullable or not src_nullable else _zero_of(dst_field, dst_hint)
    if nested is None and zero is None:
        return None
    if many:
        item = nested

        def convert_many(value: Any) -> Any:
            if value is None:
                return zero
            return value if item is None else tuple(item(v) for v in value)

        return convert_many

    def convert_one(value: Any) -> Any:
        if value is None:
            return zero
        return value if nested is None else nested(value)

    return convert_one


def _converter(src: Any, dst: Any) -> Callable[[Any], Any]:
    found = _CONVERTERS.get((src, dst))
    if found is None:
        found = _CONVERTERS[src, dst] = _build_converter(src, dst)
    return found


def _build_converter(src: Any, dst: Any) -> Callable[[Any], Any]:
    src_fields, src_hints, dst_hints = _fields(src), _hints(src), _hints(dst)
    copied: list[tuple[str, Callable[[Any], Any] | None]] = []
    filled: dict[str, Any] = {}
    for name, field in _fields(dst).items():
        if name in src_fields:
            copied.append((name, _field_converter(src_hints[name], field, dst_hints[name])))
        elif field.default is _MISSING and field.default_factory is _MISSING:
            filled[name] = _zero_of(field, dst_hints[name])
    plan: _Plan = tuple(copied)

    def move(obj: Any) -> Any:
        kwargs = dict(filled)
        for name, fn in plan:
            value = getattr(obj, name)
            kwargs[name] = value if fn is None else fn(value)
        return dst(**kwargs)

    return move


def convert(obj: Any, cls: type[T], **fields: Any) -> T:
    """``obj`` (a kio entity of one version) as an entity of ``cls`` (another version's class of
    the same message); ``fields`` override what is copied (an upgrade/downgrade hook's part),
    their entities converted into ``cls``'s classes the same way; those ``cls`` lacks are left
    out (a hook may name every field its old versions have)."""
    if type(obj) is cls and not fields:
        return obj
    if fields:
        hints = _hints(cls)
        fields = {name: _coerce(v, hints[name]) for name, v in fields.items() if name in hints}
        if fields.keys() >= _fields(cls).keys():  # every field given (AddPartitionsToTxn v0-3)
            return cls(**fields)
    converted = _converter(type(obj), cls)(obj)
    if fields:
        converted = dataclasses.replace(converted, **fields)
    return typing.cast(T, converted)


@functools.cache  # per request otherwise: is_dataclass is a third of AddPartitionsToTxn v3's read
def _entity_field(hint: Any) -> tuple[Any, bool] | None:
    """(entity class, is a tuple of them) of a field holding entities; None for other fields."""
    inner, _, many = _unwrap(hint)
    return (inner, many) if _is_entity(inner) else None


def _coerce(value: Any, hint: Any) -> Any:
    """An override's entities (of any version) in the classes of the field they go into."""
    found = _entity_field(hint)
    if value is None or found is None:
        return value
    inner, many = found
    if many:
        return tuple(convert(v, inner) for v in value)
    return convert(value, inner)


def error_response(cls: type[T], code: ErrorCode) -> T:
    """A response of ``cls`` with every error code set to ``code`` and every list empty."""
    kwargs: dict[str, Any] = {}
    hints = _hints(cls)
    for name, field in _fields(cls).items():
        if field.metadata.get("kafka_type") == "error_code":
            kwargs[name] = code
        elif field.default is _MISSING and field.default_factory is _MISSING:
            inner, nullable, many = _unwrap(hints[name])
            if not nullable and not many and dataclasses.is_dataclass(inner):
                kwargs[name] = error_response(inner, code)  # type: ignore[arg-type]
            elif field.metadata.get("kafka_type") == "int64":
                kwargs[name] = -1  # offsets, timestamps, producer ids: -1 is "none"
            elif field.metadata.get("kafka_type") == "datetime_i64":
                kwargs[name] = tz_aware_from_i64(i64(-1))  # a timestamp: -1 is "none"
            else:
                kwargs[name] = _zero_of(field, hints[name])
    return cls(**kwargs)


def _is_entity(tp: Any) -> bool:
    return dataclasses.is_dataclass(tp)


def removed_fields(old: type, newest: type) -> list[str]:
    """Dotted paths of the fields ``old`` has and ``newest`` lacks (at any depth)."""
    found: list[str] = []
    new_fields, old_hints, new_hints = _fields(newest), _hints(old), _hints(newest)
    for name in _fields(old):
        if name not in new_fields:
            found.append(name)
            continue
        old_inner, new_inner = _unwrap(old_hints[name])[0], _unwrap(new_hints[name])[0]
        if dataclasses.is_dataclass(old_inner) and dataclasses.is_dataclass(new_inner):
            found += [f"{name}.{sub}" for sub in removed_fields(old_inner, new_inner)]  # type: ignore[arg-type]
    return found
