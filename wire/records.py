"""Record batches v2: the one import for header access, produce validation and record codecs.

Theory of operation
-------------------
A client's batch is checked by its 61-byte header and CRC (``validate_produce_batch``), then
record by record (``wire.record_check.check_records``, Kafka's LogValidator), given its base
offset and partition leader epoch (both outside the CRC: ``Partition.append`` writes them into
a copy of the batch, ``set_base_offset`` does it in place), and stored and served as it
came, compressed or not (only its max timestamp may be corrected, or a compressed batch
rebuilt with consecutive offsets, see record_check).

Modules behind this one:

* ``wire.batch``: the header layout, ``read_batch_header``, ``crc_ok``, ``iter_batches``,
  in-place setters.
* ``wire.record_codec``: records inside a batch, ``build_batch``, ``decode_batch_records``,
  control (transaction marker) batches; for tests, tools, markers and timestamp lookups.
* ``wire.compression``: gzip, snappy (raw and xerial), lz4 frame, zstd via cramjam.

Produce validation follows Kafka 4.x, in Kafka's order (sources are apache/kafka)::

    check, in order                                              error                        source
    a batch's size field < 14, or its magic byte outside 0..2    CORRUPT_MESSAGE              1
    no complete batch (empty, or declared length beyond data)    INVALID_RECORD               2
    first batch's magic is 0 or 1                                INVALID_RECORD               2
    zstd (codec 4) on Produce < 7                                UNSUPPORTED_COMPRESSION_TYPE 2
    codec 5-7                                                    UNSUPPORTED_COMPRESSION_TYPE *
    a second complete batch                                      INVALID_RECORD               2
    bytes after the batch that are not a complete batch          INVALID_RECORD               *
    base offset not 0                                            INVALID_RECORD               3
    batch size (batch_length + 12) > max.message.bytes           MESSAGE_TOO_LARGE            3
    batch shorter than its 61-byte header, or CRC-32C mismatch   CORRUPT_MESSAGE              3
    last_offset_delta < 0, records_count <= 0 or != delta + 1    INVALID_RECORD               4
    control batch from a client                                  INVALID_RECORD               4
    producer_id >= 0 with base_sequence < 0                      INVALID_RECORD               4

(1) ``ByteBufferLogInputStream.nextBatchSize`` throws CorruptRecordException while iterating.
(2) ``ProduceRequest.validateRecords``, called by KafkaApis.handleProduceRequest: a truncated
batch is simply not returned by the iterator, hence "must have at least one record batch".
(3) ``UnifiedLog.analyzeAndValidateRecords``. (4) ``LogValidator.validateBatch``.
(*) Deviations. Kafka reads codec 5-7 through ``CompressionType.forId``, whose
IllegalArgumentException becomes UNKNOWN_SERVER_ERROR; a produce must never get that (spec §3.3),
and UNSUPPORTED_COMPRESSION_TYPE is non-retriable. Kafka silently trims trailing bytes that do
not form a complete batch (``UnifiedLog.trimInvalidBytes``); we refuse them, so what is stored
is always exactly one batch.

Checks that depend on the records or the topic (timestamps, keys on compacted topics,
LogAppendTime) are ``wire.record_check``'s; those on the request (transactional id) belong to
the produce handler.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from wire.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BATCH_HEADER_SIZE,
    CRC_START,
    LOG_OVERHEAD,
    BatchHeader,
    RecordBatchError,
    crc_ok,
    header_at,
    iter_batches,
    read_batch_header,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)
from wire.compression import CompressionError, compress, decompress
from wire.record_codec import (
    ControlRecordType,
    EndTxnMarker,
    Record,
    build_batch,
    build_control_batch,
    build_one_record_batch,
    decode_batch_records,
    decode_records,
    encode_record,
    parse_control_record_type,
    read_end_txn_marker,
    read_varint,
    write_varint,
)

__all__ = [
    "ATTR_COMPRESSION_MASK",
    "ATTR_CONTROL",
    "ATTR_DELETE_HORIZON",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "BATCH_HEADER_SIZE",
    "CRC_START",
    "LOG_OVERHEAD",
    "BatchHeader",
    "CompressionError",
    "ControlRecordType",
    "EndTxnMarker",
    "Record",
    "RecordBatchError",
    "ValidatedBatch",
    "build_batch",
    "build_control_batch",
    "build_one_record_batch",
    "compress",
    "crc_ok",
    "decode_batch_records",
    "decode_records",
    "decompress",
    "encode_record",
    "first_batch_transactional",
    "iter_batches",
    "parse_control_record_type",
    "read_batch_header",
    "read_end_txn_marker",
    "read_varint",
    "set_base_offset",
    "set_max_timestamp",
    "set_partition_leader_epoch",
    "validate_produce_batch",
    "write_varint",
]

MIN_BATCH_SIZE_FIELD = 14  # LegacyRecord.RECORD_OVERHEAD_V0: the iterator's lower bound
_MAGIC_OFFSET = 16
_ATTRIBUTES_OFFSET = 21
_ZSTD = 4
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_SIZE_MAGIC_ATTRIBUTES = struct.Struct(">i4xb4xh")  # from offset 8: batch length .. attributes


class ValidatedBatch(NamedTuple):
    """A client batch that passed ``validate_produce_batch``: the whole data is this batch."""

    header: BatchHeader


def _batch_size(data: bytes | bytearray | memoryview, pos: int) -> int | ErrorCode | None:
    """Size of the batch at ``pos`` with its 12-byte log overhead, None if its header is cut
    short, CORRUPT_MESSAGE for a size or magic Kafka's batch iterator refuses."""
    remaining = len(data) - pos
    if remaining < LOG_OVERHEAD:
        return None
    (size,) = _I32.unpack_from(data, pos + 8)
    if size < MIN_BATCH_SIZE_FIELD:
        return ErrorCode.corrupt_message
    if remaining <= _MAGIC_OFFSET:
        return None
    if data[pos + _MAGIC_OFFSET] > 2:  # unsigned here: "< 0 or > 2" in Kafka's signed terms
        return ErrorCode.corrupt_message
    return int(size) + LOG_OVERHEAD


def first_batch_transactional(data: bytes | bytearray | memoryview) -> bool | ErrorCode:
    """Kafka's ``RequestUtils.hasTransactionalRecords`` test for one partition: whether its
    first complete batch has the transactional bit; CORRUPT_MESSAGE where Kafka's batch
    iterator throws (size field below 14, magic outside 0..2), which fails the whole request
    in Kafka. A batch cut short, or a legacy (magic 0/1) one, is not transactional."""
    if len(data) > _ATTRIBUTES_OFFSET + 1:  # size, magic and attributes in one unpack
        size, magic, attributes = _SIZE_MAGIC_ATTRIBUTES.unpack_from(data, 8)
        if size < MIN_BATCH_SIZE_FIELD or not 0 <= magic <= 2:
            return ErrorCode.corrupt_message
        if size + LOG_OVERHEAD > len(data) or magic != 2:
            return False
        return bool(attributes & ATTR_TRANSACTIONAL)
    size = _batch_size(data, 0)
    if isinstance(size, ErrorCode):
        return size
    if size is None or size > len(data) or data[_MAGIC_OFFSET] != 2:
        return False
    return bool(_I16.unpack_from(data, _ATTRIBUTES_OFFSET)[0] & ATTR_TRANSACTIONAL)


def validate_produce_batch(
    data: bytes | bytearray | memoryview, *, produce_version: int, max_message_bytes: int
) -> ValidatedBatch | ErrorCode:
    """Check a partition's ``records`` of a Produce request (see the module's table).

    The usual request, exactly one whole v2 batch, is checked from one unpack of its header
    (the table's rows in its order, those it cannot fail skipped); anything else takes the
    row-by-row path."""
    n = len(data)
    if n >= BATCH_HEADER_SIZE:
        header = header_at(data)
        first = header.batch_length + LOG_OVERHEAD
        if first == n and header.magic == 2:  # size >= 49: no CORRUPT_MESSAGE from the size
            codec = header.attributes & ATTR_COMPRESSION_MASK
            if codec > _ZSTD or (codec == _ZSTD and produce_version < 7):
                return ErrorCode.unsupported_compression_type
            if header.base_offset != 0:
                return ErrorCode.invalid_record
            if first > max_message_bytes:
                return ErrorCode.message_too_large
            if not crc_ok(data, 0, header):
                return ErrorCode.corrupt_message
            return _check_counts(header)
    return _validate_slowly(data, produce_version, max_message_bytes)


def _check_counts(header: BatchHeader) -> ValidatedBatch | ErrorCode:
    """The table's last rows (Kafka's LogValidator.validateBatch)."""
    count = header.records_count
    if header.last_offset_delta < 0 or count <= 0 or count != header.last_offset_delta + 1:
        return ErrorCode.invalid_record
    if header.attributes & ATTR_CONTROL:
        return ErrorCode.invalid_record
    if header.producer_id >= 0 and header.base_sequence < 0:
        return ErrorCode.invalid_record
    return ValidatedBatch(header)


def _validate_slowly(
    data: bytes | bytearray | memoryview, produce_version: int, max_message_bytes: int
) -> ValidatedBatch | ErrorCode:
    first = _batch_size(data, 0)
    if isinstance(first, ErrorCode):
        return first
    if first is None or first > len(data):
        return ErrorCode.invalid_record
    if data[_MAGIC_OFFSET] != 2:
        return ErrorCode.invalid_record
    codec = _I16.unpack_from(data, _ATTRIBUTES_OFFSET)[0] & ATTR_COMPRESSION_MASK
    if codec > _ZSTD or (codec == _ZSTD and produce_version < 7):
        return ErrorCode.unsupported_compression_type
    second = _batch_size(data, first)
    if isinstance(second, ErrorCode):
        return second
    if len(data) != first:
        return ErrorCode.invalid_record  # a second batch (Kafka) or a partial one (ours)
    if _I64.unpack_from(data, 0)[0] != 0:
        return ErrorCode.invalid_record  # clients send base offset 0
    if first > max_message_bytes:
        return ErrorCode.message_too_large
    if first < BATCH_HEADER_SIZE:
        return ErrorCode.corrupt_message  # DefaultRecordBatch.isValid: shorter than a header
    header = read_batch_header(data)
    if not crc_ok(data, 0, header):
        return ErrorCode.corrupt_message
    return _check_counts(header)
