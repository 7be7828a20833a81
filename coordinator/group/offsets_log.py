"""The ``__consumer_offsets`` topic as the group coordinator reads and writes it.

Theory of operation
-------------------
Every group change and offset commit is one batch of (key, value) records appended to the
group's partition (``coordinator/internal_topic.py`` places, builds and appends it).
``replay_partition`` reads a partition back from its log start to its high watermark and hands
each record to the coordinator, in log order, with one shortcut: runs of plain
(non-transactional) records are handed over as the log cleaner would leave them — only each
key's last record, in the order of those last records — which is what a compacted log replays
to anyway, without decoding superseded records. A transactional batch or a transaction marker
first flushes the run, so the order around transactions is exact. Markers are reported with
their producer id and whether they commit.
"""

from __future__ import annotations

from collections.abc import Callable

from coordinator.internal_topic import read_batches
from storage.api import CONSUMER_OFFSETS, PartitionWriter
from wire.batch import ATTR_CONTROL, ATTR_TRANSACTIONAL
from wire.record_scan import key_values
from wire.records import (
    decode_batch_records,
    parse_control_record_type,
)

OFFSETS_TOPIC = CONSUMER_OFFSETS

# (key, value or None for a tombstone, offset, producer id or -1 outside transactions)
OnRecord = Callable[[bytes, bytes | None, int, int], None]
OnMarker = Callable[[int, bool], None]  # (producer id, commit)


async def replay_partition(p: PartitionWriter, on_record: OnRecord, on_marker: OnMarker) -> None:
    """Read ``p`` from its log start to its high watermark (see the module docstring)."""
    run: dict[bytes, tuple[bytes | None, int]] = {}

    def flush() -> None:
        for key, (value, at) in run.items():
            on_record(key, value, at, -1)
        run.clear()

    async for h, batch, _ in read_batches(p):
        if h.attributes & ATTR_CONTROL:
            flush()
            records = decode_batch_records(batch)
            kind = parse_control_record_type(records[0].key) if records else -1
            if kind in (0, 1):
                on_marker(h.producer_id, kind == 1)
        elif h.attributes & ATTR_TRANSACTIONAL:
            flush()
            for delta, key, value in key_values(batch):
                if key is not None:
                    on_record(key, value, h.base_offset + delta, h.producer_id)
        else:
            for delta, key, value in key_values(batch):
                if key is not None:
                    run.pop(key, None)
                    run[key] = (value, h.base_offset + delta)
    flush()
