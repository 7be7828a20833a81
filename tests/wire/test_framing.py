from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wire.errors import FramingError
from wire.framing import FrameDecoder, Want, encode_frame


def drain(decoder: FrameDecoder) -> tuple[list[bytes], Want]:
    frames = []
    while isinstance(frame := decoder.next_frame(), bytes):
        frames.append(frame)
    return frames, frame


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


@settings(max_examples=200)
@given(
    st.lists(st.binary(max_size=300), max_size=20),
    st.lists(st.integers(min_value=0, max_value=10**6), max_size=30),
)
def test_frames_survive_any_chunking(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(encode_frame(p) for p in payloads)
    decoder = FrameDecoder(max_frame=1000)
    got: list[bytes] = []
    for chunk in chunked(stream, cuts):
        decoder.feed(chunk)
        frames, want = drain(decoder)
        got += frames
        assert want is Want.MORE
    decoder.feed(b"")
    frames, want = drain(decoder)
    assert got + frames == payloads
    assert want is Want.EOF


def test_many_small_frames_in_one_chunk() -> None:
    n = 100_000
    decoder = FrameDecoder()
    decoder.feed(encode_frame(b"x") * n)
    frames, want = drain(decoder)
    assert len(frames) == n and frames[-1] == b"x" and want is Want.MORE
    assert decoder.buffered == 0


def test_compacts_consumed_prefix() -> None:
    decoder = FrameDecoder()
    frame = encode_frame(b"y" * 1000)
    decoder.feed(frame * 200 + frame[:10])
    frames, _ = drain(decoder)
    assert len(frames) == 200
    assert decoder.buffered == 10
    assert len(decoder._buf) < 100 * 1000  # the consumed 200 KB prefix was dropped
    decoder.feed(frame[10:])
    assert decoder.next_frame() == b"y" * 1000


def test_empty_frame() -> None:
    decoder = FrameDecoder()
    decoder.feed(b"\x00\x00\x00\x00")
    assert decoder.next_frame() == b""
    assert decoder.next_frame() is Want.MORE


@pytest.mark.parametrize("size", [-1, -(2**31), 1001])
def test_bad_size_is_refused_as_soon_as_it_is_readable(size: int) -> None:
    decoder = FrameDecoder(max_frame=1000)
    decoder.feed(size.to_bytes(4, "big", signed=True))
    with pytest.raises(FramingError):
        decoder.next_frame()


def test_frame_of_exactly_max_size_is_accepted() -> None:
    decoder = FrameDecoder(max_frame=1000)
    decoder.feed(encode_frame(b"z" * 1000))
    assert decoder.next_frame() == b"z" * 1000


@pytest.mark.parametrize("tail", [b"\x00", b"\x00\x00\x00\x05abc"])
def test_eof_inside_a_frame(tail: bytes) -> None:
    decoder = FrameDecoder()
    decoder.feed(encode_frame(b"ok") + tail)
    decoder.feed(b"")
    assert decoder.next_frame() == b"ok"
    with pytest.raises(FramingError):
        decoder.next_frame()


def test_data_after_eof_is_refused() -> None:
    decoder = FrameDecoder()
    decoder.feed(b"")
    with pytest.raises(FramingError):
        decoder.feed(b"\x00")


def test_encode_frame_prefixes_big_endian_size() -> None:
    assert encode_frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert encode_frame(memoryview(b"")) == b"\x00\x00\x00\x00"
