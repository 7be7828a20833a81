from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.request_header.v1.header import RequestHeader as KioHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as KioHeaderV2
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from wire.errors import DecodeError
from wire.headers import (
    RequestHeader,
    peek_header,
    read_request_header,
    read_uvarint,
    request_header,
    response_header,
    write_uvarint,
)

headers = st.builds(
    RequestHeader,
    st.integers(-(2**15), 2**15 - 1),
    st.integers(-(2**15), 2**15 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.none() | st.text(max_size=40),
)


def kio_header(h: RequestHeader, flexible: bool) -> bytes:
    cls = KioHeaderV2 if flexible else KioHeaderV1
    buf = io.BytesIO()
    entity_writer(cls)(
        buf,
        cls(
            request_api_key=i16(h.api_key),
            request_api_version=i16(h.api_version),
            correlation_id=i32(h.correlation_id),
            client_id=h.client_id,
        ),
    )
    return buf.getvalue()


@given(headers, st.booleans(), st.binary(max_size=20))
def test_header_round_trip_v1_and_v2(h: RequestHeader, flexible: bool, body: bytes) -> None:
    frame = kio_header(h, flexible) + body
    assert frame == request_header(h, flexible) + body
    assert peek_header(frame) == h
    parsed, pos = read_request_header(frame, flexible)
    assert parsed == h
    assert frame[pos:] == body


def test_v2_header_skips_tagged_fields() -> None:
    h = RequestHeader(3, 12, 7, "c")
    frame = request_header(h, False) + b"\x02\x00\x01X\x05\x03abc" + b"BODY"
    parsed, pos = read_request_header(frame, True)
    assert parsed == h and frame[pos:] == b"BODY"


def test_invalid_utf8_client_id_is_replaced_like_java() -> None:
    frame = b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x02\xff\xfe"
    assert peek_header(frame).client_id == "\ufffd\ufffd"


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\x00\x03\x00\x0c\x00\x00\x00",  # 9 bytes
        b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x05abc",  # client id cut short
        b"\x00\x03\x00\x0c\x00\x00\x00\x01\xff\xfe",  # length -2
    ],
)
def test_short_or_bad_header(frame: bytes) -> None:
    with pytest.raises(DecodeError):
        peek_header(frame)


def test_tagged_field_past_the_end() -> None:
    frame = request_header(RequestHeader(3, 12, 7, None), False) + b"\x01\x00\x09ab"
    with pytest.raises(DecodeError):
        read_request_header(frame, True)


def test_response_headers() -> None:
    assert response_header(258, flexible=False) == b"\x00\x00\x01\x02"
    assert response_header(258, flexible=True) == b"\x00\x00\x01\x02\x00"


@given(st.integers(0, 2**32 - 1))
def test_uvarint_round_trip(value: int) -> None:
    data = write_uvarint(value) + b"rest"
    assert read_uvarint(data, 0, len(data)) == (value, len(data) - 4)


def test_uvarint_limits() -> None:
    with pytest.raises(DecodeError):
        read_uvarint(b"\x80\x80\x80\x80\x80\x01", 0, 6)
    with pytest.raises(DecodeError):
        read_uvarint(b"\x80", 0, 1)
