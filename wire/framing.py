"""Size-prefixed frames: bytes in, frames out, no I/O.

Every Kafka request and response is ``int32 size`` (big-endian, signed) followed by ``size``
bytes. ``FrameDecoder`` is fed whatever the socket delivered and hands out whole frames.

Bytes are appended to one buffer and consumed by advancing a read position, so a chunk holding
many small frames costs one copy per frame, not one copy of the remaining buffer per frame. The
consumed prefix is dropped when the buffer is empty, or when it is both large and more than half
of the buffer (amortised O(1) per byte). A chunk fed into an empty buffer that is exactly one
whole frame (a request/response client's every read) skips the buffer: it is copied once, as
the frame ``next_frame`` returns.
"""

from __future__ import annotations

import enum
import struct

from wire.errors import FramingError

_SIZE = struct.Struct(">i")
_COMPACT_AT = 64 * 1024  # drop a consumed prefix at least this long once it is half the buffer


class Want(enum.Enum):
    MORE = "feed more bytes"
    EOF = "peer closed between frames"


class FrameDecoder:
    def __init__(self, max_frame: int = 100 * 1024 * 1024) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._eof = False
        # Bytes fed into an empty buffer that hold exactly one whole frame: that frame, copied
        # once (not into the buffer, then out of it), for ``next_frame`` to check and return.
        # A request/response client's every read is one such frame.
        self._whole: bytes | None = None
        # the largest frame accepted; the owner may change it between frames (a SASL listener
        # allows smaller ones until the client is authenticated)
        self.max_frame = max_frame

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add bytes from the peer; ``b""`` means the peer closed its side."""
        if not data:
            self._eof = True
        elif self._eof:
            raise FramingError("bytes fed after end of stream")
        elif self._whole is None and not self._buf and _is_one_frame(data):
            self._whole = bytes(data[4:])
        else:
            self._unwhole()
            self._buf += data

    def _unwhole(self) -> None:
        """Put a pending whole frame back into the buffer, as it came."""
        whole = self._whole
        if whole is not None:
            self._whole = None
            self._buf += _SIZE.pack(len(whole))
            self._buf += whole

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned in a frame."""
        whole = 0 if self._whole is None else 4 + len(self._whole)
        return len(self._buf) - self._pos + whole

    def next_frame(self) -> bytes | Want:
        """The next whole frame (without its size prefix), or what the decoder is waiting for.

        Raises FramingError on a negative or oversized size, as soon as the size is readable,
        and when the stream ended inside a frame.
        """
        whole = self._whole
        if whole is not None:
            if len(whole) <= self.max_frame:
                self._whole = None
                return whole
            self._unwhole()  # too large for the limit now: the buffer's path refuses it
        buf, pos = self._buf, self._pos
        avail = len(buf) - pos
        if avail >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if not 0 <= size <= self.max_frame:
                other = foreign_protocol(bytes(buf[pos : pos + 4]))
                if other is not None:
                    raise FramingError(f"{other}: this listener is PLAINTEXT Kafka")
                raise FramingError(f"frame of {size} bytes (limit {self.max_frame})")
            end = pos + 4 + size
            if end <= len(buf):
                with memoryview(buf) as view:
                    frame = bytes(view[pos + 4 : end])
                self._consumed(end)
                return frame
        if not self._eof:
            return Want.MORE
        if avail:
            raise FramingError(f"stream ended inside a frame ({avail} bytes left)")
        return Want.EOF

    def _consumed(self, end: int) -> None:
        if end == len(self._buf):
            self._buf.clear()
            self._pos = 0
        elif end >= _COMPACT_AT and end * 2 >= len(self._buf):
            del self._buf[:end]
            self._pos = 0
        else:
            self._pos = end


def _is_one_frame(data: bytes | bytearray | memoryview) -> bool:
    """``data`` is one size prefix and exactly that many bytes."""
    n = len(data)
    return n >= 4 and _SIZE.unpack_from(data, 0)[0] == n - 4


_TLS_HANDSHAKE = 0x16  # TLS record type of a ClientHello, then version 3.x
_HTTP_STARTS = (b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC", b"CONN", b"PRI ")


def foreign_protocol(first4: bytes) -> str | None:
    """What else the first four bytes of a stream look like, if they are not a sane Kafka size
    prefix: a TLS handshake or an HTTP request (both read as sizes of hundreds of MB)."""
    if len(first4) == 4 and first4[0] == _TLS_HANDSHAKE and first4[1] == 3 and first4[2] <= 4:
        return "looks like a TLS handshake"
    if first4 in _HTTP_STARTS:
        return "looks like an HTTP request"
    return None


def encode_frame(payload: bytes | bytearray | memoryview) -> bytes:
    """``payload`` with its 4-byte big-endian size prefix."""
    return b"".join((_SIZE.pack(len(payload)), payload))
