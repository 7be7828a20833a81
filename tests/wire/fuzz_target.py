"""The one fuzz target, shared by the hypothesis tests and the atheris run (``make fuzz``).

``check(data)`` feeds ``data`` to the two entry points that take bytes from the network:

* ``wire.codec.decode_request`` with the versions kafkad serves (``proxy.registry.served()``):
  it may return, or raise a ``wire.errors.ProtocolError`` subclass, nothing else. A Rust abort
  in kio (see ``wire.bounds``) would kill the process, which the fuzzer reports as a crash.
* ``wire.records.validate_produce_batch``: it must return a ``ValidatedBatch`` or an
  ``ErrorCode``, never raise. It is given ``data`` itself and, when ``data`` decodes as a
  Produce request, every partition's ``records``. A batch it accepts goes on to
  ``wire.record_check.check_records`` (every record), which must answer ``RecordsAccepted``
  or ``RecordsRefused``, never raise, and whose accepted batch must itself validate again.
* ``data`` as the records of a batch under a valid CRC (``batch_around``): its first byte
  picks the record count, its second the codec, the rest are the records (compressed with
  that codec, or as they are when the codec byte says "raw payload"), so mutations reach the
  record scanner instead of stopping at the CRC.

Anything else raises ``TargetFailure`` (hypothesis shows the input; atheris saves it).
"""

from __future__ import annotations

import struct

import crc32c
from kio.schema.errors import ErrorCode

import proxy.handlers  # noqa: F401  (registers every handler)
from proxy.registry import served
from wire import record_kernel
from wire.codec import decode_request
from wire.compression import compress
from wire.errors import ProtocolError
from wire.record_check import RecordPolicy, RecordsAccepted, RecordsRefused, check_records
from wire.records import ValidatedBatch, validate_produce_batch

SERVED = served()
PRODUCE_KEY = 0


class TargetFailure(AssertionError):
    pass


def check_batch(data: bytes, produce_version: int) -> None:
    try:
        result = validate_produce_batch(
            data, produce_version=produce_version, max_message_bytes=1 << 20
        )
    except Exception as exc:
        raise TargetFailure(f"validate_produce_batch raised {exc!r}") from exc
    if not isinstance(result, ValidatedBatch | ErrorCode):
        raise TargetFailure(f"validate_produce_batch returned {result!r}")
    if isinstance(result, ValidatedBatch):
        for compacted in (False, True):
            policy = RecordPolicy(
                now_ms=1_700_000_000_000,
                log_append_time=False,
                before_max_ms=2**63 - 1,
                after_max_ms=3_600_000,
                compacted=compacted,
                max_decompressed_bytes=1 << 22,
                partition="fuzz-0",
            )
            try:
                checked = check_records(data, result.header, policy)
            except Exception as exc:
                raise TargetFailure(f"check_records raised {exc!r}") from exc
            if isinstance(checked, RecordsAccepted):
                again = validate_produce_batch(
                    checked.batch, produce_version=produce_version, max_message_bytes=1 << 22
                )
                if not isinstance(again, ValidatedBatch):
                    raise TargetFailure(f"an accepted batch no longer validates: {again!r}")
            elif not isinstance(checked, RecordsRefused):
                raise TargetFailure(f"check_records returned {checked!r}")


def batch_around(data: bytes) -> bytes:
    """``data`` as records under a valid header and CRC (see the module docstring)."""
    count = data[0] if data else 1
    codec_byte = data[1] if len(data) > 1 else 0
    records = data[2:]
    codec = codec_byte % 5
    body = records if codec_byte >= 128 or codec == 0 else compress(codec, records)
    after = struct.pack(">hiqqqhii", codec, count - 1, 0, 0, -1, -1, -1, count) + body
    before = struct.pack(">qiibI", 0, len(after) + 9, -1, 2, crc32c.crc32c(after))
    return before + after


def check_kernels(data: bytes) -> None:
    """The compiled record scanner answers as the Python one (when it is built)."""
    if not record_kernel.NATIVE:
        return
    answers = []
    for scan in (record_kernel.python_scan_records, record_kernel.scan_records):
        keys: list[int] = []
        stamps: list[tuple[int, int, int | None]] = []
        result = scan(data, 0, len(data), 8, 0, 0, 0, 1000, 1000, True, True, keys, stamps)
        answers.append((result, keys, stamps))
    if answers[0] != answers[1]:
        raise TargetFailure(f"the record scanners disagree: {answers}")


def check(data: bytes) -> None:
    check_batch(data, 11)
    check_batch(batch_around(data), 11)
    check_kernels(data)
    try:
        header, body = decode_request(data, SERVED)
    except ProtocolError:
        return
    except Exception as exc:
        raise TargetFailure(f"decode_request raised {exc!r}") from exc
    if header.api_key == PRODUCE_KEY:
        for topic in body.topic_data:
            for partition in topic.partition_data:
                if partition.records is not None:
                    check_batch(bytes(partition.records), header.api_version)
