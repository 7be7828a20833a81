"""The `kafkad` Spark data source against a real broker, in one shared local SparkSession
(`local[2]`, created once for the whole session: a JVM start costs seconds).

Stock producers (confluent-kafka, kafka-python) write plain, committed and aborted
transactional records; the batch reader must return exactly the committed ones (aborted ones
too at read_uncommitted). A streaming copy through the exactly-once sink reads with
admission control and Trigger.AvailableNow, picks up a partition added between runs, and the
ledger example runs end to end, streaming and batch. The crash test is
`test_pipeline_crash.py`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions
from kafka import KafkaProducer

from compat_tests._support import topic_name
from compat_tests.txn_support import create, read_all
from kafkad.client.producing import murmur2, murmur2_partition

pytest.importorskip("pyspark")
SPARK_TIMEOUT_S = 300


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from pipeline.session import local_spark

    # The JVM keeps the fd 2 it starts with: its own log goes to this file instead of the capture
    # of whichever test started it, so a JVM that dies can be asked why.
    jvm_log = tmp_path_factory.mktemp("spark") / "jvm.log"
    with _stderr_to(jvm_log):
        # local[2,4]: a failed task is retried, as on a cluster (test_pipeline_failures.py).
        # Heartbeats every second: were the local executor still to exit after 60 failed ones
        # (pipeline.session.LOCAL_HEARTBEAT_MAX_FAILURES), it would do so a minute after
        # test_stage_retry_after_lost_shuffle_files, well before this fixture's stop.
        session = local_spark(
            "kafkad-compat-tests",
            max_failures=4,
            conf={"spark.executor.heartbeatInterval": "1s"},
        )
    jvm = session.sparkContext._gateway.proc
    yield session
    _stop(session, jvm, jvm_log)


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with path.open("ab") as f:
            os.dup2(f.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _stop(session: Any, jvm: Any, jvm_log: Path) -> None:
    """Stop the session. A JVM that is gone by then, or goes while stopping, fails the run with
    its exit code and the end of its log: Spark's local JVM has no business dying (the one
    cause seen, a heartbeat exit 56 ten minutes after a shuffle fetch failure, is what
    pipeline.session.LOCAL_HEARTBEAT_MAX_FAILURES prevents)."""
    from py4j.protocol import Py4JError

    problem = None
    if jvm.poll() is not None:
        problem = "Spark's JVM had exited before SparkSession.stop()"
    else:
        try:
            session.stop()
        except (Py4JError, ConnectionError, RuntimeWarning) as exc:  # (PySpark warns of a lost JVM)
            problem = f"Spark's JVM went away during SparkSession.stop(): {exc!r}"
    if problem is None:
        return
    with contextlib.suppress(Exception):
        jvm.wait(30)
    tail = jvm_log.read_text(errors="replace").splitlines()[-40:] if jvm_log.exists() else []
    pytest.fail("\n".join([f"{problem}; exit code {jvm.poll()}; its log {jvm_log}:", *tail]))


def stream(spark: Any, bs: str, src: str, **source: str) -> Any:
    """A streaming read of `src` from its earliest offset, with these source options."""
    r = (
        spark.readStream.format("kafkad")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
    )
    for k, v in source.items():
        r = r.option(k, v)
    return r.load()


def sink(df: Any, bs: str, out: str, ckpt: Path) -> Any:
    """Start `df` into `out` through the exactly-once sink, to the end (AvailableNow)."""
    return (
        df.writeStream.format("kafkad")
        .option("kafka.bootstrap.servers", bs)
        .option("topic", out)
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )


def finish(q: Any) -> None:
    assert q.awaitTermination(SPARK_TIMEOUT_S), "the query did not finish"
    assert q.exception() is None, q.exception()


def _reader(spark: Any, bs: str, **options: str) -> Any:
    r = spark.read.format("kafkad").option("kafka.bootstrap.servers", bs)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _produce_mixed(bs: str, topic: str) -> list[tuple[int, bytes]]:
    """Plain, committed and aborted records from two clients; returns the committed
    (partition, value) pairs."""
    plain = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for i in range(5):
        plain.produce(
            topic, b"plain-%d" % i, b"k%d" % i, partition=i % 2, headers=[("h", b"%d" % i)]
        )
    assert plain.flush(10) == 0
    txn = Producer({"bootstrap.servers": bs, "transactional.id": topic_name("tid")})
    txn.init_transactions(10)
    txn.begin_transaction()
    for i in range(4):
        txn.produce(topic, b"committed-%d" % i, partition=i % 2)
    txn.commit_transaction(10)
    txn.begin_transaction()
    for i in range(3):
        txn.produce(topic, b"aborted-%d" % i, partition=i % 2)
    txn.flush(10)
    txn.abort_transaction(10)
    kp = KafkaProducer(bootstrap_servers=bs)
    for i in range(3):
        kp.send(topic, b"kafka-python-%d" % i, partition=1)
    kp.flush(10)
    kp.close()
    want = [(i % 2, b"plain-%d" % i) for i in range(5)]
    want += [(i % 2, b"committed-%d" % i) for i in range(4)]
    want += [(1, b"kafka-python-%d" % i) for i in range(3)]
    return want


@pytest.mark.timeout(SPARK_TIMEOUT_S)
def test_batch_read_of_stock_producers(spark: Any, bootstrap: str) -> None:
    t = create(bootstrap, topic_name("spark-read"), 2)
    want = _produce_mixed(bootstrap, t)
    rows = _reader(spark, bootstrap, subscribe=t, includeHeaders="true").collect()
    assert sorted((r.partition, r.value) for r in rows) == sorted(want)
    assert not any(r.value.startswith(b"aborted") for r in rows)
    first = next(r for r in rows if r.value == b"plain-0")
    assert (first.key, first.topic, first.timestampType) == (b"k0", t, 0)
    assert [(h.key, h.value) for h in first.headers] == [("h", b"0")]
    no_headers = next(r for r in rows if r.value == b"committed-0")
    assert no_headers.headers is None  # as Spark gives a record without headers
    assert first.timestamp is not None
    # offsets are the log's: per partition increasing, with gaps where markers sit
    for p in (0, 1):
        offsets = [r.offset for r in rows if r.partition == p]
        assert offsets == sorted(offsets)
    uncommitted = _reader(
        spark, bootstrap, subscribe=t, **{"kafka.isolation.level": "read_uncommitted"}
    ).collect()
    assert sorted(r.value for r in uncommitted if r.value.startswith(b"aborted")) == [
        b"aborted-0",
        b"aborted-1",
        b"aborted-2",
    ]
    # Spark-style JSON offsets, split ranges: the same committed rows
    split = _reader(
        spark,
        bootstrap,
        assign=f'{{"{t}": [0, 1]}}',
        startingOffsets=f'{{"{t}": {{"0": -2, "1": -2}}}}',
        endingOffsets=f'{{"{t}": {{"0": -1, "1": -1}}}}',
        maxRecordsPerPartition="2",
    )
    assert split.rdd.getNumPartitions() > 2
    assert sorted((r.partition, r.value) for r in split.collect()) == sorted(want)


@pytest.mark.timeout(SPARK_TIMEOUT_S)
def test_bad_options_fail_fast(spark: Any, bootstrap: str) -> None:
    with pytest.raises(Exception, match="unknown option 'subscrbe'"):
        _reader(spark, bootstrap, subscrbe="x").collect()
    with pytest.raises(Exception, match="maxOffsetsPerTrigger"):
        _reader(spark, bootstrap, subscribe="x", maxOffsetsPerTrigger="10").collect()
    df = spark.createDataFrame([("k", "v")], "key string, value string")
    with pytest.raises(Exception, match="set option 'topic'"):
        df.write.mode("append").format("kafkad").option("kafka.bootstrap.servers", bootstrap).save()


@pytest.mark.timeout(SPARK_TIMEOUT_S)
def test_stream_copy_exactly_once_with_new_partition(
    spark: Any, bootstrap: str, tmp_path: Path
) -> None:
    src = create(bootstrap, topic_name("spark-src"), 2)
    out = create(bootstrap, topic_name("spark-out"), 2)
    want = _produce_mixed(bootstrap, src)

    def copy() -> Any:
        df = stream(spark, bootstrap, src, maxOffsetsPerTrigger="6")
        q = sink(df.selectExpr("key", "value", "partition"), bootstrap, out, tmp_path / "ckpt")
        finish(q)
        return q

    q = copy()
    batches = [p for p in q.recentProgress if p["numInputRows"] > 0]
    assert len(batches) >= 3, "maxOffsetsPerTrigger=6 over ~19 offsets"
    got = read_all(bootstrap, [(out, 0), (out, 1)], "read_committed")
    assert sorted((p, v) for _, p, v in got) == sorted(want)

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(src, 3)])[src].result(10)
    admin.create_partitions([NewPartitions(out, 3)])[out].result(10)
    more = Producer({"bootstrap.servers": bootstrap})
    for i in range(4):
        more.produce(src, b"late-%d" % i, partition=2 if i % 2 else 0)
    assert more.flush(10) == 0
    copy()  # same checkpoint: resumes, and reads the new partition from its start
    got = read_all(bootstrap, [(out, p) for p in range(3)], "read_committed")
    want += [(2 if i % 2 else 0, b"late-%d" % i) for i in range(4)]
    assert sorted((p, v) for _, p, v in got) == sorted(want)


@pytest.mark.timeout(SPARK_TIMEOUT_S)
def test_ledger_example_end_to_end(spark: Any, bootstrap: str, tmp_path: Path) -> None:
    from pipeline.examples import ledger

    src = create(bootstrap, topic_name("transfers"), 3)
    out = create(bootstrap, topic_name("balance-updates"), 3)
    ledger.seed(bootstrap, src, ledger.make_transfers(600, seed=5), 3)
    q = ledger.run_stream(spark, bootstrap, src, out, str(tmp_path / "ckpt"), available_now=True)
    q.awaitTermination(SPARK_TIMEOUT_S)
    assert q.exception() is None
    report = ledger.check_topics(bootstrap, src, out)
    assert report.ok, report.problems[:10]
    assert report.valid > 500 and report.updates == 2 * report.valid
    assert sum(report.balances.values()) == 0

    batch_out = create(bootstrap, topic_name("balance-updates-batch"), 3)
    ledger.run_batch(spark, bootstrap, src, batch_out)
    batch = ledger.check_topics(bootstrap, src, batch_out)
    assert batch.ok, batch.problems[:10]
    assert batch.balances == report.balances


# Kafka's Utils.murmur2 and the Java client's keyed partition (the kafkad CLI's producer uses
# the same functions).
java_murmur2 = murmur2
java_murmur2_partition = murmur2_partition


def test_java_murmur2_reference() -> None:
    # Kafka's own expectations: clients/.../common/utils/UtilsTest.testMurmur2
    cases = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    assert {k: java_murmur2(k) for k in cases} == cases


@pytest.mark.timeout(SPARK_TIMEOUT_S)
def test_sink_partitions_keys_like_the_java_client(spark: Any, bootstrap: str) -> None:
    out = create(bootstrap, topic_name("spark-murmur2"), 3)
    keys = [f"key-{i}" for i in range(20)]
    df = spark.createDataFrame([(k, k) for k in keys], "key string, value string")
    df.write.mode("append").format("kafkad").option("kafka.bootstrap.servers", bootstrap).option(
        "topic", out
    ).save()
    got = {
        v.decode(): p
        for _, p, v in read_all(bootstrap, [(out, p) for p in range(3)], "read_committed")
    }
    assert got == {k: java_murmur2_partition(k.encode(), 3) for k in keys}
