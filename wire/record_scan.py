"""Fast record scanning for replays: (offset delta, key, value) of each record of a batch,
headers skipped, with a one-byte fast path for the varints (most of them are one byte). Used
where whole partitions are read back at startup (the group coordinator's replay of
``__consumer_offsets``); ``decode_batch_records`` stays the general decoder.

Kept twice for speed: the log cleaner's ``storage.cleaner.rewrite.scan_records`` is the same
loop reading other fields (timestamps, tombstones, byte ranges). tests/wire/test_record_scan.py
checks that both read what the general decoder reads."""

from __future__ import annotations

from wire.batch import BATCH_HEADER_SIZE, RecordBatchError, read_batch_header
from wire.compression import CompressionError, decompress
from wire.record_codec import read_varint


def varint_at(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint/varlong at ``pos``: (value, next position); the slow path of the
    inlined one-byte reads here and in the log cleaner's record scan."""
    return read_varint(buf, pos, 10)


def key_values(batch: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset delta, key, value) of every record of the batch at the start of ``batch``.
    Raises RecordBatchError for a malformed batch."""
    h = read_batch_header(batch)
    if h.total_size > len(batch) or h.records_count < 0:
        raise RecordBatchError("truncated batch or negative record count")
    body = bytes(batch[BATCH_HEADER_SIZE : h.total_size])
    if h.compression:
        try:
            body = decompress(h.compression, body)
        except CompressionError as exc:
            raise RecordBatchError(str(exc)) from exc
    out: list[tuple[int, bytes | None, bytes | None]] = []
    append = out.append
    pos, n = 0, len(body)
    try:
        for _ in range(h.records_count):
            b = body[pos]
            if b < 0x80:
                length, q = (b >> 1) ^ -(b & 1), pos + 1
            else:
                length, q = varint_at(body, pos)
            end = q + length
            if length < 1 or end > n:
                raise RecordBatchError(f"record of {length} bytes at {pos} overruns the batch")
            q += 1  # attributes
            q = q + 1 if body[q] < 0x80 else varint_at(body, q)[1]  # timestamp delta
            b = body[q]
            if b < 0x80:
                delta, q = (b >> 1) ^ -(b & 1), q + 1
            else:
                delta, q = varint_at(body, q)
            b = body[q]
            if b < 0x80:
                size, q = (b >> 1) ^ -(b & 1), q + 1
            else:
                size, q = varint_at(body, q)
            key = None
            if size >= 0:
                key, q = body[q : q + size], q + size
            b = body[q]
            if b < 0x80:
                size, q = (b >> 1) ^ -(b & 1), q + 1
            else:
                size, q = varint_at(body, q)
            value = None
            if size >= 0:
                value, q = body[q : q + size], q + size
            if q > end:
                raise RecordBatchError("a field runs past the end of its record")
            append((delta, key, value))
            pos = end
    except IndexError as exc:
        raise RecordBatchError("truncated record") from exc
    if pos != n:
        raise RecordBatchError(f"{n - pos} bytes left after {h.records_count} records")
    return out
