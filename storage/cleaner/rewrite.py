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

from storage.cleaner.decide import Batch
from wire.records import (
    ATTR_COMPRESSION_MASK,
    ATTR_DELETE_HORIZON,
    BATCH_HEADER_SIZE,
    CRC_START,
    LOG_OVERHEAD,
    Record,
    RecordBatchError,
    compress,
    decode_batch_records,
    encode_record,
    iter_batches,
)

_BEFORE_CRC = struct.Struct(">qiibI")
_AFTER_CRC = struct.Struct(">hiqqqhii")


def parse_batches(data: bytes) -> list[Batch]:
    """Every batch of ``data`` with its records decoded. Raises RecordBatchError."""
    out = []
    for pos, h in iter_batches(data):
        raw = data[pos : pos + h.total_size]
        if len(raw) < h.total_size:
            raise RecordBatchError(f"truncated batch at {pos}")
        out.append(Batch(h, decode_batch_records(raw) if h.records_count else [], raw))
    return out


def rebuild(b: Batch, records: list[Record], horizon: int | None) -> bytes:
    """``b`` with only ``records`` (a subset of its own, in order) and delete ``horizon``."""
    h = b.header
    keep_attrs = h.attributes & ~(ATTR_DELETE_HORIZON | ATTR_COMPRESSION_MASK)
    if not records:
        attributes, base_ts, max_ts, body = keep_attrs, h.max_timestamp, h.max_timestamp, b""
    else:
        stamps = [b.record_timestamp(r) for r in records]
        base_ts = horizon if horizon is not None else stamps[0]
        max_ts = h.max_timestamp if h.log_append_time else max(stamps)
        attributes = (
            keep_attrs | h.compression | (ATTR_DELETE_HORIZON if horizon is not None else 0)
        )
        raw = b"".join(
            encode_record(Record(r.offset_delta, ts - base_ts, r.key, r.value, r.headers))
            for r, ts in zip(records, stamps, strict=True)
        )
        body = compress(h.compression, raw)
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
