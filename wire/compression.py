"""The four record-batch codecs (attribute bits 0-2), via cramjam.

    0 none | 1 gzip | 2 snappy | 3 lz4 | 4 zstd | 5-7 invalid

* gzip: a gzip stream (RFC 1952).
* snappy: Java writes snappy-java's *xerial* framing: the 8-byte magic ``\\x82SNAPPY\\x00``, int32
  version and int32 minimum compatible version, then blocks of ``int32 size`` + a raw snappy
  block. librdkafka writes one raw snappy block. Both are read; xerial is written (what Java and
  kafka-python send, and every client reads).
* lz4: the LZ4 *frame* format (Kafka's magic 0/1 header-checksum quirk does not apply to v2).
* zstd: one or more zstd frames, with or without a content size (zstd-jni streams omit it).

The produce path reads a compressed batch with ``stream_decompress``: the decompressed bytes
come in chunks of at most ``CHUNK`` bytes, and a stream that would pass ``limit`` bytes in all
is stopped there (``DecompressedTooLarge``), so memory stays bounded however far a payload
expands (gzip: zlib with ``max_length``; lz4: ``lz4.frame`` with ``max_length``; zstd:
``zstandard``'s stream reader; snappy: block by block, each block's declared size checked
against ``limit`` and against snappy's largest possible expansion before it is
decompressed). Stored batches are still served untouched.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

import cramjam
import lz4.frame
import zstandard

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size
_BLOCK_SIZE = struct.Struct(">i")


CHUNK = 1 << 18  # decompressed bytes handed over at a time (256 KiB: scanned while in cache)
# A snappy copy element turns 3 bytes into at most 64: no valid block expands more than this.
_SNAPPY_MAX_RATIO = 22


_ZSTD = zstandard.ZstdDecompressor()
_POOL: list[bytearray] = []  # CHUNK-sized output buffers for zstd, reused across batches


class CompressionError(ValueError):
    """Unknown codec, or bytes the codec cannot decompress."""


class DecompressedTooLarge(CompressionError):
    """The payload decompresses to more than the caller's limit."""


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """``data`` compressed with ``codec`` at ``level`` (None, or gzip's -1: the codec's default
    level; snappy has none)."""
    if codec == NONE:
        return data
    if codec == GZIP:
        if level is None or level == -1:
            return bytes(cramjam.gzip.compress(data))
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data, level=level))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=level))
    raise CompressionError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    if codec == NONE:
        return bytes(data)
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(bytes(data)))
        if codec == SNAPPY:
            if bytes(data[:8]) == XERIAL_MAGIC:
                return _xerial_decompress(data)
            return bytes(cramjam.snappy.decompress_raw(bytes(data)))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(bytes(data)))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(bytes(data)))
    except CompressionError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError, and ValueError
        raise CompressionError(f"{CODEC_NAMES[codec]}: {exc}") from exc
    raise CompressionError(f"unknown compression codec {codec}")


def _xerial_compress(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)]
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        parts += (_BLOCK_SIZE.pack(len(block)), block)
    return b"".join(parts)


def _xerial_decompress(data: bytes | bytearray | memoryview) -> bytes:
    return b"".join(bytes(cramjam.snappy.decompress_raw(block)) for block in _xerial_blocks(data))


def _xerial_blocks(data: bytes | bytearray | memoryview) -> Iterator[bytes]:
    """The raw snappy blocks of a xerial stream."""
    if len(data) < _XERIAL_HEADER.size:
        raise CompressionError("truncated xerial snappy header")
    pos = _XERIAL_HEADER.size
    while pos < len(data):
        if pos + 4 > len(data):
            raise CompressionError("truncated xerial snappy block size")
        (size,) = _BLOCK_SIZE.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise CompressionError(f"xerial snappy block of {size} bytes overruns the data")
        yield bytes(data[pos : pos + size])
        pos += size


def stream_decompress(
    codec: int, data: bytes | bytearray | memoryview, limit: int, chunk: int = CHUNK
) -> Iterator[bytes | memoryview]:
    """The decompressed bytes of ``data`` in pieces of at most ``chunk`` bytes (snappy: at most
    one block); CompressionError for bytes the codec refuses, DecompressedTooLarge as soon as
    more than ``limit`` bytes come out. A piece may be a view into a buffer that the next piece
    overwrites: copy what must outlive the next step."""
    total = 0
    try:
        for piece in _stream(codec, data, limit, chunk):
            total += len(piece)
            if total > limit:
                raise DecompressedTooLarge(f"decompresses to more than {limit} bytes")
            if piece:
                yield piece
    except CompressionError:
        raise
    except (
        zlib.error,
        zstandard.ZstdError,
        cramjam.DecompressionError,
        RuntimeError,
        ValueError,
    ) as exc:
        raise CompressionError(f"{CODEC_NAMES.get(codec, codec)}: {exc}") from exc


def _stream(
    codec: int, data: bytes | bytearray | memoryview, limit: int, chunk: int
) -> Iterator[bytes | memoryview]:
    if codec == GZIP:
        yield from _gzip_stream(bytes(data), chunk)
    elif codec == SNAPPY:
        yield from _snappy_stream(bytes(data), limit)
    elif codec == LZ4:
        lz = lz4.frame.LZ4FrameDecompressor()
        out = lz.decompress(bytes(data), max_length=chunk)
        while True:
            yield out
            if lz.eof:  # Kafka's lz4 reader reads one frame; anything after it is ignored
                return
            if lz.needs_input:
                raise CompressionError("lz4: truncated frame")
            out = lz.decompress(b"", max_length=chunk)
    elif codec == ZSTD:
        reader = _ZSTD.stream_reader(bytes(data), read_across_frames=True)
        out = _POOL.pop() if _POOL else bytearray(CHUNK)
        try:  # into a reused buffer: no fresh buffer per chunk
            view = memoryview(out)[:chunk]
            while n := reader.readinto(view):
                yield view[:n]
        finally:
            if len(_POOL) < 4:
                _POOL.append(out)
    else:
        raise CompressionError(f"unknown compression codec {codec}")


def _gzip_stream(data: bytes, chunk: int) -> Iterator[bytes]:
    """Members one after the other, as Java's GZIPInputStream reads them; bytes after a member
    that do not start another one are ignored, as there."""
    while True:
        d = zlib.decompressobj(wbits=31)
        pending = data
        while not d.eof:
            out = d.decompress(pending, chunk)
            pending = d.unconsumed_tail
            if not out and not pending:
                raise CompressionError("gzip: truncated stream")
            yield out
        data = d.unused_data
        if data[:2] != b"\x1f\x8b":
            return


def _snappy_stream(data: bytes, limit: int) -> Iterator[bytes]:
    """xerial blocks one at a time, or one raw block (what librdkafka writes), each checked by
    its declared size before it is decompressed."""
    if data[:8] != XERIAL_MAGIC:
        yield _snappy_block(data, limit)
        return
    for block in _xerial_blocks(data):
        yield _snappy_block(block, limit)


def _snappy_block(block: bytes, limit: int) -> bytes:
    declared = shift = 0
    for i, byte in enumerate(block[:5]):
        declared |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
        if i == 4:
            raise CompressionError("snappy: bad length preamble")
    if declared > limit:
        raise DecompressedTooLarge(f"a snappy block declares {declared} bytes, over {limit}")
    if declared > _SNAPPY_MAX_RATIO * len(block) + 64:
        raise CompressionError(f"snappy: {len(block)} bytes cannot hold {declared}")
    return bytes(cramjam.snappy.decompress_raw(block))
