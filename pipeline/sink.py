"""The `kafkad` data source's writers: an exactly-once streaming sink and batch writes.

Theory of operation. Spark runs a micro-batch as one task per partition of the data being
written; each task calls `write` with its rows. A task with rows:

1. creates a transactional producer with the transactional id `<prefix><query id>-<task
   partition>` and calls InitProducerId (`init_transactions`): this fences any earlier
   incarnation of the same task (a zombie, or the run before a crash) and aborts or finishes
   its open transaction;
2. reads the driver's batch-complete record and its own marker (`pipeline.markers`). A batch
   recorded complete is a replay: it writes nothing (whatever the task layout now). A marker
   holding this batch means this task committed it: it reads its input, checks it is the
   same rows (count and digest) and writes nothing, or fails loudly if the input differs (the
   query changed, or is not deterministic);
3. otherwise it begins a transaction, produces its rows, and once its input iterator ends
   checks that Spark sent the whole input (`pipeline.end_of_input`: PySpark ends the iterator
   the same way when the JVM side of the task failed or was cancelled mid-stream). A cut input
   aborts the transaction and fails the task; a whole one adds the marker (batch id, row
   count, digest, via `send_offsets_to_transaction` to its marker group) and commits: rows and
   marker become visible together or not at all.

The driver's `commit` (called once all tasks succeeded, before Spark records the batch as done
in its checkpoint) records the batch as complete; it may run any number of times. If the
driver dies before Spark records the batch, the restarted query replays it with the same id
and the same input offsets, and the tasks skip it (step 2).

Guarantee (what a read_committed consumer of the output sees):
- every input row of every micro-batch is reflected in the output exactly once, across
  crashes of the driver, executors or tasks and restarts from the checkpoint, provided the
  transformation is deterministic: a replayed batch must assign the same rows to the same
  task partitions (the same input gives the same partitioning for map-only and shuffled plans
  alike; nondeterministic functions such as rand() or current_timestamp() in the plan break
  this, as would changing the query between runs of one checkpoint, which is refused where
  a task that committed the batch gets other rows; the `kafkad` source plans a replay with
  the split it first used, whatever minPartitions / maxRecordsPerPartition say now);
- atomicity is per task, not per micro-batch: while a batch is being written, the consumer
  may see the outputs of the tasks that have committed and not yet those of the others;
  each task's rows appear all at once, in the order the task wrote them per output partition;
- a read_uncommitted consumer may also see rows of transactions that were later aborted.
Two queries, or two sinks of one query, must not share a transactionalIdPrefix.

Batch writes (`df.write.format("kafkad")`) run the same steps with a fresh job id in place of
the query id and batch 0: each task's rows appear once even if Spark retries the task; a job
run twice writes twice.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from pipeline import end_of_input, markers
from pipeline.kafka_io import TxnTask, record_done
from pipeline.options import WriteOptions

QUERY_ID = "sql.streaming.queryId"  # Spark's local properties of a streaming query's tasks
BATCH_ID = "streaming.sql.batchId"


@dataclass
class TaskOutcome(WriterCommitMessage):
    task_partition: int
    rows: int
    skipped: bool  # a replay: this task (or the whole batch) had committed already
    query_id: str = ""  # the driver's commit runs in a process that does not know it


def _rows(opts: WriteOptions, batch: pa.RecordBatch) -> Iterator[tuple[Any, ...]]:
    """(topic, value, key, partition, headers) per row, as the producer takes them."""
    names = batch.schema.names
    n: int = batch.num_rows
    values = batch.column("value").to_pylist()
    keys = batch.column("key").to_pylist() if "key" in names else [None] * n
    partitions = batch.column("partition").to_pylist() if "partition" in names else [None] * n
    headers = batch.column("headers").to_pylist() if "headers" in names else [None] * n
    if opts.topic is not None:
        topics: list[str | None] = [opts.topic] * n
    else:
        topics = batch.column("topic").to_pylist()
    for i in range(n):
        topic = topics[i]
        if topic is None:
            raise ValueError("a row has a null topic and option 'topic' is not set")
        hs = headers[i]
        yield (
            topic,
            values[i],
            keys[i],
            -1 if partitions[i] is None else partitions[i],
            None if not hs else [(h["key"], h["value"]) for h in hs],
        )


def _digest_row(digest: markers.InputDigest, row: tuple[Any, ...]) -> None:
    topic, value, key, partition, headers = row
    flat = [f for h in headers or () for f in h]
    digest.add(topic, value, key, partition, len(flat), *flat)


def produce_batch(
    task: TxnTask, opts: WriteOptions, batch: pa.RecordBatch, digest: markers.InputDigest
) -> int:
    for row in _rows(opts, batch):
        _digest_row(digest, row)
        task.produce(*row)
    task.producer.poll(0)
    return int(batch.num_rows)


def _drain(opts: WriteOptions, batches: Iterator[pa.RecordBatch]) -> markers.InputDigest:
    digest = markers.InputDigest()
    for batch in batches:
        for row in _rows(opts, batch):
            _digest_row(digest, row)
    return digest


def write_task(
    opts: WriteOptions, query_id: str, batch_id: int, batches: Iterator[pa.RecordBatch]
) -> TaskOutcome:
    ctx = TaskContext.get()
    assert ctx is not None, "called outside a Spark task"
    part = int(ctx.partitionId())
    infile = end_of_input.worker_input()
    rest = iter(batches)
    first = next((b for b in rest if b.num_rows), None)
    if first is None:
        return TaskOutcome(part, 0, skipped=False)  # nothing to write: no transaction
    task = TxnTask(opts, query_id, part)
    try:
        done, own = task.open()
        decision = markers.decide(done, own, batch_id)
        if decision is markers.Decision.SKIP_DONE:
            for _ in rest:  # let Spark finish sending the input
                pass
            return TaskOutcome(part, 0, skipped=True, query_id=query_id)
        if decision is markers.Decision.SKIP:
            assert own is not None
            digest = _drain(opts, itertools.chain([first], rest))
            end_of_input.check_whole(infile)  # a cut input proves nothing about the layout
            markers.check_replay(own, batch_id, digest)
            return TaskOutcome(part, 0, skipped=True, query_id=query_id)
        task.begin()
        rows = 0
        digest = markers.InputDigest()
        try:
            for batch in itertools.chain([first], rest):
                rows += produce_batch(task, opts, batch, digest)
            end_of_input.check_whole(infile)
            task.commit(batch_id, digest)
        except BaseException:
            task.abort()
            raise
        return TaskOutcome(part, rows, skipped=False, query_id=query_id)
    finally:
        task.close()


def _check(messages: list[WriterCommitMessage | None]) -> None:
    missing = sum(1 for m in messages if not isinstance(m, TaskOutcome))
    if missing:
        raise RuntimeError(f"{missing} of {len(messages)} sink tasks reported no outcome")


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskOutcome:
        ctx = TaskContext.get()
        assert ctx is not None, "called outside a Spark task"
        query_id = ctx.getLocalProperty(QUERY_ID)
        batch_id = ctx.getLocalProperty(BATCH_ID)
        if query_id is None or batch_id is None:
            raise RuntimeError("the kafkad stream writer runs only in a streaming query")
        return write_task(self.opts, query_id, int(batch_id), iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every task committed its own transaction (or found it committed): record the batch
        as complete, so that a replay skips it whatever its task layout. Idempotent."""
        _check(messages)
        query_ids = {m.query_id for m in messages if isinstance(m, TaskOutcome) and m.query_id}
        if len(query_ids) > 1:
            raise RuntimeError(f"sink tasks of one micro-batch name queries {sorted(query_ids)}")
        for query_id in query_ids:  # none when no task had a row: nothing to replay
            record_done(self.opts, query_id, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: a failed task aborted its transaction, or the replay's
        InitProducerId will; committed tasks stay committed and the replay skips them."""


class KafkaBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.job_id = f"batch-{uuid.uuid4()}"  # made once on the driver, shipped to the tasks

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskOutcome:
        return write_task(self.opts, self.job_id, 0, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _check(messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Tasks that committed stay committed (Kafka has no cross-transaction rollback)."""
