"""What both log backends (``storage/memory.py``, ``storage/segment/log.py``) keep the same way:
the log start offset, log end offset and size as properties, and the checks of an append's
arguments (``PartitionLog.append``'s contract, ``tests/storage/test_contract.py``)."""

from __future__ import annotations

import struct

from wire.records import BATCH_HEADER_SIZE

_BASE = struct.Struct(">q")


class LogPositions:
    """A log's offsets and size; the backend keeps ``_lso``, ``_leo`` and ``_size`` current."""

    _lso: int
    _leo: int
    _size: int

    @property
    def log_start_offset(self) -> int:
        return self._lso

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def size_bytes(self) -> int:
        return self._size


def check_append(log_end_offset: int, base_offset: int, last_offset: int, batch: bytes) -> None:
    """Raises ValueError unless ``batch`` can be appended at ``log_end_offset`` as the batches
    ``base_offset``..``last_offset`` (a caller's bug, not a storage failure)."""
    if base_offset != log_end_offset:
        raise ValueError(f"append at offset {base_offset}, log end offset is {log_end_offset}")
    n = len(batch)
    if last_offset < base_offset or n < BATCH_HEADER_SIZE:
        raise ValueError(f"not a batch: offsets {base_offset}..{last_offset}, {n} bytes")
    if (first_base := _BASE.unpack_from(batch)[0]) != base_offset:
        raise ValueError(f"batch says base offset {first_base}, append says {base_offset}")
