"""The `kafkad` data source's readers: batch (`DataSourceReader`) and micro-batch streaming
(`DataSourceStreamReader` with admission control and Trigger.AvailableNow).

Theory of operation. The driver side (a long-lived Spark planner process for a streaming
query) asks the broker for the partitions a subscription covers and their bounds: earliest,
and latest = the last stable offset at read_committed (the default), the high watermark at
read_uncommitted. A micro-batch is [start, end) per partition: `latestOffset` picks the end
(capped by maxOffsetsPerTrigger and by the AvailableNow target), Spark writes it to its offset
log, then `partitions` cuts the ranges (`pipeline.planning.plan_ranges`) and each Spark task
reads one range with its own consumer (`pipeline.kafka_io.read_range`) and returns Arrow
batches in Spark's Kafka row schema. Partitions that appear later are read from their earliest
offset; a partition whose next offset was deleted by retention fails the query unless
failOnDataLoss=false (then it resumes at the earliest offset still there). So does a
partition whose offsets went backwards (a topic deleted and re-created); with
failOnDataLoss=false such a partition starts over from its earliest offset (deviation: Spark's
connector goes on from the partition's new end, skipping what the new topic held by then).

The offsets Spark checkpoints are JSON like its Kafka connector's: {"topic": {"0": 23}}, plus,
in a batch's end offsets, the split it was planned with (`planning.SPLIT_KEY`: minPartitions,
maxRecordsPerPartition). A replayed batch is cut with that split, not the current options, so
its Spark tasks get the rows they got the first time: the exactly-once sink keys its
transactions by task partition. (Deviation from Spark's connector, which re-plans a replay
with the current options.) latestOffset answers the start unchanged when there is nothing new,
so changed split options alone do not make an empty batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from confluent_kafka import Message
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from pipeline import planning
from pipeline.kafka_io import CHUNK, Offsets, read_range
from pipeline.options import OptionError, ReadOptions
from pipeline.planning import TP, OffsetRange, Positions

SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long,"
    " timestamp timestamp, timestampType int"
)
HEADERS = "headers array<struct<key:string,value:binary>>"
# librdkafka's timestamp types -> Kafka's TimestampType ids, which Spark's column carries.
TIMESTAMP_TYPE = {0: -1, 1: 0, 2: 1}


def schema_ddl(include_headers: bool) -> str:
    return f"{SCHEMA}, {HEADERS}" if include_headers else SCHEMA


class RangePartition(InputPartition):
    """One Spark task's input: an offset range, or none (a batch with nothing to read)."""

    def __init__(self, offsets: OffsetRange | None) -> None:
        super().__init__(offsets)
        self.range = offsets


def to_arrow(msgs: list[Message], arrow_schema: pa.Schema, include_headers: bool) -> pa.RecordBatch:
    stamps = [m.timestamp() for m in msgs]
    columns: list[Any] = [
        [m.key() for m in msgs],
        [m.value() for m in msgs],
        [m.topic() for m in msgs],
        [m.partition() for m in msgs],
        [m.offset() for m in msgs],
        # no timestamp type (v0 records): Spark gives the Java client's -1 ms, as a timestamp
        [ms * 1000 if kind else -1000 for kind, ms in stamps],
        [TIMESTAMP_TYPE.get(kind, -1) for kind, _ in stamps],
    ]
    if include_headers:  # NULL, as in Spark, for a record without headers
        headers: list[Any] = [m.headers() for m in msgs]
        columns.append([[{"key": k, "value": v} for k, v in hs] if hs else None for hs in headers])
    arrays = [pa.array(c, type=f.type) for c, f in zip(columns, arrow_schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)


def read_partition(
    opts: ReadOptions, schema: StructType, partition: InputPartition
) -> Iterator[pa.RecordBatch]:
    assert isinstance(partition, RangePartition)
    if partition.range is None:
        return
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    pending: list[Message] = []
    for chunk in read_range(opts, partition.range):
        pending += chunk
        if len(pending) >= CHUNK:
            yield to_arrow(pending, arrow_schema, opts.include_headers)
            pending = []
    if pending:
        yield to_arrow(pending, arrow_schema, opts.include_headers)


def _start_of(opts: ReadOptions, client: Offsets, begin: Positions, current: list[TP]) -> Positions:
    """Where each current partition starts: where the last batch ended, the earliest offset
    for partitions new since then, and checked against retention (failOnDataLoss)."""
    gone = sorted(set(begin) - set(current))
    if gone and opts.fail_on_data_loss:
        raise RuntimeError(f"partitions {gone} disappeared (failOnDataLoss=true)")
    earliest = client.bounds(current, "earliest")
    start = {tp: begin.get(tp, earliest[tp]) for tp in current}
    lost = planning.lost(start, earliest)
    if lost and opts.fail_on_data_loss:
        detail = ", ".join(f"{t}-{p}: wanted {w}, earliest {e}" for (t, p), (w, e) in lost.items())
        raise RuntimeError(
            f"offsets were deleted before they were read ({detail});"
            " set failOnDataLoss=false to skip them"
        )
    return {tp: max(offset, earliest[tp]) for tp, offset in start.items()}


def _check_backwards(
    opts: ReadOptions, client: Offsets, begin: Positions, end: Positions
) -> Positions:
    """A partition whose offsets went backwards (a topic deleted and re-created) fails the
    query with failOnDataLoss=true, with Spark's message ("Partition t-0's offset was changed
    from A to B, some data may have been missed"). With false it starts over from its earliest
    offset: a deviation, Spark's connector drops the range and goes on from the partition's
    new end, skipping what the re-created topic held by then."""
    back = planning.went_back(begin, end)
    if not back:
        return begin
    detail = ", ".join(
        f"Partition {t}-{p}'s offset was changed from {a} to {b}"
        for (t, p), (a, b) in sorted(back.items())
    )
    if opts.fail_on_data_loss:
        raise RuntimeError(
            f"{detail}, some data may have been missed (the topic deleted and re-created?);"
            " set failOnDataLoss=false to read such partitions from their earliest offset"
        )
    earliest = client.bounds(back, "earliest")
    return {**begin, **{tp: earliest[tp] for tp in back}}


class KafkaBatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        client = Offsets(self.opts)
        tps = client.partitions()
        earliest = client.bounds(tps, "earliest")
        latest = client.bounds(tps, "latest")
        start = planning.resolve(self.opts.starting, tps, earliest, latest, "startingOffsets")
        end = planning.resolve(self.opts.ending, tps, earliest, latest, "endingOffsets")
        start = _start_of(self.opts, client, start, tps)
        for tp in tps:
            if end[tp] > latest[tp]:
                raise OptionError(f"option 'endingOffsets': {end[tp]} is past the end of {tp}")
        ranges = planning.plan_ranges(
            start, end, self.opts.min_partitions, self.opts.max_records_per_partition
        )
        return [RangePartition(r) for r in ranges] or [RangePartition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.opts, self.schema, partition)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._client: Offsets | None = None
        self._target: Positions | None = None  # Trigger.AvailableNow

    def __getstate__(self) -> dict[str, Any]:
        # Shipped to the tasks for read(): the admin client stays behind.
        return {**self.__dict__, "_client": None}

    @property
    def client(self) -> Offsets:
        if self._client is None:
            self._client = Offsets(self.opts)
        return self._client

    def initialOffset(self) -> dict[str, Any]:
        tps = self.client.partitions()
        earliest = self.client.bounds(tps, "earliest")
        latest = self.client.bounds(tps, "latest")
        start = planning.resolve(self.opts.starting, tps, earliest, latest, "startingOffsets")
        return planning.to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.opts.max_offsets_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.client.partitions()
        self._target = self.client.bounds(tps, "latest")

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        tps = self.client.partitions()
        begin = _start_of(self.opts, self.client, planning.from_json(start), tps)
        latest = self.client.bounds(tps, "latest")
        begin = _check_backwards(self.opts, self.client, begin, latest)
        if self._target is not None:
            latest = planning.cap(latest, self._target, begin)
        if isinstance(limit, ReadMaxRows):
            latest = planning.rate_limit(begin, latest, limit.max_rows)
        end = {tp: max(begin[tp], latest[tp]) for tp in tps}
        if end == planning.from_json(start):
            return dict(start)  # nothing new: not even a changed split makes a batch
        split = planning.Split(self.opts.min_partitions, self.opts.max_records_per_partition)
        return planning.to_json(end, split)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        stop = planning.from_json(end)
        begin = _start_of(self.opts, self.client, planning.from_json(start), sorted(stop))
        begin = _check_backwards(self.opts, self.client, begin, stop)
        # a replayed batch is cut as it was the first time, whatever the options say now
        split = planning.split_of(end) or planning.Split(
            self.opts.min_partitions, self.opts.max_records_per_partition
        )
        ranges = planning.plan_ranges(
            begin, stop, split.min_partitions, split.max_records_per_partition
        )
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.opts, self.schema, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: like Spark's connector, the source never commits offsets to Kafka;
        the checkpoint is the record of what was read."""
