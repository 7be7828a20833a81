"""The exactly-once sink under Spark's own failure modes, as end-to-end experiments in the
shared local SparkSession (`local[2,4]`: a failed task is retried, as on a cluster):

- a task whose upstream fails mid-stream on its first attempt (a UDF raising at row 15,000
  of 20,000), retried by Spark;
- `query.stop()` while a micro-batch is being written, then a restart from the checkpoint;
- a stage retry: the shuffle files feeding the sink's stage are deleted while it runs (a UDF
  at row 20,000 of 60,000), the sink's tasks fail with FetchFailed, Spark reruns the map
  stage and the sink's stage;
- a replay with another task layout: the driver dies after the sink's commit and before
  Spark's commit log (simulated by removing the batch from the commit log), or before the
  sink's commit (the batch-complete record removed too), and the restart asks for 4 tasks
  instead of 1; then a replay whose query changed, which must fail.

In each, a read_committed consumer of the output must find every input row exactly once.
Spark's Python runner ends a cut task's input iterator as if the input were complete;
`pipeline.end_of_input` tells the two apart, and these tests check that it still does.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from compat_tests._support import topic_name
from compat_tests.test_pipeline_spark import (  # noqa: F401 (spark: the fixture)
    SPARK_TIMEOUT_S,
    finish,
    sink,
    spark,
    stream,
)
from compat_tests.txn_support import create

pytest.importorskip("pyspark")
ROWS = 20_000


def _seed(bs: str, topic: str, n: int, pad: int = 0) -> list[bytes]:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 20})
    # random padding: shuffle blocks must not compress (the stage-retry test needs their size)
    values = [b"%d." % i + os.urandom(pad // 2).hex().encode() for i in range(n)]
    for i, v in enumerate(values):
        while True:
            try:
                p.produce(topic, v, b"k%d" % (i % 97), partition=0)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(30) == 0
    return values


def _topics(bs: str, name: str, rows: int = ROWS, pad: int = 0) -> tuple[str, str, Counter[bytes]]:
    """An input topic (1 partition) holding `rows` records, an output topic (2 partitions),
    and the values the output must hold."""
    src = create(bs, topic_name(f"{name}-src"), 1)
    out = create(bs, topic_name(f"{name}-out"), 2)
    return src, out, Counter(_seed(bs, src, rows, pad))


def _output(bs: str, topic: str, partitions: int) -> Counter[bytes]:
    """Every value a read_committed consumer finds in the topic now (up to the LSO)."""
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": topic_name("reader"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = {tp.partition: c.get_watermark_offsets(tp, 10, cached=False)[1] for tp in tps}
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: Counter[bytes] = Counter()
        pending = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + 120
        while pending:
            assert time.monotonic() < deadline, f"could not read up to {ends}"
            for m in c.consume(1000, 0.2):
                assert m.error() is None, m.error()
                got[m.value()] += 1
            for pos in c.position([TopicPartition(topic, p) for p in pending]):
                if pos.offset >= ends[pos.partition]:
                    pending.discard(pos.partition)
        return got
    finally:
        c.close()


@contextlib.contextmanager
def _small_arrow_batches(spark: Any) -> Iterator[None]:  # noqa: F811
    """1,000 rows per Arrow batch to the sink's task (default 10,000): a task cut short
    has received, and would have committed, some of its rows."""
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
    try:
        yield
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


def _copy_through(
    spark: Any,  # noqa: F811
    bs: str,
    topics: tuple[str, str],
    ckpt: Path,
    fn: Any,
    shuffle: bool = False,
    **source: str,
) -> Any:
    """Start a copy of topics[0] into topics[1] through the sink, the UDF `fn` applied to each
    value (after a shuffle by key into 2 partitions with shuffle=True)."""
    src, out = topics
    df = stream(spark, bs, src, **source).selectExpr("key", "value")
    if shuffle:
        df = df.repartition(2, "key")
    return sink(df.select("key", fn("value").alias("value")), bs, out, ckpt)


@pytest.fixture
def flags(tmp_path: Path) -> Iterator[Path]:
    """A directory the test and the UDFs in Spark's Python workers signal through."""
    d = tmp_path / "flags"
    d.mkdir()
    yield d


@pytest.mark.timeout(SPARK_TIMEOUT_S)
def test_task_failing_mid_stream_then_retried(
    spark: Any,  # noqa: F811
    bootstrap: str,
    tmp_path: Path,
    flags: Path,
) -> None:
    from pyspark import TaskContext
    from pyspark.sql.functions import udf

    src, out, want = _topics(bootstrap, "fail")
    flag_dir = str(flags)

    @udf("binary", useArrow=False)  # type: ignore[misc]
    def raise_at_15000(value: bytes) -> bytes:
        ctx = TaskContext.get()
        if value == b"15000." and ctx is not None and ctx.attemptNumber() == 0:
            open(os.path.join(flag_dir, "raised"), "w").close()
            raise RuntimeError("injected failure at row 15000")
        return value

    finish(_copy_through(spark, bootstrap, (src, out), tmp_path / "ckpt", raise_at_15000))
    assert (flags / "raised").exists()
    assert _output(bootstrap, out, 2) == want


@pytest.mark.timeout(SPARK_TIMEOUT_S)
def test_query_stopped_mid_batch_then_restarted(
    spark: Any,  # noqa: F811
    bootstrap: str,
    tmp_path: Path,
    flags: Path,
) -> None:
    from pyspark.sql.functions import udf

    src, out, want = _topics(bootstrap, "stop")
    flag_dir = str(flags)

    @udf("binary", useArrow=False)  # type: ignore[misc]
    def stall_at_12000(value: bytes) -> bytes:
        if int(value.split(b".")[0]) >= 12000 and not os.path.exists(
            os.path.join(flag_dir, "released")
        ):
            open(os.path.join(flag_dir, "stalled"), "w").close()
            deadline = time.monotonic() + 300
            while not os.path.exists(os.path.join(flag_dir, "released")):
                assert time.monotonic() < deadline
                time.sleep(0.05)
        return value

    def run() -> Any:
        return _copy_through(spark, bootstrap, (src, out), tmp_path / "ckpt", stall_at_12000)

    with _small_arrow_batches(spark):
        q = run()
        deadline = time.monotonic() + SPARK_TIMEOUT_S
        while not (flags / "stalled").exists():  # the sink holds about 11,000 rows by now
            assert time.monotonic() < deadline and q.isActive, q.exception()
            time.sleep(0.05)
        q.stop()
        (flags / "released").touch()  # stops the stalled UDF if Spark left it running
        assert not _output(bootstrap, out, 2), "rows of a stopped batch became visible"
        finish(run())
    assert _output(bootstrap, out, 2) == want


@pytest.mark.timeout(SPARK_TIMEOUT_S)
def test_stage_retry_after_lost_shuffle_files(
    spark: Any,  # noqa: F811
    bootstrap: str,
    tmp_path: Path,
    flags: Path,
) -> None:
    from pyspark.sql.functions import udf

    # 60,000 rows of 1 KB: the shuffle reader runs ahead of the sink's task by what the socket
    # buffers hold (megabytes); with this much data it is still reading the map outputs when
    # they are deleted, while the sink's task has received thousands of rows.
    src, out, want = _topics(bootstrap, "shuffle", rows=60_000, pad=1000)
    flag_dir = str(flags)

    @udf("binary", useArrow=False)  # type: ignore[misc]
    def lose_shuffle_files_at_row_20000(value: bytes) -> bytes:
        if not value.startswith(b"20000."):
            return value
        try:  # once: the stage's retry must find its files
            os.close(os.open(os.path.join(flag_dir, "deleted"), os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return value
        for root in os.environ.get("SPARK_LOCAL_DIRS", "").split(","):
            for dirpath, _, files in os.walk(root):
                for f in files:
                    if f.startswith("shuffle_") and f.endswith(".data"):
                        os.remove(os.path.join(dirpath, f))
        return value

    with _small_arrow_batches(spark):  # the map stage: 8 tasks; the sink's stage: 2
        q = _copy_through(
            spark,
            bootstrap,
            (src, out),
            tmp_path / "ckpt",
            lose_shuffle_files_at_row_20000,
            shuffle=True,
            minPartitions="8",
        )
        finish(q)
    assert (flags / "deleted").exists()
    assert _output(bootstrap, out, 2) == want


def _forget_commit(ckpt: Path, batch: int) -> None:
    """The checkpoint as the driver leaves it when it dies after the sink's commit and before
    Spark's commit log records the batch."""
    for f in (ckpt / "commits" / str(batch), ckpt / "commits" / f".{batch}.crc"):
        f.unlink(missing_ok=True)


@pytest.mark.timeout(SPARK_TIMEOUT_S)
def test_replay_with_another_task_layout(spark: Any, bootstrap: str, tmp_path: Path) -> None:  # noqa: F811
    src = create(bootstrap, topic_name("layout-src"), 1)
    out = create(bootstrap, topic_name("layout-out"), 2)
    want = Counter(_seed(bootstrap, src, 1000))
    ckpt = tmp_path / "ckpt"

    def run(min_partitions: str, value: str = "value") -> Any:
        df = stream(spark, bootstrap, src, minPartitions=min_partitions)
        return sink(df.selectExpr("key", f"{value} AS value"), bootstrap, out, ckpt)

    def forget_done(query_id: str) -> None:
        """The driver died before the sink's commit too: no batch-complete record."""
        group = f"kafkad-sink-{query_id}-done"
        admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the result is in
        admin.delete_consumer_groups([group])[group].result(10)

    q = run("1")
    finish(q)
    assert _output(bootstrap, out, 2) == want
    # The driver died after the sink's commit: the replay is skipped as complete.
    _forget_commit(ckpt, 0)
    q = run("4")
    finish(q)
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [1000]
    assert _output(bootstrap, out, 2) == want
    # The driver died before the sink's commit: the replay is cut into tasks as it was the
    # first time (the split is kept in the batch's offsets), and the committed task skips.
    _forget_commit(ckpt, 0)
    forget_done(q.id)
    q = run("4")
    finish(q)
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [1000]
    assert _output(bootstrap, out, 2) == want
    # The query changed between runs: a committed task gets other rows and fails the query.
    _forget_commit(ckpt, 0)
    forget_done(q.id)
    q = run("1", value="concat(value, 'x')")
    with pytest.raises(Exception, match="replayed with other input for this task"):
        q.awaitTermination(SPARK_TIMEOUT_S)
    assert _output(bootstrap, out, 2) == want
