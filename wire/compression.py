"""The four record-batch codecs (attribute bits 0-2), via cramjam.

    0 none | 1 gzip | 2 snappy | 3 lz4 | 4 zstd | 5-7 invalid

* gzip: a gzip stream (RFC 1952).
* snappy: Java writes snappy-java's *xerial* framing: the 8-byte magic ``\\x82SNAPPY\\x00``, int32
  version and int32 minimum compatible version, then blocks of ``int32 size`` + a raw snappy
  block. librdkafka writes one raw snappy block. Both are read; xerial is written (what Java and
  kafka-python send, and every client reads).
* lz4: the LZ4 *frame* format (Kafka's magic 0/1 header-checksum quirk does not apply to v2).
* zstd: one or more zstd frames, with or without a content size (zstd-jni streams omit it).

Only tests, tools, control records and timestamp lookups compress or decompress: the produce
and fetch paths store and serve compressed batches untouched.
"""

from __future__ import annotations

import struct

import cramjam

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size
_BLOCK_SIZE = struct.Struct(">i")


class CompressionError(ValueError):
    """Unknown codec, or bytes the codec cannot decompress."""


def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
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
    if len(data) < _XERIAL_HEADER.size:
        raise CompressionError("truncated xerial snappy header")
    pos, out = _XERIAL_HEADER.size, []
    while pos < len(data):
        if pos + 4 > len(data):
            raise CompressionError("truncated xerial snappy block size")
        (size,) = _BLOCK_SIZE.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise CompressionError(f"xerial snappy block of {size} bytes overruns the data")
        out.append(bytes(cramjam.snappy.decompress_raw(bytes(data[pos : pos + size]))))
        pos += size
    return b"".join(out)
