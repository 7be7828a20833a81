"""What the forwarding proxy reads of a frame, without decoding its body (pure, no I/O).

A request is forwarded as the bytes it came in; the proxy reads only its header
(``wire.headers.peek_header``) and, for Produce, its ``acks`` (an acks=0 Produce has no
response, so no response slot is queued for it). A response is matched to its request by the
correlation id in its first four bytes. Only when the proxy answers a request itself (an
injected error) does it decode the request body, with kio, at any version kio knows: the
upstream may speak versions kafkad itself does not serve.
"""

from __future__ import annotations

import struct
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from proxy.registry import entry, served
from wire.codec import decode_request, encode_response
from wire.errors import DecodeError, ProtocolError
from wire.headers import (
    API_VERSIONS_KEY,
    RequestHeader,
    read_fixed_header,
    read_uvarint,
    skip_tagged_fields,
)
from wire.versions import error_response

PRODUCE_KEY = 0
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@cache
def kio_range(api_key: int) -> tuple[int, int] | None:
    """The (lowest, highest) version kio has request and response schemas for, or None.
    Per key and lazily: importing every schema of every API takes seconds."""
    versions = []
    for version in range(0, 32):
        if _known(api_key, version):
            versions.append(version)
        elif versions:
            break
    return (versions[0], versions[-1]) if versions else None


def _known(api_key: int, version: int) -> bool:
    try:
        load_request_schema(api_key, version)
        load_response_schema(api_key, version)
    except Exception:
        return False
    return True


def flexible(api_key: int, version: int) -> bool | None:
    """Whether (api_key, version) uses flexible headers; None if kio does not know it."""
    try:
        return bool(load_request_schema(api_key, version).__flexible__)
    except Exception:
        return None


def response_body_start(api_key: int, version: int, frame: bytes) -> int:
    """Where the body of a response frame (no size prefix) starts: after the correlation id
    and, for flexible versions but ApiVersions (header v0 always), the header's tagged fields."""
    if len(frame) < 4:
        raise DecodeError(f"response of {len(frame)} bytes has no correlation id")
    if api_key != API_VERSIONS_KEY and flexible(api_key, version):
        return skip_tagged_fields(frame, 4, len(frame))
    return 4


def correlation_id(frame: bytes) -> int:
    if len(frame) < 4:
        raise DecodeError(f"response of {len(frame)} bytes has no correlation id")
    return int(_I32.unpack_from(frame, 0)[0])


def produce_acks(frame: bytes, header: RequestHeader, header_end: int) -> int:
    """The ``acks`` of a Produce request: after ``transactional_id`` (v3+, a compact string
    from v9) at the start of the body."""
    pos = header_end
    version = header.api_version
    if version >= 9:  # flexible: tagged fields close the header, then a compact string
        pos = skip_tagged_fields(frame, pos, len(frame))
        length, pos = read_uvarint(frame, pos, len(frame))
        pos += max(length - 1, 0)
    elif version >= 3:
        if pos + 2 > len(frame):
            raise DecodeError("produce request ends inside transactional_id")
        (length,) = _I16.unpack_from(frame, pos)
        pos += 2 + max(length, 0)
    if pos + 2 > len(frame):
        raise DecodeError("produce request ends before acks")
    return int(_I16.unpack_from(frame, pos)[0])


JOIN_GROUP_KEY = 11
SASL_HANDSHAKE_KEY = 17


def sasl_v0_mechanism(frame: bytes, header: RequestHeader, header_end: int) -> str | None:
    """The mechanism of a SaslHandshake v0 request (a string after the header); None for any
    other request or one that does not parse (the upstream answers that)."""
    if header.api_key != SASL_HANDSHAKE_KEY or header.api_version != 0:
        return None
    if header_end + 2 > len(frame):
        return None
    (length,) = _I16.unpack_from(frame, header_end)
    if length < 0 or header_end + 2 + length > len(frame):
        return None
    return frame[header_end + 2 : header_end + 2 + length].decode("utf-8", "replace")


def answer_wait_s(frame: bytes, header: RequestHeader) -> float:
    """How long the upstream may rightly take to answer, beyond a quick reply: a JoinGroup
    waits for the rebalance (its ``rebalance_timeout``, v1+, or ``session_timeout``), as
    Kafka's clients allow it that plus 5 s; 0 for every other request."""
    if header.api_key != JOIN_GROUP_KEY:
        return 0.0
    try:
        cls = load_request_schema(header.api_key, header.api_version)
        _h, pos = read_fixed_header(frame)
        if cls.__flexible__:
            pos = skip_tagged_fields(frame, pos, len(frame))
        body = read_body(cls, frame, pos)
    except Exception:
        return 0.0
    wait = getattr(body, "rebalance_timeout", None) or body.session_timeout
    return float(wait.total_seconds()) + 5.0


def error_answer(frame: bytes, code: ErrorCode) -> bytes | None:
    """The response frame (size prefix included) answering ``frame`` with ``code`` as Kafka's
    ``getErrorResponse`` would; None if the request cannot be decoded.

    kafkad's own handler builds the reply where it serves the version (the same shapes the
    broker's fault injection answers with); otherwise every error code of the version's
    response is set and every list left empty."""
    try:
        api_key = read_fixed_header(frame)[0].api_key
        versions = kio_range(api_key)
        header, body = decode_request(frame, {api_key: versions} if versions else {})
    except ProtocolError:
        return None
    low, high = served().get(header.api_key, (1, 0))
    if low <= header.api_version <= high:
        handler = entry(header.api_key)
        try:
            reply = handler.write(
                handler.error_reply(handler.read(body), code), body, header.api_version
            )
            return encode_response(header, reply)
        except Exception:  # a conversion that fails at this version: the generic shape below
            pass
    try:
        cls = load_response_schema(header.api_key, header.api_version)
        return encode_response(header, error_response(cls, code))
    except Exception:
        return None


# kio readers and writers, once per class


_READERS: dict[type[Any], Any] = {}
_WRITERS: dict[type[Any], Any] = {}


def read_body(cls: type[Any], frame: bytes, pos: int) -> Any:
    reader = _READERS.get(cls)
    if reader is None:
        reader = _READERS[cls] = entity_reader(cls)
    try:
        body, _size = reader(frame, pos)
    except Exception as exc:
        raise DecodeError(f"{cls.__qualname__}: {type(exc).__name__}: {exc}") from exc
    except BaseException as exc:
        if type(exc).__name__ != "PanicException":  # a Rust panic in kio
            raise
        raise DecodeError(f"{cls.__qualname__}: kio panicked") from exc
    return body


def write_body(cls: type[Any], body: Any) -> bytes:
    import io

    writer = _WRITERS.get(cls)
    if writer is None:
        writer = _WRITERS[cls] = entity_writer(cls)
    buf = io.BytesIO()
    writer(buf, body)
    return buf.getvalue()
