"""``produce_end`` (Produce's bounds walk written out) against ``plan_end`` (the plan's walk):
the same end on every body one of them accepts, DecodeError from both on every other one."""

from __future__ import annotations

import io
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from wire.bounds import plan_end, plan_for, produce_end
from wire.codec import request_class
from wire.errors import DecodeError

from .conftest import entities

VERSIONS = range(3, 14)
diff = settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))


def both(body: bytes, version: int) -> None:
    """Both walks give the same end, or both refuse."""
    plan = plan_for(request_class(0, version))
    try:
        expected: int | None = plan_end(plan, body, 0)
    except DecodeError:
        expected = None
    try:
        got: int | None = produce_end(body, 0, version)
    except DecodeError:
        got = None
    assert got == expected, (version, body.hex())


def encoded(body: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(body))(buf, body)
    return buf.getvalue()


bodies = st.sampled_from(VERSIONS).flatmap(
    lambda v: st.tuples(st.just(v), entities(request_class(0, v)))
)
mutations = st.lists(
    st.tuples(
        st.sampled_from(["flip", "set", "cut", "insert", "ff4", "zero"]),
        st.integers(min_value=0, max_value=10**6),
        st.integers(min_value=0, max_value=255),
    ),
    max_size=4,
)


def mutate(data: bytearray, ops: list[tuple[str, int, int]]) -> bytes:
    for op, where, byte in ops:
        i = where % (len(data) + 1)
        if op == "cut":
            del data[i:]
        elif op == "insert":
            data[i:i] = bytes([byte])
        elif op == "ff4":
            data[i : i + 4] = b"\xff\xff\xff\xff"
        elif op == "zero":
            data[i : i + 1] = b"\x00"
        elif i < len(data):
            data[i] = data[i] ^ (byte or 1) if op == "flip" else byte
    return bytes(data)


@diff
@given(bodies, mutations, st.binary(max_size=3))
def test_mutated_bodies(
    version_body: tuple[int, Any], ops: list[tuple[str, int, int]], trailing: bytes
) -> None:
    version, body = version_body
    both(mutate(bytearray(encoded(body)), ops) + trailing, version)


@diff
@given(st.sampled_from(VERSIONS), st.binary(max_size=80))
def test_arbitrary_bodies(version: int, body: bytes) -> None:
    both(body, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_directed(version: int) -> None:
    """Lengths at and past the edges: nulls, -2, huge counts, long varints, tag sections."""
    flexible = version >= 9
    cases: list[bytes] = [b"", b"\x00", b"\xff\xff", b"\x80\x80\x80\x80\x80\x01"]
    if flexible:
        head = b"\x00" + struct.pack(">hi", -1, 1000)
        cases += [
            head + b"\x00",  # null topics
            head + b"\x01\x00",  # no topics, tags
            head + b"\x01\x01\x00",  # a tag section of one field, truncated
            head + b"\x01\x01\x05\x00",  # tag 5 of size 0
            head + b"\x01\x01\xff\xff\xff\xff\x7f\x00",  # a 5-byte tag number
            head + b"\x01\x02\x01\x00\x00\x00",  # two tags
            head + b"\xff\xff\xff\xff\x0f",  # 2**32 - 2 topics
            head + b"\x02\x00\x01\x00\x00",  # a null name (or an id's first byte)
            head + b"\x02\x02a\x00\x00",  # null partitions
            head + b"\x02\x02a\x02\x00\x00\x00\x00\x00\x00\x00\x00",  # null records
            head + b"\x02\x02a\x02\x00\x00\x00\x00\x03xx\x00\x00\x00",
        ]
    else:
        head = struct.pack(">hhi", -1, -1, 1000)
        cases += [
            head + struct.pack(">i", -1),
            head + struct.pack(">i", 0),
            head + struct.pack(">i", 2**31 - 1),
            head + struct.pack(">ih", 1, -1) + struct.pack(">i", 0),
            head + struct.pack(">ih", 1, 1) + b"a" + struct.pack(">i", -1),
            head + struct.pack(">ih", 1, 1) + b"a" + struct.pack(">iii", 1, 0, -1),
            head + struct.pack(">ih", 1, 1) + b"a" + struct.pack(">iii", 1, 0, -2),
            head + struct.pack(">ih", 1, 1) + b"a" + struct.pack(">iii", 1, 0, 2) + b"xy",
            struct.pack(">hhhi", -2, 0, 0, 0),
            struct.pack(">h", 5) + b"ab",
        ]
    for case in cases:
        for cut in range(len(case) + 1):
            both(case[:cut], version)
