"""Request frames to kio objects and kio responses to frames.

Decoding a request frame (without its size prefix):

1. ``peek_header`` reads api_key, api_version, correlation_id and client_id, which have the same
   layout in header v1 and v2.
2. The api key must be in ``supported`` (else UnknownApi) and the version inside its advertised
   range and known to kio (else UnsupportedVersion, header attached, so ApiVersions can be
   answered per KIP-511). Produce v0-2 are advertised (KAFKA-18659) but have no schema, so they
   end here too.
3. The request class says whether the version is flexible: header v2 (skip tagged fields) or v1.
4. ``wire.bounds`` checks every length in the body (Produce's with its own walk), then kio's
   native reader decodes it. Any failure becomes DecodeError. Bytes after the body are ignored,
   as Kafka does (``AbstractRequest.parseRequest`` never checks the buffer's remainder).

Encoding a response writes size placeholder, response header (v1 for flexible versions, v0 for
non-flexible ones and for ApiVersions at every version) and the kio body into one BytesIO, then
patches the size. Error codes the request's version cannot understand are rewritten on the way
(``wire.errors.TRANSLATIONS``); only (api key, version) pairs with rules pay for that walk.
"""

from __future__ import annotations

import dataclasses
import io
import struct
import typing
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16

from wire.bounds import Plan, plan_end, plan_for, produce_end
from wire.errors import (
    DecodeError,
    ErrorCode,
    UnknownApi,
    UnsupportedVersion,
    translations_for,
)
from wire.headers import (
    API_VERSIONS_KEY,
    RequestHeader,
    peek_header,
    read_fixed_header,
    response_header,
    skip_tagged_fields,
)

__all__ = [
    "RequestHeader",
    "api_versions_fallback",
    "decode_request",
    "encode_response",
    "peek_header",
    "request_class",
    "response_class",
]

_SIZE = struct.Struct(">i")
Writer = Callable[[io.BytesIO, Any], None]
Reader = Callable[[bytes, int], tuple[Any, int]]


@cache
def request_class(api_key: int, api_version: int) -> type[Any]:
    """kio's request class for (api_key, api_version); UnsupportedVersion if kio has none."""
    try:
        return load_request_schema(api_key, api_version)
    except Exception as exc:
        raise UnsupportedVersion(api_key, api_version) from exc


@cache
def response_class(api_key: int, api_version: int) -> type[Any]:
    """kio's response class for (api_key, api_version); UnsupportedVersion if kio has none."""
    try:
        return load_response_schema(api_key, api_version)
    except Exception as exc:
        raise UnsupportedVersion(api_key, api_version) from exc


# (api_key << 16 | api_version) -> what decoding its requests takes, looked up once per request
_DECODERS: dict[int, tuple[Reader, Plan, bool]] = {}
_READERS: dict[Any, Reader] = {}
_WRITERS: dict[Any, Writer] = {}
_CODE_PATHS: dict[Any, tuple[tuple[str, str], ...]] = {}


def _reader(cls: Any) -> Reader:
    reader = _READERS.get(cls)
    if reader is None:
        reader = _READERS[cls] = typing.cast(Reader, entity_reader(cls))
    return reader


def _writer(cls: Any) -> Writer:
    writer = _WRITERS.get(cls)
    if writer is None:
        writer = _WRITERS[cls] = typing.cast(Writer, entity_writer(cls))
    return writer


def _decoder(api_key: int, api_version: int) -> tuple[Reader, Plan, bool]:
    """The reader of (api_key, api_version)'s request class, its bounds plan and whether it is
    flexible; UnsupportedVersion if kio has no class for it."""
    key = api_key << 16 | api_version
    found = _DECODERS.get(key)
    if found is None:
        cls = request_class(api_key, api_version)
        found = _DECODERS[key] = (_reader(cls), plan_for(cls), bool(cls.__flexible__))
    return found


def decode_request(
    frame: bytes, supported: Mapping[int, tuple[int, int]]
) -> tuple[RequestHeader, Any]:
    """The header and kio body of a request frame. Raises only ProtocolError subclasses."""
    header, pos = read_fixed_header(frame)
    api_key, api_version = header.api_key, header.api_version
    versions = supported.get(api_key)
    if versions is None:
        raise UnknownApi(header)
    if not versions[0] <= api_version <= versions[1]:
        raise UnsupportedVersion(api_key, api_version, header.correlation_id, header)
    try:
        reader, plan, flexible = _decoder(api_key, api_version)
    except UnsupportedVersion as exc:
        raise UnsupportedVersion(api_key, api_version, header.correlation_id, header) from exc
    if flexible:
        if pos < len(frame) and frame[pos] == 0:  # no tagged fields: the usual header v2
            pos += 1
        else:
            pos = skip_tagged_fields(frame, pos, len(frame))
    # Produce's walk is written out (wire.bounds.produce_end): the hot path's bodies
    end = plan_end(plan, frame, pos) if api_key else produce_end(frame, pos, api_version)
    try:
        body, size = reader(frame, pos)
    except Exception as exc:  # kio raises its own errors, ValueError, UnicodeDecodeError, ...
        raise DecodeError(f"api key {api_key} v{api_version}: {type(exc).__name__}: {exc}") from exc
    except BaseException as exc:
        if type(exc).__name__ != "PanicException":  # a Rust panic in kio, via pyo3
            raise
        raise DecodeError(f"api key {api_key} v{api_version}: kio panicked") from exc
    if pos + size != end:
        raise DecodeError(f"body ends at {pos + size}, its layout at {end}")
    return header, body


def encode_response(header: RequestHeader, body: Any) -> bytes:
    """The whole response frame: size, response header, body."""
    cls = type(body)
    if cls.__version__ != header.api_version or cls.__api_key__ != header.api_key:
        raise ValueError(
            f"{cls.__qualname__} v{cls.__version__} answers api {cls.__api_key__}, "
            f"not api {header.api_key} v{header.api_version}"
        )
    mapping = translations_for(header.api_key, header.api_version)
    if mapping:
        body = _rewrite_codes(body, mapping)
    flexible = cls.__flexible__ and header.api_key != API_VERSIONS_KEY
    return _frame(header.correlation_id, flexible, cls, body)


def _frame(correlation_id: int, flexible: bool, cls: type[Any], body: Any) -> bytes:
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    buf.write(response_header(correlation_id, flexible))
    _writer(cls)(buf, body)
    with buf.getbuffer() as view:
        _SIZE.pack_into(view, 0, len(view) - 4)
    return buf.getvalue()


def api_versions_fallback(header: RequestHeader, supported: Mapping[int, tuple[int, int]]) -> bytes:
    """KIP-511: the answer to an ApiVersions request of a version we do not serve.

    A v0 body (header v0) with UNSUPPORTED_VERSION and, as Kafka's
    ``ApiVersionsRequest.getErrorResponse``, only the ApiVersions entry, so the client retries
    with the highest version it shares with us.
    """
    low, high = supported.get(API_VERSIONS_KEY, (0, 0))
    body = ApiVersionsResponseV0(
        error_code=ErrorCode.unsupported_version,
        api_keys=(
            ApiVersionV0(
                api_key=i16(API_VERSIONS_KEY), min_version=i16(low), max_version=i16(high)
            ),
        ),
    )
    return _frame(header.correlation_id, False, ApiVersionsResponseV0, body)


# -- error code rewriting -------------------------------------------------------------------


def _code_paths(cls: Any) -> tuple[tuple[str, str], ...]:
    """Fields of ``cls`` that are, or may contain, error codes: (name, "code"|"one"|"many")."""
    paths = _CODE_PATHS.get(cls)
    if paths is None:
        paths = _CODE_PATHS[cls] = tuple(_find_code_paths(cls))
    return paths


def _find_code_paths(cls: Any) -> list[tuple[str, str]]:
    hints = typing.get_type_hints(cls)
    paths: list[tuple[str, str]] = []
    for field in dataclasses.fields(cls):
        if field.metadata.get("kafka_type") == "error_code":
            paths.append((field.name, "code"))
            continue
        tp = hints[field.name]
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if typing.get_origin(tp) is tuple:
            if dataclasses.is_dataclass(args[0]) and _code_paths(args[0]):
                paths.append((field.name, "many"))
        else:
            inner = args[0] if args else tp
            if dataclasses.is_dataclass(inner) and _code_paths(inner):
                paths.append((field.name, "one"))
    return paths


def _rewrite_codes(entity: Any, mapping: Mapping[ErrorCode, ErrorCode]) -> Any:
    """``entity`` with every error code found in ``mapping`` replaced; unchanged parts shared."""
    changes: dict[str, Any] | None = None
    for name, kind in _code_paths(type(entity)):
        value = getattr(entity, name)
        if value is None:
            continue
        new: Any
        if kind == "code":
            new = mapping.get(value)
        elif kind == "one":
            new = _rewrite_codes(value, mapping)
            new = None if new is value else new
        else:
            items: list[Any] | None = None
            for i, item in enumerate(value):
                rewritten = _rewrite_codes(item, mapping)
                if rewritten is not item:
                    items = items or list(value)
                    items[i] = rewritten
            new = None if items is None else tuple(items)
        if new is not None:
            changes = changes or {}
            changes[name] = new
    return entity if changes is None else dataclasses.replace(entity, **changes)
