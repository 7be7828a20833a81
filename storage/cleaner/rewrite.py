"""Batch bytes for the cleaner: parsing a segment's batches and rebuilding filtered ones.

A rebuilt batch keeps everything Kafka's ``MemoryRecords.filterTo`` keeps: base offset, last
offset delta (``overrideLastOffset``: the producer's last sequence number survives), producer
id, epoch and base sequence, partition leader epoch, the transactional and control flags, the
timestamp type and the compression codec (records are recompressed with it). With a delete
horizon, attribute bit 6 is set and ``baseTimestamp`` is the horizon, record timestamp deltas
being relative to it. With no records left it is Kafka's ``writeEmptyHeader``: no records, no
compression, both timestamps the original batch's max timestamp.
"""

from __future__ import annotations

import struct

import crc32c

from storage.cleaner.decide import Batch, RecordView
from wire.record_scan import varint_at
from wire.records import (
    ATTR_COMPRESSION_MASK,
    ATTR_DELETE_HORIZON,
    BATCH_HEADER_SIZE,
    CRC_START,
    LOG_OVERHEAD,
    Record,
    RecordBatchError,
    compress,
    decode_records,
    decompress,
    encode_record,
    iter_batches,
)

_BEFORE_CRC = struct.Struct(">qiibI")
_AFTER_CRC = struct.Struct(">hiqqqhii")


def scan_records(payload: bytes, count: int) -> list[RecordView]:
    """The records of an uncompressed payload: offset and timestamp deltas, key, whether the
    value is null, and each record's byte range. Values and headers are skipped, not decoded
    (the cleaner's hot loop: short varints take a fast path). Kept twice for speed, with
    ``wire.record_scan.key_values``; tests/wire/test_record_scan.py checks both against the
    general decoder."""
    out = []
    pos, n = 0, len(payload)
    for _ in range(count):
        b = payload[pos] if pos < n else 0x80
        if b < 0x80:
            length, body = (b >> 1) ^ -(b & 1), pos + 1
        elif pos + 1 < n and (b2 := payload[pos + 1]) < 0x80:  # two bytes: most records
            raw = (b & 0x7F) | (b2 << 7)
            length, body = (raw >> 1) ^ -(raw & 1), pos + 2
        else:
            length, body = varint_at(payload, pos)
        end = body + length
        if length < 1 or end > n:
            raise RecordBatchError(f"record of {length} bytes at {pos} overruns the batch")
        q = body + 1  # attributes
        b = payload[q]
        if b < 0x80:
            ts_delta, q = (b >> 1) ^ -(b & 1), q + 1
        else:
            ts_delta, q = varint_at(payload, q)
        b = payload[q]
        if b < 0x80:
            offset_delta, q = (b >> 1) ^ -(b & 1), q + 1
        else:
            offset_delta, q = varint_at(payload, q)
        b = payload[q]
        if b < 0x80:
            key_len, q = (b >> 1) ^ -(b & 1), q + 1
        else:
            key_len, q = varint_at(payload, q)
        key = None
        if key_len >= 0:
            key, q = payload[q : q + key_len], q + key_len
        if q >= end:
            raise RecordBatchError(f"record at {pos} ends inside its key")
        # a null value's length is the varint -1, i.e. the single byte 0x01 (zigzag)
        out.append(RecordView(offset_delta, ts_delta, key, payload[q] == 1, pos, end))
        pos = end
    if pos != n:
        raise RecordBatchError(f"{n - pos} bytes left after {count} records")
    return out


def parse_batches(data: bytes) -> list[Batch]:
    """Every batch of ``data`` with its records scanned (decompressed as needed). Raises
    RecordBatchError."""
    out = []
    for pos, h in iter_batches(data):
        raw = data[pos : pos + h.total_size]
        if len(raw) < h.total_size:
            raise RecordBatchError(f"truncated batch at {pos}")
        body = raw[BATCH_HEADER_SIZE:]
        payload = decompress(h.compression, body) if h.compression else body
        records = scan_records(payload, h.records_count) if h.records_count else []
        out.append(Batch(h, records, raw, payload))
    return out


def rebuild(b: Batch, records: list[RecordView], horizon: int | None) -> bytes:
    """``b`` with only ``records`` (a subset of its own, in order) and delete ``horizon``."""
    h = b.header
    keep_attrs = h.attributes & ~(ATTR_DELETE_HORIZON | ATTR_COMPRESSION_MASK)
    if not records:
        attributes, base_ts, max_ts, body = keep_attrs, h.max_timestamp, h.max_timestamp, b""
    else:
        stamps = [b.record_timestamp(r) for r in records]
        max_ts = h.max_timestamp if h.log_append_time else max(stamps)
        attributes = (
            keep_attrs | h.compression | (ATTR_DELETE_HORIZON if horizon is not None else 0)
        )
        if horizon == b.delete_horizon:  # the same base timestamp: copy the records' bytes
            base_ts = h.base_timestamp
            raw = b"".join(b.payload[r.start : r.end] for r in records)
        else:  # a new base timestamp (the horizon): re-encode the records with new deltas
            base_ts = horizon if horizon is not None else stamps[0]
            full = {r.offset_delta: r for r in decode_records(b.payload, h.records_count)}
            raw = b"".join(
                encode_record(_restamped(full[r.offset_delta], ts - base_ts))
                for r, ts in zip(records, stamps, strict=True)
            )
        body = compress(h.compression, raw) if h.compression else raw
    after = (
        _AFTER_CRC.pack(
            attributes,
            h.last_offset_delta,
            base_ts,
            max_ts,
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            len(records),
        )
        + body
    )
    length = len(after) + CRC_START - LOG_OVERHEAD
    before = _BEFORE_CRC.pack(
        h.base_offset, length, h.partition_leader_epoch, 2, crc32c.crc32c(after)
    )
    out = before + after
    assert len(out) >= BATCH_HEADER_SIZE
    return out


def _restamped(r: Record, timestamp_delta: int) -> Record:
    return Record(r.offset_delta, timestamp_delta, r.key, r.value, r.headers)
