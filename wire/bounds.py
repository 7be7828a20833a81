"""A bounds check of a message body against its kio schema, run before kio decodes it.

Why: kio 0.6.5's native reader reserves memory for an array from its declared length before
reading any element, and a failed reservation aborts the process (a Rust OOM abort, which no
``except`` can catch). One frame declaring a compact array of 2**32 - 2 elements kills the
broker. So every length in the body is checked here first.

How: each kio entity class is compiled once into a *plan*, a tuple of ``(op, arg)`` steps that
mirror the wire layout (consecutive fixed-size fields merged into one skip). ``plan_end`` walks
the plan over the bytes without building any object, and raises DecodeError if a string, bytes
or tagged field runs past the end, if an array declares more elements than bytes remain (every
array element of a request takes at least one byte), or if a null marker is malformed. A body
that passes can only make kio allocate in proportion to its real size.

A null (length -1, compact length 0) is refused where the schema does not allow one, as
Kafka's generated readers do ("non-nullable field ... was serialized as null"): kio would
hand the handler ``None`` where its type promises a tuple or a string.

The walk follows the generated schemas: flexible entities use compact (uvarint + 1) lengths
and end with a tagged-field section; known tags are walked and must fill their declared size
exactly; nullable nested structs (KIP-893) carry an int8 marker, -1 null, 1 present.
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from typing import Any, Final

from wire.errors import DecodeError
from wire.headers import read_uvarint

FIXED, STRING16, BYTES32, COMPACT, ARRAY32, COMPACT_ARRAY, STRUCT, NULLABLE_STRUCT, TAGS = range(9)

Plan = tuple[tuple[int, Any], ...]

_FIXED_SIZES: Final = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _primitive_op(kafka_type: str, flexible: bool, nullable: bool) -> tuple[int, Any]:
    if kafka_type in _FIXED_SIZES:
        return FIXED, _FIXED_SIZES[kafka_type]
    if kafka_type == "string":
        return (COMPACT, nullable) if flexible else (STRING16, nullable)
    if kafka_type in ("bytes", "records"):
        return (COMPACT, nullable) if flexible else (BYTES32, nullable)
    raise TypeError(f"no bounds rule for kafka type {kafka_type!r}")


def _field_op(field: dataclasses.Field[Any], flexible: bool, tagged: bool) -> tuple[int, Any]:
    tp, optional = _unwrap_optional(field.type)
    if typing.get_origin(tp) is tuple:
        (element, *_rest) = typing.get_args(tp)
        element, element_optional = _unwrap_optional(element)
        if dataclasses.is_dataclass(element):
            element_plan = plan_for(element)
        else:
            kafka_type = field.metadata["kafka_type"]
            element_plan = (_primitive_op(kafka_type, flexible, element_optional),)
        fixed = element_plan[0][1] if len(element_plan) == 1 and element_plan[0][0] == FIXED else 0
        return (COMPACT_ARRAY if flexible else ARRAY32), (element_plan, fixed, optional)
    if dataclasses.is_dataclass(tp):
        # Tagged structs are written without a null marker (presence is the tag itself).
        return (NULLABLE_STRUCT if optional and not tagged else STRUCT), plan_for(tp)
    return _primitive_op(field.metadata["kafka_type"], flexible, optional)


_PLANS: dict[Any, Plan] = {}


def plan_for(cls: Any) -> Plan:
    """The compiled layout of a kio entity class (cached)."""
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _compile(cls)
    return plan


def _compile(cls: Any) -> Plan:
    flexible = bool(getattr(cls, "__flexible__", False))
    ops: list[tuple[int, Any]] = []
    tagged: dict[int, Plan] = {}
    for field in dataclasses.fields(cls):
        tag = field.metadata.get("tag")
        if tag is not None:
            tagged[int(tag)] = (_field_op(field, flexible, tagged=True),)
            continue
        op = _field_op(field, flexible, tagged=False)
        if op[0] == FIXED and ops and ops[-1][0] == FIXED:
            ops[-1] = (FIXED, ops[-1][1] + op[1])
        else:
            ops.append(op)
    if flexible:
        ops.append((TAGS, tagged))
    return tuple(ops)


def plan_end(plan: Plan, buf: bytes | bytearray | memoryview, pos: int) -> int:
    """Check ``buf[pos:]`` against the layout whose plan is ``plan`` (``plan_for(cls)``); the
    position where the body ends."""
    return _walk(plan, buf, pos, len(buf))


def _length(
    buf: bytes | bytearray | memoryview, pos: int, end: int, fmt: struct.Struct, nullable: bool
) -> int:
    """A non-compact length; a null (-1) counts 0 where the field may be null."""
    if pos + fmt.size > end:
        raise DecodeError("truncated length")
    (length,) = fmt.unpack_from(buf, pos)
    if length < 0:
        if length == -1 and nullable:
            return 0
        raise DecodeError(f"length {length}" + (" in a non-nullable field" * (length == -1)))
    return int(length)


def _walk(plan: Plan, buf: bytes | bytearray | memoryview, pos: int, end: int) -> int:
    # Single-byte varints (every length below 127, an empty tag section) take the inline path.
    for op, arg in plan:
        if op == FIXED:
            pos += arg
        elif op == COMPACT:
            if pos < end and buf[pos] < 0x80:
                length = buf[pos]
                pos += 1
            else:
                length, pos = read_uvarint(buf, pos, end)
            if length:
                pos += length - 1
            elif not arg:
                raise DecodeError("null in a non-nullable field")
        elif op == TAGS:
            if pos < end and buf[pos] == 0:
                pos += 1
            else:
                pos = _walk_tags(arg, buf, pos, end)
        elif op == COMPACT_ARRAY:
            if pos < end and buf[pos] < 0x80:
                count = buf[pos]
                pos += 1
            else:
                count, pos = read_uvarint(buf, pos, end)
            pos = _walk_array(arg, count - 1, buf, pos, end)
        elif op == STRING16:
            pos += 2 + _length(buf, pos, end, _I16, arg)
        elif op == BYTES32:
            pos += 4 + _length(buf, pos, end, _I32, arg)
        elif op == ARRAY32:
            count = _length(buf, pos, end, _I32, arg[2])
            pos = _walk_array(arg, count, buf, pos + 4, end)
        elif op == STRUCT:
            pos = _walk(arg, buf, pos, end)
        else:  # NULLABLE_STRUCT
            if pos >= end:
                raise DecodeError("truncated null marker")
            (marker,) = _I8.unpack_from(buf, pos)
            if marker == 1:
                pos = _walk(arg, buf, pos + 1, end)
            elif marker == -1:
                pos += 1
            else:
                raise DecodeError(f"bad null marker {marker}")
        if pos > end:
            raise DecodeError("field runs past the end of the frame")
    return pos


def _walk_array(
    element: tuple[Plan, int, bool],
    count: int,
    buf: bytes | bytearray | memoryview,
    pos: int,
    end: int,
) -> int:
    """``count`` elements; -1 is null (already refused by ``_length`` where not allowed)."""
    if count > end - pos:
        raise DecodeError(f"array of {count} elements in {end - pos} bytes")
    plan, fixed_size, nullable = element
    if count < 0 and not nullable:
        raise DecodeError("null in a non-nullable array")
    if count <= 0:
        return pos
    if fixed_size:
        return pos + count * fixed_size
    for _ in range(count):
        pos = _walk(plan, buf, pos, end)
    return pos


def _walk_tags(
    known: dict[int, Plan], buf: bytes | bytearray | memoryview, pos: int, end: int
) -> int:
    count, pos = read_uvarint(buf, pos, end)
    if count > end - pos:
        raise DecodeError(f"{count} tagged fields in {end - pos} bytes")
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos, end)
        size, pos = read_uvarint(buf, pos, end)
        stop = pos + size
        if stop > end:
            raise DecodeError("tagged field runs past the end")
        plan = known.get(tag)
        if plan is not None and _walk(plan, buf, pos, stop) != stop:
            raise DecodeError(f"tagged field {tag} does not fill its {size} bytes")
        pos = stop
    return pos


# -- Produce: the same walk, written out (the hot path of a latency-bound producer) ----------

_NO_TAGS: dict[int, Plan] = {}  # Produce has no known tagged fields
PRODUCE_FIRST_FLEXIBLE = 9
PRODUCE_TOPIC_ID_VERSION = 13


def produce_end(buf: bytes, pos: int, version: int) -> int:
    """``plan_end`` for a Produce request body (v3-13), without walking the plan: the same
    checks in straight-line code, so the same bodies pass (tests/wire/test_bounds_produce.py
    compares the two). Every read is guarded and the position never goes back, so checking it
    against the end where a read needs it and once at the end refuses what the plan's walk
    refuses (with DecodeError, perhaps another message)."""
    if version < PRODUCE_FIRST_FLEXIBLE:
        return _produce_end_classic(buf, pos, len(buf))
    end = len(buf)
    # transactional_id: a nullable compact string
    if pos < end and buf[pos] < 0x80:
        n = buf[pos]
        pos += 1
    else:
        n, pos = read_uvarint(buf, pos, end)
    if n:
        pos += n - 1
    pos += 6  # acks, timeout
    # topic_data: a compact array of topics
    if pos < end and buf[pos] < 0x80:
        count = buf[pos]
        pos += 1
    else:
        count, pos = read_uvarint(buf, pos, end)
    count -= 1
    if count > end - pos:
        raise DecodeError(f"array of {count} elements in {end - pos} bytes")
    if count < 0:
        raise DecodeError("null in a non-nullable array")
    by_id = version >= PRODUCE_TOPIC_ID_VERSION
    for _ in range(count):
        if by_id:
            pos += 16  # topic_id
        else:  # name: a compact string, never null
            if pos < end and buf[pos] < 0x80:
                n = buf[pos]
                pos += 1
            else:
                n, pos = read_uvarint(buf, pos, end)
            if not n:
                raise DecodeError("null in a non-nullable field")
            pos += n - 1
        # partition_data: a compact array of (index, records, tags)
        if pos < end and buf[pos] < 0x80:
            parts = buf[pos]
            pos += 1
        else:
            parts, pos = read_uvarint(buf, pos, end)
        parts -= 1
        if parts > end - pos:
            raise DecodeError(f"array of {parts} elements in {end - pos} bytes")
        if parts < 0:
            raise DecodeError("null in a non-nullable array")
        for _ in range(parts):
            pos += 4  # index
            if pos < end and buf[pos] < 0x80:  # records: nullable compact bytes
                n = buf[pos]
                pos += 1
            else:
                n, pos = read_uvarint(buf, pos, end)
            if n:
                pos += n - 1
            if pos < end and buf[pos] == 0:
                pos += 1
            else:
                pos = _walk_tags(_NO_TAGS, buf, pos, end)
        if pos < end and buf[pos] == 0:
            pos += 1
        else:
            pos = _walk_tags(_NO_TAGS, buf, pos, end)
    if pos < end and buf[pos] == 0:
        pos += 1
    else:
        pos = _walk_tags(_NO_TAGS, buf, pos, end)
    if pos > end:
        raise DecodeError("field runs past the end of the frame")
    return pos


def _produce_end_classic(buf: bytes, pos: int, end: int) -> int:
    """Produce v3-8: int16 string and int32 bytes and array lengths, no tagged fields."""
    pos += 2 + _length(buf, pos, end, _I16, True)  # transactional_id
    pos += 6  # acks, timeout
    count = _length(buf, pos, end, _I32, False)
    pos += 4
    if count > end - pos:
        raise DecodeError(f"array of {count} elements in {end - pos} bytes")
    for _ in range(count):
        pos += 2 + _length(buf, pos, end, _I16, False)  # name
        parts = _length(buf, pos, end, _I32, False)
        pos += 4
        if parts > end - pos:
            raise DecodeError(f"array of {parts} elements in {end - pos} bytes")
        for _ in range(parts):
            pos += 8 + _length(buf, pos + 4, end, _I32, True)  # index, records
    if pos > end:
        raise DecodeError("field runs past the end of the frame")
    return pos
