"""Reading a partition: ListOffsets and Fetch, batches parsed with wire/'s record codecs.

Theory of operation: ``read_batches`` fetches from an offset up to the end the broker
reports at that isolation level (high watermark, or the LSO for read_committed) and yields
each batch with its records. At read_committed the broker returns the batches of aborted
transactions too, with a list of (producer id, first offset) pairs; the reader drops those
batches itself, as Kafka's consumer does (``CompletedFetch``): a producer's transactional
batches at or after its listed first offset are aborted until its ABORT marker.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from kafkad.client.cluster import API, Client
from kafkad.client.errors import ClientError, KafkaError, check
from wire.batch import BatchHeader, iter_batches
from wire.record_codec import (
    ControlRecordType,
    Record,
    decode_batch_records,
    parse_control_record_type,
)

__all__ = ["EARLIEST", "LATEST", "Batch", "Fetched", "list_offset", "read_batches"]

EARLIEST, LATEST = -2, -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


@dataclass
class Batch:
    header: BatchHeader
    records: list[Record]
    aborted: bool  # dropped by a read_committed reader (part of an aborted transaction)

    @property
    def marker(self) -> str | None:
        """COMMIT or ABORT for a transaction marker batch, else None."""
        if not self.header.is_control or not self.records:
            return None
        kind = parse_control_record_type(self.records[0].key)
        if kind == ControlRecordType.COMMIT:
            return "COMMIT"
        return "ABORT" if kind == ControlRecordType.ABORT else None


@dataclass
class Fetched:
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int


def list_offset(
    client: Client, topic: str, partition: int, timestamp: int, isolation: int = READ_UNCOMMITTED
) -> int:
    """ListOffsets: EARLIEST, LATEST (the LSO at read_committed) or the first offset at or
    after a timestamp in ms (-1 when none is)."""
    data = {
        "replica_id": -1,
        "isolation_level": isolation,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": partition,
                        "current_leader_epoch": -1,
                        "timestamp": timestamp,
                    }
                ],
            }
        ],
    }

    def once() -> int:
        resp = client.send(API.LIST_OFFSETS, data, client.leader(topic, partition))
        (p,) = resp.topics[0].partitions
        check(int(p.error_code), f"listing offsets of {topic}-{partition}")
        return int(p.offset)

    return client.retry(once)


def fetch_once(
    client: Client,
    topic: str,
    partition: int,
    offset: int,
    isolation: int,
    max_bytes: int = 1 << 20,
) -> tuple[Fetched, list[tuple[int, int]], bytes]:
    data = {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": max_bytes,
        "isolation_level": isolation,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": max_bytes,
                    }
                ],
            }
        ],
        "rack_id": "",
    }

    def once() -> object:
        resp = client.send(API.FETCH, data, client.leader(topic, partition))
        check(int(resp.error_code), f"fetching {topic}-{partition}")
        (p,) = resp.responses[0].partitions
        code = int(p.error_code)
        if code:
            raise KafkaError(code, f"fetching {topic}-{partition} at offset {offset}")
        return p

    p = client.retry(once)
    aborted = [(int(a.producer_id), int(a.first_offset)) for a in (p.aborted_transactions or ())]  # type: ignore[attr-defined]
    info = Fetched(int(p.high_watermark), int(p.last_stable_offset), int(p.log_start_offset))  # type: ignore[attr-defined]
    return info, aborted, bytes(p.records or b"")  # type: ignore[attr-defined]


def read_batches(
    client: Client, topic: str, partition: int, offset: int, isolation: int, end: int | None = None
) -> Iterator[Batch]:
    """Every batch from ``offset`` to ``end`` (default: the end the first fetch reports)."""
    open_aborts: dict[int, int] = {}  # producer id -> first offset of its aborted txn
    pending: list[tuple[int, int]] = []
    while True:
        info, aborted, raw = fetch_once(client, topic, partition, offset, isolation)
        if end is None:
            end = info.last_stable_offset if isolation == READ_COMMITTED else info.high_watermark
        pending = sorted({*pending, *aborted}, key=lambda a: a[1])
        if offset >= end:
            return
        progressed = False
        for _pos, header in iter_batches(raw):
            if header.last_offset < offset:
                continue
            if header.base_offset >= end:
                return
            view = raw[_pos : _pos + header.total_size]
            try:
                records = decode_batch_records(view)
            except ValueError as exc:
                raise ClientError(
                    f"{topic}-{partition}: batch at {header.base_offset} is unreadable: {exc}"
                ) from exc
            while pending and pending[0][1] <= header.last_offset:
                pid, first = pending.pop(0)
                open_aborts[pid] = first
            is_aborted = False
            if (
                isolation == READ_COMMITTED
                and header.is_transactional
                and header.producer_id in open_aborts
            ):
                if header.is_control:
                    open_aborts.pop(header.producer_id, None)
                else:
                    is_aborted = True
            yield Batch(header, records, is_aborted)
            offset = header.last_offset + 1
            progressed = True
        if not progressed:
            if raw:
                raise ClientError(
                    f"{topic}-{partition}: a batch at offset {offset} is larger than 1 MiB"
                )
            return
