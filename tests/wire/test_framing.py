from __future__ import annotations

import itertools
from collections.abc import Callable

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


class _Reference:
    """The decoder's contract in a few lines: one buffer, nothing else."""

    def __init__(self, max_frame: int) -> None:
        self.buf = b""
        self.eof = False
        self.max_frame = max_frame

    def feed(self, data: bytes) -> None:
        if not data:
            self.eof = True
        elif self.eof:
            raise FramingError("fed after eof")
        else:
            self.buf += data

    def next_frame(self) -> bytes | Want:
        if len(self.buf) >= 4:
            size = int.from_bytes(self.buf[:4], "big", signed=True)
            if not 0 <= size <= self.max_frame:
                raise FramingError("size")
            if len(self.buf) >= 4 + size:
                frame, self.buf = self.buf[4 : 4 + size], self.buf[4 + size :]
                return frame
        if not self.eof:
            return Want.MORE
        if self.buf:
            raise FramingError("eof inside")
        return Want.EOF


def _outcome(step: Callable[..., object], *args: object) -> object:
    try:
        return step(*args)
    except FramingError:
        return FramingError


@settings(max_examples=500)
@given(
    st.lists(st.binary(max_size=40), max_size=12),
    st.lists(
        st.tuples(
            st.sampled_from(["frame", "frame", "bytes", "one", "drain", "limit", "eof", "junk"]),
            st.integers(min_value=0, max_value=60),
        ),
        max_size=30,
    ),
)
def test_matches_a_one_buffer_reference(
    payloads: list[bytes], steps: list[tuple[str, int]]
) -> None:
    """Whole frames fed one per chunk (the decoder's one-copy path), partial and several
    frames per chunk, chunks fed without draining, the limit changed between frames, EOF,
    junk: the same frames, the same errors and the same ``buffered`` as a decoder with one
    buffer."""
    stream = b"".join(encode_frame(p) for p in payloads)
    ends = list(itertools.accumulate(4 + len(p) for p in payloads))
    at = 0  # how much of the stream is fed
    decoder, reference = FrameDecoder(max_frame=30), _Reference(max_frame=30)
    for op, number in steps:
        if op in ("frame", "bytes", "eof", "junk"):
            if op == "frame":  # up to the next frame's end: a whole frame if at a boundary
                stop = next((e for e in ends if e > at), len(stream))
                chunk, at = stream[at:stop], stop
            elif op == "bytes":
                chunk, at = stream[at : at + number], min(at + number, len(stream))
            else:
                chunk = b"" if op == "eof" else bytes([number]) * (number % 7)
            got = _outcome(decoder.feed, chunk)
            assert got == _outcome(reference.feed, chunk)
            if got is FramingError:
                return
        elif op == "limit":
            decoder.max_frame = reference.max_frame = number
        else:
            for _ in range(number % 4 if op == "drain" else 1):
                got = _outcome(decoder.next_frame)
                assert got == _outcome(reference.next_frame)
                if got is FramingError:
                    return  # the connection closes
        assert decoder.buffered == len(reference.buf)
