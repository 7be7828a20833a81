"""Produce responses encoded straight from the handler's answer, for every version served.

The generic path (``wire.versions.convert`` down to the client's version, then kio's
reflective writer) costs a third of a one-record produce's broker time; this writes the same
bytes directly from the newest version's response object (duck-typed: the fields of kio's
ProduceResponse v11-13), field by field as ProduceResponse.json lays them out:

    v0+   responses [name (v13+: topic_id), partition_responses [index, error_code, base_offset]]
    v1+   throttle_time_ms (after responses)
    v2+   log_append_time_ms            v5+  log_start_offset
    v8+   record_errors [batch_index, batch_index_error_message], error_message
    v9+   flexible: compact arrays and strings, tagged fields
    v10+  partition tag 0 current_leader {leader_id, leader_epoch} when not (-1, -1);
          top-level tag 0 node_endpoints [node_id, host, port, rack] when not empty

Error codes a version predates are translated as ``encode_response`` does
(``wire.errors.translations_for``). ``tests/wire/test_produce_response.py`` checks the bytes
equal the generic path's for generated responses of every version.

The produce handler answers in ``ProduceAnswer`` (named tuples of plain values, no kio
objects: building those cost ~4 µs of a one-record produce, ~7 µs with cold caches), which
``encode_produce_response`` writes without conversions; ``as_kio`` gives its kio response
(the handler's answer to a request refused as a whole, ``_refuse_all``), by which the tests
hold the two to the same bytes. Its fields keep kio's names where readers share them
(``RequestStats``'s error count reads ``responses``, ``partition_responses``, ``error_code``;
the quota path's ``dataclasses.replace`` sets ``throttle_time``).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple, cast

from kio.schema.errors import ErrorCode
from kio.schema.produce.v12 import response as by_name
from kio.schema.produce.v13 import response as by_id
from kio.static.primitive import i32, i64

from wire.errors import translations_for
from wire.headers import response_header
from wire.values import NO_THROTTLE, timestamp

PRODUCE_KEY = 0
NEWEST = 13  # v13 names topics by id (KIP-516)
_NO_ID = bytes(16)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_PARTITION_V0 = struct.Struct(">ihq")  # index, error_code, base_offset
_PARTITION_V5 = struct.Struct(">ihqqq")  # and log_append_time, log_start_offset
_CODES = tuple(translations_for(PRODUCE_KEY, v) for v in range(NEWEST + 1))  # static rewrites
RecordErrors = tuple[tuple[int, str], ...]


class PartitionAnswer(NamedTuple):
    """A partition's answer (kio's PartitionProduceResponse, its current leader the default)."""

    partition: int  # kio's index (a tuple's own method)
    error_code: ErrorCode
    base_offset: int = -1
    log_append_time_ms: int = -1  # -1: none (kio's log_append_time None)
    log_start_offset: int = -1
    record_errors: RecordErrors = ()  # (batch index, message)
    error_message: str | None = None


class TopicAnswer(NamedTuple):
    """A topic's answer: by name (v0-12) or by id (v13, ``name`` None)."""

    name: str | None
    topic_id: uuid.UUID | None
    partition_responses: tuple[PartitionAnswer, ...]


@dataclass(slots=True)
class ProduceAnswer:
    """The produce handler's answer (kio's ProduceResponse without node endpoints)."""

    responses: tuple[TopicAnswer, ...]
    throttle_time: timedelta = NO_THROTTLE


def as_kio(answer: ProduceAnswer, version: int) -> Any:
    """``answer`` as kio's ProduceResponse: v13's classes for ``version`` 13, else v12's."""
    module: Any = by_id if version >= NEWEST else by_name

    def partition(p: PartitionAnswer) -> Any:
        return module.PartitionProduceResponse(
            index=i32(p.partition),
            error_code=p.error_code,
            base_offset=cast(i64, p.base_offset),
            log_append_time=timestamp(p.log_append_time_ms),
            log_start_offset=cast(i64, p.log_start_offset),
            record_errors=tuple(
                module.BatchIndexAndErrorMessage(batch_index=i32(i), batch_index_error_message=m)
                for i, m in p.record_errors
            ),
            error_message=p.error_message,
        )

    topics = tuple(
        module.TopicProduceResponse(topic_id=t.topic_id, partition_responses=parts)
        if version >= NEWEST
        else module.TopicProduceResponse(name=t.name, partition_responses=parts)
        for t in answer.responses
        for parts in [tuple(partition(p) for p in t.partition_responses)]
    )
    return module.ProduceResponse(responses=topics, throttle_time=answer.throttle_time)


def append_uvarint(out: bytearray, n: int) -> None:
    """The unsigned varint ``n`` onto ``out`` (also wire/txn_responses.py's)."""
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def append_string(out: bytearray, s: str | None, flexible: bool) -> None:
    if s is None:
        if flexible:
            out.append(0)
        else:
            out += _I16.pack(-1)
        return
    raw = s.encode()
    if flexible:
        append_uvarint(out, len(raw) + 1)
    else:
        out += _I16.pack(len(raw))
    out += raw


def append_count(out: bytearray, n: int, flexible: bool) -> None:
    if flexible:
        append_uvarint(out, n + 1)
    else:
        out += _I32.pack(n)


def _millis(t: datetime | None) -> int:
    return -1 if t is None else round(t.timestamp() * 1000)


def _partition(out: bytearray, p: Any, v: int, code: int) -> None:
    flexible = v >= 9
    if v >= 5:
        out += _PARTITION_V5.pack(
            p.index, code, p.base_offset, _millis(p.log_append_time), p.log_start_offset
        )
    else:
        out += _PARTITION_V0.pack(p.index, code, p.base_offset)
        if v >= 2:
            out += _I64.pack(_millis(p.log_append_time))
    if v >= 8:
        if flexible and not p.record_errors and p.error_message is None:
            out += b"\x01\x00"  # no record errors, no message: the usual answer
        else:
            append_count(out, len(p.record_errors), flexible)
            for e in p.record_errors:
                out += _I32.pack(e.batch_index)
                append_string(out, e.batch_index_error_message, flexible)
                if flexible:
                    out.append(0)
            append_string(out, p.error_message, flexible)
    if flexible:
        leader = p.current_leader
        if v >= 10 and (leader.leader_id != -1 or leader.leader_epoch != -1):
            out += b"\x01\x00\x09"  # one tagged field: tag 0, 9 bytes
            out += _I32.pack(leader.leader_id) + _I32.pack(leader.leader_epoch) + b"\x00"
        else:
            out.append(0)


def _node_endpoints(resp: Any) -> bytes:
    body = bytearray()
    append_count(body, len(resp.node_endpoints), True)
    for n in resp.node_endpoints:
        body += _I32.pack(n.node_id)
        append_string(body, n.host, True)
        body += _I32.pack(n.port)
        append_string(body, n.rack, True)
        body.append(0)
    return bytes(body)


def encode_produce_response(correlation_id: int, version: int, resp: Any) -> bytes:
    """The whole response frame (size, header, body) of ``resp`` at ``version`` (0-13): a
    ``ProduceAnswer``, or kio's ProduceResponse (v11-13 classes)."""
    if not 0 <= version <= NEWEST:
        raise ValueError(f"produce v{version} is not encoded here")
    if type(resp) is ProduceAnswer:
        return _encode_answer(correlation_id, version, resp)
    flexible = version >= 9
    codes = translations_for(PRODUCE_KEY, version)
    code_of: Callable[[Any], int] = (lambda c: int(codes.get(c, c))) if codes else int
    out = bytearray(b"\0\0\0\0")
    out += response_header(correlation_id, flexible)
    append_count(out, len(resp.responses), flexible)
    for t in resp.responses:
        if version >= 13:
            out += t.topic_id.bytes if t.topic_id is not None else _NO_ID
        else:
            append_string(out, t.name, flexible)
        append_count(out, len(t.partition_responses), flexible)
        for p in t.partition_responses:
            _partition(out, p, version, code_of(p.error_code))
        if flexible:
            out.append(0)
    if version >= 1:
        out += _I32.pack(round(resp.throttle_time.total_seconds() * 1000))
    if flexible:
        if version >= 10 and resp.node_endpoints:
            tagged = _node_endpoints(resp)
            out.append(1)
            out.append(0)
            append_uvarint(out, len(tagged))
            out += tagged
        else:
            out.append(0)
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


_V9_TAIL = struct.Struct(">ihqqqHB")  # index .. log_start_offset, no record errors and message,
# no tagged fields: the usual flexible partition answer


# The usual flexible answer (v9-12): one topic (a name under 127 bytes) of one partition,
# without record errors or a message: size, correlation id, no header tags, one topic, the
# name's length; then the name; then one partition and its fields, no tags (partition,
# topic), the throttle time, no tags.
_ONE_HEAD = struct.Struct(">iiBBB")
_ONE_TAIL = struct.Struct(">BihqqqHBBiB")


def write_answer(resp: Any, correlation_id: int, version: int) -> bytes:
    """``encode_produce_response`` in the registry's ``encode`` order (the produce handler's
    hook), the usual flexible one-partition answer written here in two struct packs."""
    if type(resp) is ProduceAnswer and 9 <= version < NEWEST and len(resp.responses) == 1:
        name, _, parts = resp.responses[0]
        if name is not None and len(parts) == 1:
            index, code, base, append_time, start, errors, message = parts[0]
            raw = name.encode()
            if not errors and message is None and len(raw) < 127:
                throttle = resp.throttle_time
                ms = 0 if throttle is NO_THROTTLE else round(throttle.total_seconds() * 1000)
                codes = _CODES[version]
                if codes:
                    code = codes.get(code, code)
                size = 4 + 3 + len(raw) + _ONE_TAIL.size
                return (
                    _ONE_HEAD.pack(size, correlation_id, 0, 2, len(raw) + 1)
                    + raw
                    + _ONE_TAIL.pack(2, index, code, base, append_time, start, 0x0100, 0, 0, ms, 0)
                )
    return encode_produce_response(correlation_id, version, resp)


def _encode_answer(correlation_id: int, version: int, resp: ProduceAnswer) -> bytes:
    """``encode_produce_response`` of a ``ProduceAnswer`` (the same bytes as of its kio
    response: the current leader is always the default, there are no node endpoints)."""
    flexible = version >= 9
    codes = _CODES[version]
    out = bytearray(b"\0\0\0\0")
    out += response_header(correlation_id, flexible)
    append_count(out, len(resp.responses), flexible)
    for t in resp.responses:
        if version >= NEWEST:
            out += t.topic_id.bytes if t.topic_id is not None else _NO_ID
        else:
            append_string(out, t.name, flexible)
        append_count(out, len(t.partition_responses), flexible)
        for index, code, base, append_time, start, errors, message in t.partition_responses:
            if codes:
                code = codes.get(code, code)
            if flexible and not errors and message is None:
                out += _V9_TAIL.pack(index, code, base, append_time, start, 0x0100, 0)
                continue
            if version >= 5:
                out += _PARTITION_V5.pack(index, code, base, append_time, start)
            else:
                out += _PARTITION_V0.pack(index, code, base)
                if version >= 2:
                    out += _I64.pack(append_time)
            if version >= 8:
                append_count(out, len(errors), flexible)
                for i, m in errors:
                    out += _I32.pack(i)
                    append_string(out, m, flexible)
                    if flexible:
                        out.append(0)
                append_string(out, message, flexible)
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    if version >= 1:
        out += _I32.pack(round(resp.throttle_time.total_seconds() * 1000))
    if flexible:
        out.append(0)
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)
