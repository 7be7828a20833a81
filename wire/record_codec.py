"""Records inside a v2 batch: encoding, decoding, and transaction control records.

Not on the produce or fetch path (the broker never opens a client batch). Used by tests, bench
tools, control-marker writing and ListOffsets-by-timestamp lookups.

Record layout (inside the possibly compressed region after the 61-byte header; every variable
int is a *zigzag* varint, the timestamp delta a zigzag varlong)::

    length varint (bytes after it) | attributes i8 (0) | timestamp_delta varlong
    | offset_delta varint | key_length varint (-1 null) | key | value_length varint | value
    | headers_count varint | per header: key_length varint, key UTF-8 (never null),
                                          value_length varint (-1 null), value

Decoding reads as Kafka does, which is what produce validation accepts: any negative key or
value length is null, and a header key that is not valid UTF-8 is kept byte for byte
(decoded with ``surrogateescape``, which ``encode_record`` reverses).

Control records (transaction markers): a batch with the control and transactional attribute
bits, baseSequence -1, uncompressed, one record whose key is ``i16 version (0), i16 type``
(0 ABORT, 1 COMMIT, 2-6 KRaft-internal; readers ignore unknown types) and whose value is
``i16 version (0), i32 coordinator_epoch``. A marker batch is 78 bytes.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import crc32c

from wire.batch import (
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BATCH_HEADER_SIZE,
    CRC_START,
    LOG_OVERHEAD,
    BatchHeader,
    RecordBatchError,
    read_batch_header,
)
from wire.compression import CompressionError, compress, decompress

_HEADER_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. records_count
_HEADER_BEFORE_CRC = struct.Struct(">qiibI")  # base_offset .. crc
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")


class ControlRecordType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


_COMMIT_KEY = _CONTROL_KEY.pack(0, ControlRecordType.COMMIT)
_ABORT_KEY = _CONTROL_KEY.pack(0, ControlRecordType.ABORT)


@dataclass(frozen=True, slots=True)
class Record:
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


# -- zigzag varints ---------------------------------------------------------------------------


def write_varint(out: bytearray, value: int) -> None:
    """Append ``value`` (signed, up to 64 bits) as a zigzag varint."""
    zigzag = (value << 1) ^ (value >> 63)
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


_ONE_BYTE = tuple(bytes((i,)) for i in range(0x80))


def _zigzag(value: int) -> bytes:
    """``value`` (>= 0, a length) as a zigzag varint, as ``write_varint`` writes it."""
    zigzag = value << 1
    if zigzag < 0x80:
        return _ONE_BYTE[zigzag]
    if zigzag < 0x4000:
        return bytes(((zigzag & 0x7F) | 0x80, zigzag >> 7))
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def read_varint(buf: bytes | memoryview, pos: int, max_bytes: int = 10) -> tuple[int, int]:
    """A zigzag varint (``max_bytes`` 5) or varlong (10) at ``pos``: (value, next position).
    As Kafka's ``ByteUtils.readVarint``/``readVarlong``, bits past the 32nd (64th) are dropped.
    The record scanners' hot loops inline its one-byte case and call it for the rest."""
    if pos < len(buf) and (byte := buf[pos]) < 0x80:  # the common one-byte case, fast
        return (byte >> 1) ^ -(byte & 1), pos + 1
    raw = shift = 0
    for i in range(pos, min(pos + max_bytes, len(buf))):
        byte = buf[i]
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            raw &= 0xFFFFFFFF if max_bytes <= 5 else 0xFFFFFFFFFFFFFFFF
            return (raw >> 1) ^ -(raw & 1), i + 1
        shift += 7
    if pos + max_bytes <= len(buf):
        raise RecordBatchError(f"varint longer than {max_bytes} bytes")
    raise RecordBatchError("truncated varint")


# -- records ----------------------------------------------------------------------------------


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(data))
        out += data


def encode_record(record: Record) -> bytes:
    body = bytearray(b"\x00")  # attributes
    write_varint(body, record.timestamp_delta)
    write_varint(body, record.offset_delta)
    _write_bytes(body, record.key)
    _write_bytes(body, record.value)
    write_varint(body, len(record.headers))
    for key, value in record.headers:
        _write_bytes(body, key.encode(errors="surrogateescape"))
        _write_bytes(body, value)
    out = bytearray()
    write_varint(out, len(body))
    return bytes(out + body)


def _read_bytes(buf: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(buf, pos, 5)
    if length < 0:  # any negative length is null, as Kafka's Utils.readBytes reads it
        return None, pos
    if pos + length > end:
        raise RecordBatchError("field runs past the end of its record")
    return buf[pos : pos + length], pos + length


def decode_records(buf: bytes, count: int) -> list[Record]:
    """``count`` records from uncompressed ``buf``, which they must fill exactly."""
    records, pos = [], 0
    for _ in range(count):
        length, pos = read_varint(buf, pos, 5)
        end = pos + length
        if length < 1 or end > len(buf):
            raise RecordBatchError(f"record of {length} bytes at {pos} overruns the batch")
        pos += 1  # attributes, unused
        timestamp_delta, pos = read_varint(buf, pos, 10)
        offset_delta, pos = read_varint(buf, pos, 5)
        key, pos = _read_bytes(buf, pos, end)
        value, pos = _read_bytes(buf, pos, end)
        header_count, pos = read_varint(buf, pos, 5)
        if header_count < 0 or header_count > end - pos:
            raise RecordBatchError(f"bad header count {header_count}")
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(header_count):
            name, pos = _read_bytes(buf, pos, end)
            if name is None:
                raise RecordBatchError("null header key")
            value_h, pos = _read_bytes(buf, pos, end)
            headers.append((name.decode(errors="surrogateescape"), value_h))
        if pos != end:
            raise RecordBatchError(f"record contents do not fill its declared {length} bytes")
        records.append(Record(offset_delta, timestamp_delta, key, value, headers))
    if pos != len(buf):
        raise RecordBatchError(f"{len(buf) - pos} bytes left after {count} records")
    return records


# -- batches ----------------------------------------------------------------------------------


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    base_timestamp: int,
    max_timestamp: int | None = None,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    log_append_time: bool = False,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A complete v2 batch with a correct CRC. ``last_offset_delta`` is the last record's
    offset delta (-1 for no records); ``max_timestamp`` defaults to the largest record
    timestamp, or ``base_timestamp`` for no records."""
    body = compress_records(records, compression)
    attributes = (
        compression
        | (ATTR_TIMESTAMP_TYPE if log_append_time else 0)
        | (ATTR_TRANSACTIONAL if transactional else 0)
        | (ATTR_CONTROL if control else 0)
    )
    if max_timestamp is None:
        max_timestamp = base_timestamp + max((r.timestamp_delta for r in records), default=0)
    after_crc = (
        _HEADER_AFTER_CRC.pack(
            attributes,
            records[-1].offset_delta if records else -1,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
        + body
    )
    batch_length = len(after_crc) + CRC_START - LOG_OVERHEAD
    before_crc = _HEADER_BEFORE_CRC.pack(
        base_offset, batch_length, partition_leader_epoch, 2, crc32c.crc32c(after_crc)
    )
    return before_crc + after_crc


def build_one_record_batch(
    key: bytes | None,
    value: bytes | None,
    timestamp: int,
    *,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    attributes: int = 0,
    partition_leader_epoch: int = -1,
) -> tuple[bytes, BatchHeader]:
    """An uncompressed batch of one record (offset and timestamp delta 0, no headers, base
    sequence -1) and its header: what ``build_batch`` makes of that record, byte for byte,
    without the general path's per-record objects or a re-parse of the header. The broker's
    own appends (``__transaction_state``, ``__consumer_offsets``, markers) are such batches."""
    batch, batch_length, crc = _one_record_batch(
        key, value, timestamp, base_offset, producer_id, producer_epoch, attributes,
        partition_leader_epoch,
    )  # fmt: skip
    header = BatchHeader(
        base_offset,
        batch_length,
        partition_leader_epoch,
        2,
        crc,
        attributes,
        0,
        timestamp,
        timestamp,
        producer_id,
        producer_epoch,
        -1,
        1,
    )
    return batch, header


def _one_record_batch(
    key: bytes | None,
    value: bytes | None,
    timestamp: int,
    base_offset: int,
    producer_id: int,
    producer_epoch: int,
    attributes: int,
    partition_leader_epoch: int,
) -> tuple[bytes, int, int]:
    """``build_one_record_batch``'s bytes, with its batch length and CRC."""
    record = b"".join(
        (
            b"\0\0\0",  # attributes, timestamp delta 0, offset delta 0
            b"\1" if key is None else _zigzag(len(key)) + key,  # -1: null
            b"\1" if value is None else _zigzag(len(value)) + value,
            b"\0",  # no headers
        )
    )
    after_crc = (
        _HEADER_AFTER_CRC.pack(
            attributes, 0, timestamp, timestamp, producer_id, producer_epoch, -1, 1
        )
        + _zigzag(len(record))
        + record
    )
    batch_length = len(after_crc) + CRC_START - LOG_OVERHEAD
    crc = crc32c.crc32c(after_crc)
    batch = (
        _HEADER_BEFORE_CRC.pack(base_offset, batch_length, partition_leader_epoch, 2, crc)
        + after_crc
    )
    return batch, batch_length, crc


def compress_records(records: Sequence[Record], codec: int) -> bytes:
    return compress(codec, b"".join(encode_record(r) for r in records))


def decode_batch_records(batch: bytes | bytearray | memoryview) -> list[Record]:
    """Every record of the batch at the start of ``batch``, decompressing as needed.

    Raises RecordBatchError for a malformed or truncated batch, an unknown codec, bytes the
    codec rejects, or a record count that disagrees with the header. The CRC is not checked
    (see ``crc_ok``).
    """
    header = read_batch_header(batch)
    if header.total_size > len(batch):
        raise RecordBatchError(f"batch of {header.total_size} bytes truncated to {len(batch)}")
    payload = bytes(batch[BATCH_HEADER_SIZE : header.total_size])
    try:
        raw = decompress(header.compression, payload)
    except CompressionError as exc:
        raise RecordBatchError(str(exc)) from exc
    if header.records_count < 0:
        raise RecordBatchError(f"negative record count {header.records_count}")
    return decode_records(raw, header.records_count)


# -- control records --------------------------------------------------------------------------


def build_control_batch(
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    base_offset: int,
    timestamp: int,
    *,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A COMMIT or ABORT marker batch (78 bytes)."""
    key = _COMMIT_KEY if commit else _ABORT_KEY
    batch, _, _ = _one_record_batch(
        key,
        _CONTROL_VALUE.pack(0, coordinator_epoch),
        timestamp,
        base_offset,
        producer_id,
        producer_epoch,
        ATTR_TRANSACTIONAL | ATTR_CONTROL,
        partition_leader_epoch,
    )
    return batch


def parse_control_record_type(key: bytes | None) -> int:
    """The type of a control record key (0 ABORT, 1 COMMIT, others to be ignored)."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise RecordBatchError("control record key shorter than 4 bytes")
    version, kind = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise RecordBatchError(f"control record key version {version}")
    return int(kind)


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    commit: bool
    coordinator_epoch: int


def read_end_txn_marker(batch: bytes | bytearray | memoryview) -> EndTxnMarker | None:
    """The COMMIT/ABORT marker held by a control batch; None for other control types.

    Raises RecordBatchError if ``batch`` is not a control batch or its record is malformed.
    """
    header = read_batch_header(batch)
    if not header.is_control:
        raise RecordBatchError("not a control batch")
    records = decode_batch_records(batch)
    if not records:
        raise RecordBatchError("control batch without a record")
    kind = parse_control_record_type(records[0].key)
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return None
    value = records[0].value
    if value is None or len(value) < _CONTROL_VALUE.size:
        raise RecordBatchError("end transaction marker value shorter than 6 bytes")
    _version, coordinator_epoch = _CONTROL_VALUE.unpack_from(value)
    return EndTxnMarker(kind == ControlRecordType.COMMIT, coordinator_epoch)
