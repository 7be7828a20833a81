"""decode_request must answer any bytes with a result or a ProtocolError, nothing else."""

from __future__ import annotations

import contextlib
import io
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from wire.codec import decode_request, request_class
from wire.errors import ProtocolError
from wire.headers import RequestHeader, request_header

from .conftest import entities
from .supported import PAIRS, SUPPORTED

fuzz = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


def decode_or_protocol_error(frame: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_request(frame, SUPPORTED)


@fuzz
@given(st.binary(max_size=200))
def test_arbitrary_bytes(frame: bytes) -> None:
    decode_or_protocol_error(frame)


@fuzz
@given(st.sampled_from(PAIRS), st.booleans(), st.binary(max_size=200))
def test_valid_header_then_arbitrary_body(
    pair: tuple[int, int], flexible: bool, body: bytes
) -> None:
    header = RequestHeader(*pair, 1, "fuzz")
    decode_or_protocol_error(request_header(header, flexible) + body)


mutations = st.lists(
    st.tuples(
        st.sampled_from(["flip", "set", "cut", "insert", "ff4"]),
        st.integers(min_value=0, max_value=10**6),
        st.integers(min_value=0, max_value=255),
    ),
    min_size=1,
    max_size=4,
)


valid_bodies = st.sampled_from(PAIRS).flatmap(
    lambda p: st.tuples(st.just(p), entities(request_class(*p)))
)


def mutate(frame: bytearray, ops: list[tuple[str, int, int]]) -> bytes:
    for op, where, byte in ops:
        i = where % (len(frame) + 1)
        if op == "cut":
            del frame[i:]
        elif op == "insert":
            frame[i:i] = bytes([byte])
        elif op == "ff4":
            frame[i : i + 4] = b"\xff\xff\xff\xff"
        elif i < len(frame):
            frame[i] = frame[i] ^ (byte or 1) if op == "flip" else byte
    return bytes(frame)


@fuzz
@given(valid_bodies, mutations)
def test_mutated_valid_frames(
    pair_body: tuple[tuple[int, int], Any], ops: list[tuple[str, int, int]]
) -> None:
    (api_key, version), body = pair_body
    cls = type(body)
    buf = io.BytesIO()
    buf.write(request_header(RequestHeader(api_key, version, 3, "m"), cls.__flexible__))
    entity_writer(cls)(buf, body)
    decode_or_protocol_error(mutate(bytearray(buf.getvalue()), ops))
