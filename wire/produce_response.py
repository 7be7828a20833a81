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
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from datetime import datetime
from typing import Any

from wire.errors import translations_for
from wire.headers import response_header

PRODUCE_KEY = 0
NEWEST = 13  # v13 names topics by id (KIP-516)
_NO_ID = bytes(16)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_PARTITION_V0 = struct.Struct(">ihq")  # index, error_code, base_offset
_PARTITION_V5 = struct.Struct(">ihqqq")  # and log_append_time, log_start_offset


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
    """The whole response frame (size, header, body) of ``resp`` at ``version`` (0-13)."""
    if not 0 <= version <= NEWEST:
        raise ValueError(f"produce v{version} is not encoded here")
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
