"""The record scanner of produce validation: one pass over the records of a v2 batch.

``scan_records`` walks records laid end to end in a buffer and checks each one as Kafka's
``DefaultRecord.readFrom`` does, without copying keys, values or headers::

    length varint | attributes i8 | timestamp_delta varlong | offset_delta varint
    | key_length varint (negative: null) | key | value_length varint (negative: null) | value
    | header_count varint (>= 0) | per header: key_length varint (>= 0), key,
                                              value_length varint (negative: null), value

Varints are Kafka's: a varint is at most 5 bytes and keeps the low 32 bits, a varlong at most
10 bytes and keeps the low 64 bits, both zigzag. Every field must lie inside its record and
the fields must fill the record's declared length exactly (Kafka's full reader; the
skip-key-value reader Kafka uses for compressed batches does not check that last point).

It returns ``(status, pos, n, need, max_ts, consecutive)`` after ``n`` records:

* ``DONE``: ``max_records`` records were read; ``pos`` is just after the last one.
* ``MORE``: the record at ``pos`` does not end inside ``[pos, end)``; ``need`` is its full size
  from ``pos`` (0 when even its length varint is cut short). For a compressed batch the
  caller feeds more decompressed bytes; for an uncompressed one the batch is cut short.
* ``BAD``: the record at ``pos`` is malformed; ``need`` is one of the ``WHY`` codes.

Alongside, per record (index ``first_index + i``): its timestamp is ``base_timestamp +
timestamp_delta`` (64-bit wrap, as Java's long). With ``need_keys`` a record without a key
is appended to ``bad_keys`` (and its timestamp is not checked, as in Kafka's
``validateRecord``); with ``check_timestamps`` a timestamp other than -1 outside
``[now - before_max, now + after_max]`` (Kafka's arithmetic, wrap included) appends
``(index, timestamp, offset_delta)`` to ``bad_timestamps``. ``max_ts`` is the largest
timestamp seen (at least -1, Kafka's NO_TIMESTAMP); ``consecutive`` is False once an offset
delta differs from its record's index.

``wire/_record_kernel.c`` is the same function compiled (built by ``pip install``; the
produce path needs it to keep a per-record cost in nanoseconds); ``scan_records`` below is
the reference and the fallback when the extension is not built, and a hypothesis test holds
the two to the same answers.
"""

from __future__ import annotations

from typing import Final

DONE, MORE, BAD = 0, 1, 2

WHY: Final = {
    1: "overlong varint",
    2: "negative record length",
    3: "a field runs past the end of its record",
    4: "negative header count",
    5: "negative header key length",
    6: "record contents do not fill its declared length",
}
_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF
_S64 = 1 << 63
ScanResult = tuple[int, int, int, int, int, bool]


class _Bad(Exception):
    def __init__(self, why: int) -> None:
        self.why = why


def _wrap64(x: int) -> int:
    x &= _M64
    return x - (1 << 64) if x & _S64 else x


def _varint(buf: bytes | bytearray | memoryview, pos: int, end: int, wide: bool) -> tuple[int, int]:
    """Kafka's readVarint (``wide`` False, 5 bytes, low 32 bits) or readVarlong (10, 64)."""
    raw = shift = 0
    limit = 10 if wide else 5
    for i in range(limit):
        if pos + i >= end:
            raise _Bad(3)
        b = buf[pos + i]
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            raw &= _M64 if wide else _M32
            value = (raw >> 1) ^ -(raw & 1)
            return value, pos + i + 1
        shift += 7
    raise _Bad(1)


def _length_varint(
    buf: bytes | bytearray | memoryview, pos: int, end: int
) -> tuple[int, int] | None:
    """The record length at ``pos``; None if the buffer ends inside it."""
    try:
        return _varint(buf, pos, end, False)
    except _Bad as bad:
        if bad.why == 3:
            return None
        raise


def scan_records(
    buf: bytes | bytearray | memoryview,
    pos: int,
    end: int,
    max_records: int,
    first_index: int,
    base_timestamp: int,
    now: int,
    before_max: int,
    after_max: int,
    check_timestamps: bool,
    need_keys: bool,
    bad_keys: list[int],
    bad_timestamps: list[tuple[int, int, int | None]],
) -> ScanResult:
    """See the module docstring."""
    n = 0
    max_ts = -1
    consecutive = True
    while n < max_records:
        start = pos
        try:  # one-byte varints (almost all of them) inline, others through _varint
            if pos < end and (b := buf[pos]) < 0x80:
                length, q = (b >> 1) ^ -(b & 1), pos + 1
            else:
                got = _length_varint(buf, pos, end)
                if got is None:
                    return MORE, start, n, 0, max_ts, consecutive
                length, q = got
            if length < 0:
                raise _Bad(2)
            stop = q + length
            if stop > end:
                return MORE, start, n, stop - start, max_ts, consecutive
            q += 1  # attributes (unused in v2)
            if q > stop:
                raise _Bad(3)
            if q < stop and (b := buf[q]) < 0x80:
                ts_delta, q = (b >> 1) ^ -(b & 1), q + 1
            else:
                ts_delta, q = _varint(buf, q, stop, True)
            if q < stop and (b := buf[q]) < 0x80:
                offset_delta, q = (b >> 1) ^ -(b & 1), q + 1
            else:
                offset_delta, q = _varint(buf, q, stop, False)
            if q < stop and (b := buf[q]) < 0x80:
                key_len, q = (b >> 1) ^ -(b & 1), q + 1
            else:
                key_len, q = _varint(buf, q, stop, False)
            if key_len > 0:
                q += key_len
                if q > stop:
                    raise _Bad(3)
            if q < stop and (b := buf[q]) < 0x80:
                value_len, q = (b >> 1) ^ -(b & 1), q + 1
            else:
                value_len, q = _varint(buf, q, stop, False)
            if value_len > 0:
                q += value_len
                if q > stop:
                    raise _Bad(3)
            headers, q = _varint(buf, q, stop, False)
            if headers < 0:
                raise _Bad(4)
            for _ in range(headers):
                size, q = _varint(buf, q, stop, False)
                if size < 0:
                    raise _Bad(5)
                q += size
                if q > stop:
                    raise _Bad(3)
                size, q = _varint(buf, q, stop, False)
                if size > 0:
                    q += size
                    if q > stop:
                        raise _Bad(3)
            if q != stop:
                raise _Bad(6)
        except _Bad as bad:
            return BAD, start, n, bad.why, max_ts, consecutive
        index = first_index + n
        ts = base_timestamp + ts_delta
        if not -_S64 <= ts < _S64:
            ts = _wrap64(ts)
        if ts > max_ts:
            max_ts = ts
        if offset_delta != index:
            consecutive = False
        if need_keys and key_len < 0:
            bad_keys.append(index)
        elif check_timestamps and ts != -1:
            diff = _wrap64(now - ts)
            if diff > before_max or _wrap64(-diff) > after_max:
                bad_timestamps.append((index, ts, offset_delta))
        pos = stop
        n += 1
    return DONE, pos, n, 0, max_ts, consecutive


python_scan_records = scan_records
NATIVE = False
try:  # the compiled twin (wire/_record_kernel.c), when the install step built it
    from wire._record_kernel import scan_records as _native_scan_records
except ImportError:  # pragma: no cover - depends on the build
    pass
else:
    scan_records = _native_scan_records
    NATIVE = True
