"""The record browser: a partition's batches from an offset, raw or as a read_committed
consumer receives them.

Raw: every stored batch from the offset up to the high watermark. read_committed: what a
Fetch with isolation READ_COMMITTED returns (only batches ending below the last stable
offset, the partition's aborted transactions overlapping the range from
``Partition.aborted_transactions``), then what the consumer keeps of it: Kafka's consumer
(``CompletedFetch``) skips control batches and the batches of a producer from an aborted
transaction's first offset until that producer's ABORT marker. The same walk marks the
aborted data in the raw view.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from storage.api import StorageError
from storage.partition import Partition
from wire.batch import BatchHeader, RecordBatchError, iter_batches
from wire.compression import CODEC_NAMES
from wire.record_codec import Record, decode_batch_records, read_end_txn_marker

READ_BYTES = 256 * 1024
MAX_BATCHES = 50
MAX_RECORDS_SHOWN = 20
PREVIEW_BYTES = 80


class BadOffset(ValueError):
    """The offset is outside [log start, high watermark]."""


@dataclass(frozen=True, slots=True)
class RecordRow:
    offset: int
    timestamp: int
    key: str | None
    value: str | None


@dataclass(frozen=True, slots=True)
class BatchRow:
    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool
    control: bool
    marker: str | None  # "COMMIT" / "ABORT" for a transaction marker
    codec: str
    count: int
    first_timestamp: int
    max_timestamp: int
    size: int
    aborted: bool  # data of an aborted transaction
    records: tuple[RecordRow, ...]
    more_records: int  # records not shown


@dataclass(frozen=True, slots=True)
class RecordPage:
    offset: int
    committed: bool
    log_start: int
    last_stable: int
    high_watermark: int
    batches: tuple[BatchRow, ...]
    next_offset: int | None  # where the next page starts; None: nothing more to read now
    aborted_index: tuple[tuple[int, int], ...]  # (producer id, first offset) used


def preview(data: bytes | None) -> str | None:
    if data is None:
        return None
    text = data[:PREVIEW_BYTES].decode("utf-8", "backslashreplace")
    return text + ("…" if len(data) > PREVIEW_BYTES else "")


def _records(batch: bytes) -> list[Record]:
    try:
        return decode_batch_records(batch)
    except (RecordBatchError, ValueError):  # shown as a batch without records
        return []


class AbortedTracker:
    """The consumer's walk (Kafka's ``CompletedFetch.nextFetchedRecord``): an aborted
    transaction's producer is skipped from its first offset up to its ABORT marker."""

    def __init__(self, aborted: list[tuple[int, int]]) -> None:
        self._pending = sorted(aborted, key=lambda a: a[1])
        self._skipping: set[int] = set()

    def is_aborted_data(self, producer_id: int, base_offset: int, transactional: bool) -> bool:
        while self._pending and self._pending[0][1] <= base_offset:
            self._skipping.add(self._pending.pop(0)[0])
        return transactional and producer_id in self._skipping

    def on_marker(self, producer_id: int, marker: str | None) -> None:
        if marker == "ABORT":
            self._skipping.discard(producer_id)


async def record_page(
    p: Partition, offset: int, *, committed: bool, max_batches: int = MAX_BATCHES
) -> RecordPage:
    """Up to ``max_batches`` batches from ``offset``. Raises ``BadOffset``."""
    hw, lso, start = p.high_watermark, p.last_stable_offset, p.log_start_offset
    if not start <= offset <= hw:
        raise BadOffset(f"offset {offset} is outside [{start}, {hw}]")
    end = lso if committed else hw
    rows: list[BatchRow] = []
    position = offset
    data = b""
    upper = offset
    while position < end and len(rows) < max_batches:
        try:
            data = await p.read(position, READ_BYTES)
        except (StorageError, ValueError) as exc:
            raise BadOffset(f"offset {position}: {exc}") from exc
        whole = [(pos, h) for pos, h in iter_batches(data) if h.last_offset >= position]
        whole = [(pos, h) for pos, h in whole if h.last_offset < end][: max_batches - len(rows)]
        if not whole:
            break
        for pos, h in whole:
            rows.append(_batch_row(bytes(data[pos : pos + h.total_size]), h))
        position = upper = whole[-1][1].last_offset + 1
    aborted = p.aborted_transactions(offset, max(upper, offset + 1))
    tracker = AbortedTracker(list(aborted))
    marked = []
    for b in rows:
        dead = tracker.is_aborted_data(b.producer_id, b.base_offset, b.transactional)
        dead = dead and not b.control
        tracker.on_marker(b.producer_id, b.marker)
        if committed and (b.control or dead):
            continue
        marked.append(_with_aborted(b, dead))
    return RecordPage(
        offset=offset,
        committed=committed,
        log_start=start,
        last_stable=lso,
        high_watermark=hw,
        batches=tuple(marked),
        next_offset=position if position < end else None,
        aborted_index=tuple(aborted),
    )


def _with_aborted(b: BatchRow, aborted: bool) -> BatchRow:
    return replace(b, aborted=True) if aborted else b


def _batch_row(batch: bytes, h: BatchHeader) -> BatchRow:
    marker = None
    if h.is_control:
        try:
            m = read_end_txn_marker(batch)
            marker = None if m is None else ("COMMIT" if m.commit else "ABORT")
        except RecordBatchError:
            marker = None
    records = [] if h.is_control else _records(batch)
    shown = tuple(
        RecordRow(
            h.base_offset + r.offset_delta,
            h.base_timestamp + r.timestamp_delta,
            preview(r.key),
            preview(r.value),
        )
        for r in records[:MAX_RECORDS_SHOWN]
    )
    return BatchRow(
        base_offset=h.base_offset,
        last_offset=h.last_offset,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        transactional=h.is_transactional,
        control=h.is_control,
        marker=marker,
        codec=CODEC_NAMES.get(h.compression, str(h.compression)),
        count=h.records_count,
        first_timestamp=h.base_timestamp,
        max_timestamp=h.max_timestamp,
        size=h.total_size,
        aborted=False,
        records=shown,
        more_records=0 if h.is_control else max(h.records_count - len(shown), 0),
    )
