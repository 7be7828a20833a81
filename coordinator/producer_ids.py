"""Producer-id allocation: ids that never repeat, not even across crashes.

Theory of operation
-------------------
Kafka hands producer ids out of blocks of 1000 reserved from the controller; we reserve blocks
from our own durable high-water mark. ``ProducerIdBlock`` (pure) hands out the ids of the
current block. When it is exhausted, ``ProducerIdManager`` (the thin async runtime) reserves
the next block by *first* persisting the new high-water mark (the end of that block) through
``Store.write_metadata`` and only *then* hands out ids from it. After a crash the broker starts
at the persisted mark, skipping whatever was left of the block in use: ids may be skipped,
never reused (spec eos.md §4.4: "never reuse an id").

Invariant: every id handed out is < the persisted high-water mark.

The persisted record (``producer-ids`` metadata blob), declared with ``construct``::

    magic b"KPID", version int16 = 1, next_block_start int64, crc uint32 (CRC-32C of the int64)

Both the idempotent InitProducerId and (later) the transaction coordinator allocate here.
Allocation is serialised by a lock: only one reservation is ever in flight.
"""

from __future__ import annotations

import crc32c
import trio
from construct import Checksum, Const, ConstructError, Int16sb, Int32ub, Int64sb, Struct, this

from storage.api import Store

BLOCK_SIZE = 1000
METADATA_NAME = "producer-ids"

HIGH_WATER_MARK = Struct(
    "magic" / Const(b"KPID"),
    "version" / Const(1, Int16sb),
    "next_block_start" / Int64sb,
    "crc" / Checksum(Int32ub, lambda v: crc32c.crc32c(v.to_bytes(8, "big")), this.next_block_start),
)


class ProducerIdBlock:
    """Pure: the ids [first, end) of one reserved block, handed out in order."""

    def __init__(self, first: int = 0, end: int = 0) -> None:
        self.next = first
        self.end = end

    def take(self) -> int | None:
        """The next id, or None if the block is used up."""
        if self.next >= self.end:
            return None
        pid, self.next = self.next, self.next + 1
        return pid


def encode_high_water_mark(next_block_start: int) -> bytes:
    return bytes(HIGH_WATER_MARK.build({"next_block_start": next_block_start}))


def decode_high_water_mark(data: bytes) -> int:
    try:
        return int(HIGH_WATER_MARK.parse(data).next_block_start)
    except ConstructError as exc:
        raise ValueError(f"corrupt producer-id high-water mark: {exc}") from exc


class ProducerIdManager:
    def __init__(self, store: Store, block_size: int = BLOCK_SIZE) -> None:
        self._store = store
        self._block_size = block_size
        self._block = ProducerIdBlock()
        self._high_water_mark = 0
        self._lock = trio.Lock()

    async def load(self) -> None:
        """Read the persisted mark; a missing one means no id was ever handed out. A corrupt
        one raises (refusing to start beats reusing ids)."""
        data = await self._store.read_metadata(METADATA_NAME)
        self._high_water_mark = 0 if data is None else decode_high_water_mark(data)
        self._block = ProducerIdBlock(self._high_water_mark, self._high_water_mark)

    async def generate_producer_id(self) -> int:
        """A never-used id. Raises ``StorageError`` if a block could not be reserved."""
        async with self._lock:
            pid = self._block.take()
            if pid is None:
                start = self._high_water_mark
                end = start + self._block_size
                await self._store.write_metadata(METADATA_NAME, encode_high_water_mark(end))
                self._high_water_mark = end
                self._block = ProducerIdBlock(start, end)
                pid = self._block.take()
                assert pid is not None
            return pid
