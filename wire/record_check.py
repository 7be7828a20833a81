"""Produce validation of the records inside a batch, as Kafka's ``LogValidator`` does it.

Theory of operation
-------------------
``check_records`` runs after ``validate_produce_batch`` (header, CRC, counts) and reads every
record once with ``wire.record_kernel.scan_records``: record structure, the header's record
count against the records present (none missing, no bytes left over), keys on compacted
topics, and each record's timestamp against ``message.timestamp.before.max.ms`` /
``after.max.ms`` on CreateTime topics. It answers the batch to store, or the refusal:

    what                                                   answer            Kafka
    malformed record, count != records present, bytes     INVALID_RECORD    DefaultRecordBatch
      left over or missing, payload that does not                            iterators
      decompress (*)
    record without a key on a compacted topic              INVALID_RECORD    validateKey
    timestamp out of range (CreateTime topic)              INVALID_TIMESTAMP validateTimestamp
    LogAppendTime bit set by the client: on a              INVALID_TIMESTAMP validateTimestamp
      LogAppendTime topic, or with max timestamp -1
    decompresses to more than max_decompressed_bytes (*)   MESSAGE_TOO_LARGE -

Record errors (keys, timestamps) are collected over the whole batch and answered with their
batch indexes and Kafka's messages; a structural error stops the scan and carries no message
(Kafka answers those with a null error message).

What is stored (``RecordsAccepted``): on a CreateTime topic the batch's max timestamp is the
largest record timestamp, and a client-set LogAppendTime bit is cleared (Kafka's
``setMaxTimestamp``; the header is rewritten and the CRC recomputed only when one of them
changes). A compressed batch whose offset deltas are not 0..n-1 is rebuilt with consecutive
ones, its other record bytes unchanged (Kafka's ``buildRecordsAndAssignOffsets``).
LogAppendTime topics are stamped by the partition at append time.

Memory: an uncompressed batch is scanned in place. A compressed one is decompressed as a
stream (``wire.compression.stream_decompress``, 256 KiB at a time); a record cut by a chunk
boundary is carried over when it is at most ``CARRY_MAX`` bytes, and a larger one is walked
field by field with its key, value and header bytes skipped, so what is held does not depend
on how far the payload expands. Only the rare rebuild of point 2 holds the records (bounded
by ``max_decompressed_bytes``), as Kafka does there.

Deviations from Kafka (*): Kafka answers a payload its codec cannot read with
UNKNOWN_SERVER_ERROR (a KafkaException from the decompressing stream), which a produce must
never get (spec §3.3); we answer INVALID_RECORD. Kafka has no bound on the decompressed size
(it streams, skipping keys and values); we refuse a batch that expands past
``max_decompressed_bytes`` (64 x ``max.message.bytes``, at least 64 MiB, see the produce
handler) with MESSAGE_TOO_LARGE, the code on which the Java producer splits a batch, so no
consumer or log cleaner ever has to expand it. Kafka 4.x fails (UnsupportedOperationException,
UNKNOWN_SERVER_ERROR) on the rebuild of a compressed batch with non-consecutive offsets
because it read the records with its skip-key-value iterator; we rebuild as it intends.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import crc32c
from kio.schema.errors import ErrorCode

from wire.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BATCH_HEADER_SIZE,
    CRC_START,
    LOG_OVERHEAD,
    BatchHeader,
    read_batch_header,
    set_max_timestamp,
)
from wire.compression import (
    CHUNK,
    CompressionError,
    DecompressedTooLarge,
    compress,
    stream_decompress,
)
from wire.record_codec import read_varint, write_varint
from wire.record_kernel import BAD, DONE, WHY, scan_records

CHUNK_BYTES = CHUNK  # decompressed bytes scanned at a time (tests make it tiny)
CARRY_MAX = 1 << 20  # a record cut by a chunk boundary is joined up to this size, else walked
_ATTRS = struct.Struct(">h")
_TS = struct.Struct(">q")
_CRC = struct.Struct(">I")
_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. records_count
_BEFORE_CRC = struct.Struct(">qiibI")  # base_offset .. crc
RecordErrors = tuple[tuple[int, str], ...]
_CODEC_OR_LAT = ATTR_COMPRESSION_MASK | ATTR_TIMESTAMP_TYPE


class RecordPolicy(NamedTuple):
    """The topic's rules for the records of a produced batch. Named tuples here: one is built
    per produced batch, and a frozen dataclass costs a microsecond more to build."""

    now_ms: int
    log_append_time: bool  # message.timestamp.type=LogAppendTime
    before_max_ms: int
    after_max_ms: int
    compacted: bool
    max_decompressed_bytes: int
    partition: str  # "topic-N", for Kafka's messages
    target_compression: int | None = None  # the topic's codec (None: compression.type=producer)
    target_level: int | None = None  # its compression level (None: the codec's default)


class RecordsAccepted(NamedTuple):
    batch: bytes  # what to append (the client's bytes, or a fixed copy)
    header: BatchHeader


@dataclass(frozen=True, slots=True)
class RecordsRefused:
    code: ErrorCode
    message: str | None
    record_errors: RecordErrors = ()
    reason: str = ""  # for the broker's log


class _Refusal(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


@dataclass(slots=True)
class _Scan:
    """What one pass over the records found."""

    max_ts: int = -1
    consecutive: bool = True
    bad_keys: list[int] | None = None
    bad_timestamps: list[tuple[int, int, int | None]] | None = None  # offset None: type error


def check_records(
    data: bytes | bytearray | memoryview, header: BatchHeader, policy: RecordPolicy
) -> RecordsAccepted | RecordsRefused:
    """Validate every record of the batch that is the whole of ``data`` (it passed
    ``validate_produce_batch``). See the module docstring."""
    end = header.batch_length + LOG_OVERHEAD
    if not header.attributes & _CODEC_OR_LAT and not policy.target_compression and end == len(data):
        return _check_plain(data, header, policy)
    client_lat = header.log_append_time
    check_ts = not policy.log_append_time and not client_lat
    scan = _Scan(bad_keys=[], bad_timestamps=[])
    body = memoryview(data)[BATCH_HEADER_SIZE : header.total_size]
    try:
        if header.compression:
            payload = stream_decompress(
                header.compression, body, policy.max_decompressed_bytes, CHUNK_BYTES
            )
            _scan_stream(payload, header, policy, check_ts, scan)
        else:
            _scan_buffer(body, header, policy, check_ts, scan)
    except DecompressedTooLarge as exc:
        return RecordsRefused(
            ErrorCode.message_too_large,
            f"The batch {exc} (the limit on {policy.partition})",
            reason=str(exc),
        )
    except CompressionError as exc:
        return RecordsRefused(ErrorCode.invalid_record, None, reason=str(exc))
    except _Refusal as exc:
        return RecordsRefused(ErrorCode.invalid_record, None, reason=exc.reason)
    if client_lat:  # every record's timestamp is the header's max (Kafka's record iterator)
        scan.max_ts = header.max_timestamp
        _client_log_append_time(header, policy, scan)
    refused = _record_errors(scan, policy)
    if refused is not None:
        return refused
    target = policy.target_compression
    recompress = target is not None and target != header.compression
    if recompress or (header.compression and not scan.consecutive):
        codec = header.compression if target is None else target
        fixed_ts = header.max_timestamp if client_lat else None
        level = policy.target_level if codec == target else None
        rebuilt = _rebuild(data, header, policy, fixed_ts, codec, level)
        return RecordsAccepted(rebuilt, read_batch_header(rebuilt))
    as_sent = policy.log_append_time or (not client_lat and header.max_timestamp == scan.max_ts)
    return _accepted(data, header, scan.max_ts, as_sent)


def _check_plain(
    data: bytes | bytearray | memoryview, header: BatchHeader, policy: RecordPolicy
) -> RecordsAccepted | RecordsRefused:
    """``check_records`` of the usual batch: uncompressed, CreateTime from the client, on a
    topic that keeps it uncompressed (nothing to rebuild), exactly ``data``, scanned in place
    in one call; the same answers as the general path below."""
    bad_keys: list[int] = []
    bad_timestamps: list[tuple[int, int, int | None]] = []
    end = len(data)
    status, pos, _n, need, max_ts, _consecutive = scan_records(
        data,
        BATCH_HEADER_SIZE,
        end,
        header.records_count,
        0,
        header.base_timestamp,
        policy.now_ms,
        policy.before_max_ms,
        policy.after_max_ms,
        not policy.log_append_time,
        policy.compacted,
        bad_keys,
        bad_timestamps,
    )
    reason = _scan_refusal(status, pos, need, end)
    if reason is not None:
        return RecordsRefused(ErrorCode.invalid_record, None, reason=reason)
    if bad_keys or bad_timestamps:
        refused = _record_errors(_Scan(max_ts, True, bad_keys, bad_timestamps), policy)
        assert refused is not None
        return refused
    return _accepted(data, header, max_ts, policy.log_append_time or header.max_timestamp == max_ts)


def _accepted(
    data: bytes | bytearray | memoryview, header: BatchHeader, max_ts: int, as_sent: bool
) -> RecordsAccepted:
    """The client's bytes (``as_sent``), or a copy whose header carries ``max_ts``."""
    if as_sent:
        return RecordsAccepted(bytes(data), header)
    fixed = bytearray(data)
    set_max_timestamp(fixed, max_ts, log_append_time=False)
    return RecordsAccepted(bytes(fixed), read_batch_header(fixed))


# -- scanning ---------------------------------------------------------------------------------


def _scan_buffer(
    body: memoryview, header: BatchHeader, policy: RecordPolicy, check_ts: bool, scan: _Scan
) -> None:
    status, pos, _n, need, max_ts, consecutive = _scan(
        body, 0, header.records_count, 0, header, policy, check_ts, scan
    )
    reason = _scan_refusal(status, pos, need, len(body))
    if reason is not None:
        raise _Refusal(reason)
    scan.max_ts, scan.consecutive = max_ts, consecutive


def _scan_refusal(status: int, pos: int, need: int, end: int) -> str | None:
    """Why a scan of records that should end exactly at ``end`` refuses the batch, or None."""
    if status == BAD:
        return f"record: {WHY.get(need, need)}"
    if status != DONE:
        return "Incorrect declared batch size, premature EOF reached"
    if pos != end:
        return "Incorrect declared batch size, records still remaining in file"
    return None


def _scan(
    buf: bytes | memoryview,
    pos: int,
    count: int,
    index: int,
    header: BatchHeader,
    policy: RecordPolicy,
    check_ts: bool,
    scan: _Scan,
) -> tuple[int, int, int, int, int, bool]:
    assert scan.bad_keys is not None and scan.bad_timestamps is not None
    return scan_records(
        buf,
        pos,
        len(buf),
        count,
        index,
        header.base_timestamp,
        policy.now_ms,
        policy.before_max_ms,
        policy.after_max_ms,
        check_ts,
        policy.compacted,
        scan.bad_keys,
        scan.bad_timestamps,
    )


def _scan_stream(
    chunks: Iterator[bytes | memoryview],
    header: BatchHeader,
    policy: RecordPolicy,
    check_ts: bool,
    scan: _Scan,
) -> None:
    count, index = header.records_count, 0
    buf: bytes | memoryview = b""
    pos = 0
    while index < count:
        status, pos, n, need, max_ts, consecutive = _scan(
            buf, pos, count - index, index, header, policy, check_ts, scan
        )
        index += n
        scan.max_ts = max(scan.max_ts, max_ts)
        scan.consecutive = scan.consecutive and consecutive
        if status == BAD:
            raise _Refusal(f"record {index}: {WHY.get(need, need)}")
        if status == DONE:
            break
        if need > CARRY_MAX:  # a large record: walked without holding it
            walker = _Walker(buf, pos, chunks)
            _walk_record(walker, index, header, policy, check_ts, scan)
            buf, pos = walker.rest()
            index += 1
            continue
        tail = bytes(buf[pos:])  # before the next chunk, which may reuse buf's memory
        more = next(chunks, None)
        if more is None:
            raise _Refusal("Incorrect declared batch size, premature EOF reached")
        buf, pos = tail + more, 0
    if pos != len(buf) or next(chunks, None) is not None:
        raise _Refusal("Incorrect declared batch size, records still remaining in file")


class _Walker:
    """Reads a record field by field across decompressed chunks, skipping bytes unseen."""

    def __init__(
        self, buf: bytes | memoryview, pos: int, chunks: Iterator[bytes | memoryview]
    ) -> None:
        self.buf, self.pos, self.chunks = buf, pos, chunks
        self.consumed = 0  # bytes of the current record read so far

    def byte(self) -> int:
        while self.pos >= len(self.buf):
            more = next(self.chunks, None)
            if more is None:
                raise _Refusal("Incorrect declared batch size, premature EOF reached")
            self.buf, self.pos = more, 0
        b = self.buf[self.pos]
        self.pos += 1
        self.consumed += 1
        return b

    def varint(self, wide: bool) -> int:
        raw = shift = 0
        for _ in range(10 if wide else 5):
            b = self.byte()
            raw |= (b & 0x7F) << shift
            if b < 0x80:
                raw &= (1 << 64) - 1 if wide else 0xFFFFFFFF
                return (raw >> 1) ^ -(raw & 1)
            shift += 7
        raise _Refusal(f"record: {WHY[1]}")

    def skip(self, n: int) -> None:
        while n > 0:
            if self.pos >= len(self.buf):
                more = next(self.chunks, None)
                if more is None:
                    raise _Refusal("Incorrect declared batch size, premature EOF reached")
                self.buf, self.pos = more, 0
            step = min(n, len(self.buf) - self.pos)
            self.pos += step
            self.consumed += step
            n -= step

    def rest(self) -> tuple[bytes | memoryview, int]:
        return self.buf, self.pos


def _walk_record(
    w: _Walker, index: int, header: BatchHeader, policy: RecordPolicy, check_ts: bool, scan: _Scan
) -> None:
    """``scan_records`` for one record too large to hold (see wire/record_kernel.py)."""
    assert scan.bad_keys is not None and scan.bad_timestamps is not None
    length = w.varint(False)
    w.consumed = 0

    def field(size: int) -> None:
        if w.consumed + size > length:
            raise _Refusal(f"record {index}: {WHY[3]}")
        w.skip(size)

    w.skip(1)
    ts_delta = w.varint(True)
    offset_delta = w.varint(False)
    key_len = w.varint(False)
    field(max(key_len, 0))
    field(max(w.varint(False), 0))
    headers = w.varint(False)
    if headers < 0:
        raise _Refusal(f"record {index}: {WHY[4]}")
    for _ in range(headers):
        size = w.varint(False)
        if size < 0:
            raise _Refusal(f"record {index}: {WHY[5]}")
        field(size)
        field(max(w.varint(False), 0))
    if w.consumed != length:
        raise _Refusal(f"record {index}: {WHY[6]}")
    ts = _wrap64(header.base_timestamp + ts_delta)
    scan.max_ts = max(scan.max_ts, ts)
    if offset_delta != index:
        scan.consecutive = False
    if policy.compacted and key_len < 0:
        scan.bad_keys.append(index)
    elif check_ts and ts != -1:
        diff = _wrap64(policy.now_ms - ts)
        if diff > policy.before_max_ms or _wrap64(-diff) > policy.after_max_ms:
            scan.bad_timestamps.append((index, ts, offset_delta))


def _wrap64(x: int) -> int:
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >> 63 else x


# -- answers ----------------------------------------------------------------------------------


def _record_errors(scan: _Scan, policy: RecordPolicy) -> RecordsRefused | None:
    """Kafka's processRecordErrors: INVALID_TIMESTAMP if any timestamp error, else
    INVALID_RECORD; every record error is listed with its batch index."""
    keys, stamps = scan.bad_keys or [], scan.bad_timestamps or []
    if not keys and not stamps:
        return None
    low = _wrap64(policy.now_ms - policy.before_max_ms)
    high = _wrap64(policy.now_ms + policy.after_max_ms)
    key_message = (
        f"Compacted topic cannot accept message without key in topic partition {policy.partition}."
    )
    errors = sorted(
        [(i, key_message) for i in keys]
        + [
            (
                i,
                _LAT_MESSAGE
                if offset is None
                else f"Timestamp {ts} of message with offset {offset} is out of range. "
                f"The timestamp should be within [{low}, {high}]",
            )
            for i, ts, offset in stamps
        ]
    )
    if stamps:
        message = "One or more records have been rejected due to invalid timestamp"
        return RecordsRefused(ErrorCode.invalid_timestamp, message, tuple(errors), message)
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    message = (
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]"
    )
    return RecordsRefused(ErrorCode.invalid_record, message, tuple(errors), message)


_LAT_MESSAGE = (
    "Invalid timestamp type in message. Producer should not set timestamp type to LogAppendTime."
)


def _client_log_append_time(header: BatchHeader, policy: RecordPolicy, scan: _Scan) -> None:
    """A client-set LogAppendTime bit (Kafka's validateTimestamp): every record's timestamp is
    the header's max timestamp. On a CreateTime topic it is range-checked (the bit is cleared
    afterwards); with no timestamp (-1), or on a LogAppendTime topic, every record is refused.
    A record already refused for its key is not checked (Kafka checks the key first)."""
    assert scan.bad_keys is not None and scan.bad_timestamps is not None
    ts, keyless = header.max_timestamp, set(scan.bad_keys)
    if not policy.log_append_time and ts != -1:
        diff = _wrap64(policy.now_ms - ts)
        if diff <= policy.before_max_ms and _wrap64(-diff) <= policy.after_max_ms:
            return
        bad: list[tuple[int, int, int | None]] = [(i, ts, i) for i in range(header.records_count)]
    else:
        bad = [(i, ts, None) for i in range(header.records_count)]
    scan.bad_timestamps.extend(b for b in bad if b[0] not in keyless)


# -- rebuild with consecutive offsets ---------------------------------------------------------


def _rebuild(
    data: bytes | bytearray | memoryview,
    header: BatchHeader,
    policy: RecordPolicy,
    fixed_ts: int | None,
    codec: int,
    level: int | None = None,
) -> bytes:
    """The batch with offset deltas 0..n-1 and the records' other bytes unchanged, compressed
    with ``codec`` (Kafka's ``buildRecordsAndAssignOffsets``: the topic's codec differs from
    the batch's, or a compressed batch's offsets are not consecutive); base timestamp the first
    record's, as Kafka's MemoryRecordsBuilder writes it. Producer id, epoch, base sequence and
    the transactional flag are kept. Only reached after a full scan accepted the records."""
    body = memoryview(data)[BATCH_HEADER_SIZE : header.total_size]
    if header.compression:
        pieces = stream_decompress(header.compression, body, policy.max_decompressed_bytes)
        raw = b"".join(bytes(piece) for piece in pieces)  # copied as they come (reused buffers)
    else:
        raw = bytes(body)
    parts: list[bytes] = []
    stamps: list[int] = []
    pos = 0
    for _ in range(header.records_count):
        length, q = read_varint(raw, pos, 5)
        end = q + length
        attributes = raw[q]
        ts_delta, q2 = read_varint(raw, q + 1, 10)
        _offset_delta, rest = read_varint(raw, q2, 5)
        stamps.append(_wrap64(header.base_timestamp + ts_delta) if fixed_ts is None else fixed_ts)
        parts.append(bytes([attributes]) + b"\x00" + raw[rest:end])  # deltas written below
        pos = end
    base_ts = stamps[0]
    records = bytearray()
    for i, (part, ts) in enumerate(zip(parts, stamps, strict=True)):
        record = bytearray(part[:1])
        write_varint(record, _wrap64(ts - base_ts))
        write_varint(record, i)
        record += part[2:]
        write_varint(records, len(record))
        records += record
    attributes = (header.attributes & ATTR_TRANSACTIONAL) | codec
    after = _AFTER_CRC.pack(
        attributes,
        header.records_count - 1,
        base_ts,
        max(-1, *stamps),
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.records_count,
    ) + compress(codec, bytes(records), level)
    length = len(after) + CRC_START - LOG_OVERHEAD
    before = _BEFORE_CRC.pack(0, length, header.partition_leader_epoch, 2, crc32c.crc32c(after))
    return before + after
