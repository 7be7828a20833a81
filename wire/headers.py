"""Request and response headers, read and written without a schema.

Request header, after the frame's size prefix (big-endian)::

    api_key i16 | api_version i16 | correlation_id i32 | client_id: i16 length (-1 = null) + UTF-8
    v2 only (flexible API versions): tagged fields = uvarint count, then per field
                                     uvarint tag, uvarint size, size bytes

``client_id`` keeps the old int16 length even in v2 (Kafka special-cases it in
RequestHeader.json). Header v1 is used for non-flexible API versions, v2 for flexible ones.

Response header: v0 = ``correlation_id i32``; v1 = v0 + tagged fields (an empty section is one
zero byte). ApiVersions answers with v0 at every version, because a client cannot know yet
whether the broker speaks flexible headers.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from wire.errors import DecodeError

API_VERSIONS_KEY = 18

_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_CORRELATION = struct.Struct(">i")
MIN_REQUEST_HEADER = _FIXED.size
_new = tuple.__new__


class RequestHeader(NamedTuple):
    """(A named tuple: built once per request, it costs a third of a frozen dataclass.)"""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[int, int]:
    """An unsigned (not zigzag) protocol varint at ``pos``: (value, position after it).

    At most 5 bytes (a uint32), as Kafka's ByteUtils.readUnsignedVarint.
    """
    value = shift = 0
    while True:
        if pos >= end:
            raise DecodeError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift >= 35:
            raise DecodeError("varint longer than 5 bytes")


def write_uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def skip_tagged_fields(buf: bytes | bytearray | memoryview, pos: int, end: int) -> int:
    """Skip a tagged-field section; returns the position after it."""
    count, pos = read_uvarint(buf, pos, end)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos, end)
        size, pos = read_uvarint(buf, pos, end)
        pos += size
        if pos > end:
            raise DecodeError("tagged field runs past the end of the frame")
    return pos


def read_fixed_header(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, int]:
    if len(frame) < MIN_REQUEST_HEADER:
        raise DecodeError(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, length = _FIXED.unpack_from(frame, 0)
    pos = MIN_REQUEST_HEADER
    if length == -1:
        client_id = None
    elif length < 0:
        raise DecodeError(f"client id of negative length {length}")
    elif pos + length > len(frame):
        raise DecodeError("client id runs past the end of the frame")
    else:
        # Java decodes with replacement characters rather than failing.
        client_id = str(frame[pos : pos + length], "utf-8", "replace")
        pos += length
    # (tuple.__new__ skips the named tuple's own __new__, a Python function: once per request)
    return _new(RequestHeader, (api_key, api_version, correlation_id, client_id)), pos


def peek_header(frame: bytes | bytearray | memoryview) -> RequestHeader:
    """api_key, api_version, correlation_id and client_id of a request frame (header v1 or v2)."""
    return read_fixed_header(frame)[0]


def read_request_header(
    frame: bytes | bytearray | memoryview, flexible: bool
) -> tuple[RequestHeader, int]:
    """The header and the position of the body: v2 (tagged fields skipped) if ``flexible``."""
    header, pos = read_fixed_header(frame)
    if flexible:
        pos = skip_tagged_fields(frame, pos, len(frame))
    return header, pos


def response_header(correlation_id: int, flexible: bool) -> bytes:
    """Response header v1 (``flexible``) or v0."""
    head = _CORRELATION.pack(correlation_id)
    return head + b"\x00" if flexible else head


def request_header(header: RequestHeader, flexible: bool) -> bytes:
    """Request header v2 (``flexible``, no tagged fields) or v1: for tests and tools."""
    if header.client_id is None:
        client = b""
        length = -1
    else:
        client = header.client_id.encode()
        length = len(client)
    fixed = _FIXED.pack(header.api_key, header.api_version, header.correlation_id, length)
    return fixed + client + (b"\x00" if flexible else b"")
