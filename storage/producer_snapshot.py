"""The producer-state snapshot format (Kafka's ``<offset>.snapshot`` files), declared with
``construct``.

Theory of operation
-------------------
A snapshot holds a partition's whole producer table as it was when the log ended at
``offset``: every batch below ``offset`` is reflected in it, none at or above. The backend
stores it under that offset (``PartitionLog.write_producer_snapshot``; the file backend names
it ``<offset:020d>.snapshot`` in the partition directory, like Kafka). Snapshots are taken when
a segment rolls and at clean shutdown. Start-up loads the newest snapshot that decodes and
whose offset is <= the log end offset, then replays the batch headers of the log from there
(``Partition.load_producer_state``); a snapshot above the end (its log tail was lost in a crash)
is deleted, a corrupt one is skipped for an older one, and with none the whole log is replayed.

Layout (big-endian)::

    magic            4 bytes  b"KPS1"
    version          int16    2
    body:
      offset         int64    the log end offset the snapshot was taken at
      producer count int32
      producers, each:
        producer_id               int64
        producer_epoch            int16
        coordinator_epoch         int32   -1 until a transaction marker sets it
        current_txn_first_offset  int64   -1: no transaction open on this partition
        last_timestamp            int64
        batch count               uint8   0..5, oldest first
        batches, each: first_seq int32, last_seq int32, first_offset int64,
                       last_offset int64, timestamp int64
      aborted count  int32    (version 2) the aborted-transaction index, in abort order:
      aborted, each: producer_id int64, first_offset int64, last_offset int64,
                     last_stable_offset int64
    crc              uint32   CRC-32C of the body

Differences from Kafka's v1 format (version, CRC, then one fixed row per producer with only the
newest batch): we keep every retained batch, so the 5-batch dedupe window survives a restart
whole instead of shrinking to one batch (spec §3.4 recommends this). The transactional fields
(coordinator epoch, open transaction's first offset) are in the row already; the ongoing
transactions of the partition are exactly the rows with a first offset >= 0. Version 2 adds the
aborted-transaction index (Kafka keeps it in one ``.txnindex`` file per segment): the entries
of aborts below ``offset``, so start-up needs the snapshot plus a replay of the tail (which
re-creates the entries of later aborts from their markers) instead of a whole-log scan. The
index is rewritten whole with every snapshot; entries that end below the log start offset are
dropped when retention moves it, which bounds it by the retained log. A reader refuses every
other version: a version-1 snapshot (written before transactions existed) is skipped and the
log is replayed from its start, which rebuilds the same state.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import crc32c
from construct import (
    Checksum,
    Const,
    ConstructError,
    Int8ub,
    Int16sb,
    Int32sb,
    Int32ub,
    Int64sb,
    PrefixedArray,
    RawCopy,
    Struct,
    Terminated,
    this,
)

from storage.producer_state import (
    NUM_BATCHES_TO_RETAIN,
    AbortedTxn,
    BatchMetadata,
    ProducerStateEntry,
)

_BATCH = Struct(
    "first_seq" / Int32sb,
    "last_seq" / Int32sb,
    "first_offset" / Int64sb,
    "last_offset" / Int64sb,
    "timestamp" / Int64sb,
)
_PRODUCER = Struct(
    "producer_id" / Int64sb,
    "producer_epoch" / Int16sb,
    "coordinator_epoch" / Int32sb,
    "current_txn_first_offset" / Int64sb,
    "last_timestamp" / Int64sb,
    "batches" / PrefixedArray(Int8ub, _BATCH),
)
_ABORTED = Struct(
    "producer_id" / Int64sb,
    "first_offset" / Int64sb,
    "last_offset" / Int64sb,
    "last_stable_offset" / Int64sb,
)
_BODY = Struct(
    "offset" / Int64sb,
    "producers" / PrefixedArray(Int32ub, _PRODUCER),
    "aborted" / PrefixedArray(Int32ub, _ABORTED),
)
SNAPSHOT = Struct(
    "magic" / Const(b"KPS1"),
    "version" / Const(2, Int16sb),
    "body" / RawCopy(_BODY),
    "crc" / Checksum(Int32ub, lambda data: crc32c.crc32c(data), this.body.data),
    Terminated,
)


class SnapshotError(ValueError):
    """The bytes are not a valid snapshot (wrong magic or version, bad CRC, truncated)."""


def encode_snapshot(
    offset: int, entries: list[ProducerStateEntry], aborted: list[AbortedTxn] | None = None
) -> bytes:
    producers = [
        {
            "producer_id": e.producer_id,
            "producer_epoch": e.producer_epoch,
            "coordinator_epoch": e.coordinator_epoch,
            "current_txn_first_offset": e.current_txn_first_offset,
            "last_timestamp": e.last_timestamp,
            "batches": [
                {
                    "first_seq": b.first_seq,
                    "last_seq": b.last_seq,
                    "first_offset": b.first_offset,
                    "last_offset": b.last_offset,
                    "timestamp": b.timestamp,
                }
                for b in e.batches
            ],
        }
        for e in sorted(entries, key=lambda e: e.producer_id)
    ]
    body: dict[str, Any] = {
        "offset": offset,
        "producers": producers,
        "aborted": [
            {
                "producer_id": a.producer_id,
                "first_offset": a.first_offset,
                "last_offset": a.last_offset,
                "last_stable_offset": a.last_stable_offset,
            }
            for a in aborted or []
        ],
    }
    return bytes(SNAPSHOT.build({"body": {"value": body}}))


def decode_snapshot(data: bytes) -> tuple[int, list[ProducerStateEntry]]:
    """(offset, entries). Raises ``SnapshotError``."""
    offset, entries, _ = read_snapshot(data)
    return offset, entries


def read_snapshot(data: bytes) -> tuple[int, list[ProducerStateEntry], list[AbortedTxn]]:
    """(offset, entries, aborted-transaction index). Raises ``SnapshotError``."""
    try:
        parsed = SNAPSHOT.parse(data)
    except (ConstructError, ValueError) as exc:
        raise SnapshotError(str(exc)) from exc
    body = parsed.body.value
    entries = []
    for p in body.producers:
        if len(p.batches) > NUM_BATCHES_TO_RETAIN:
            raise SnapshotError(f"producer {p.producer_id} has {len(p.batches)} batches")
        batches = deque(
            (
                BatchMetadata(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp)
                for b in p.batches
            ),
            maxlen=NUM_BATCHES_TO_RETAIN,
        )
        entries.append(
            ProducerStateEntry(
                producer_id=p.producer_id,
                producer_epoch=p.producer_epoch,
                batches=batches,
                coordinator_epoch=p.coordinator_epoch,
                current_txn_first_offset=p.current_txn_first_offset,
                last_timestamp=p.last_timestamp,
            )
        )
    aborted = [
        AbortedTxn(a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset)
        for a in body.aborted
    ]
    return int(body.offset), entries, aborted
