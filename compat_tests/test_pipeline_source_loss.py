"""The source when data it is to read disappears, as Spark's Kafka connector handles it:
failOnDataLoss=true fails the query naming the partition and offsets, false reads on from the
earliest offset still there.

- Retention deletes offsets under a range planned before (against a broker with fast
  retention; no Spark: `pipeline.kafka_io.read_range` is what a task runs).
- A topic deleted and re-created between runs of a streaming query: its offsets go backwards
  ("offset was changed from A to B"), in the shared local SparkSession.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests._support import EXTERNAL, topic_name
from compat_tests.conftest import _LIVE, _spawn
from compat_tests.test_pipeline_spark import (  # noqa: F401 (spark: the fixture)
    SPARK_TIMEOUT_S,
    sink,
    spark,
    stream,
)
from compat_tests.txn_support import create, produce_plain, read_all
from pipeline.kafka_io import DataLossError, read_range
from pipeline.options import parse_read_options
from pipeline.planning import OffsetRange

pytest.importorskip("pyspark")
FAST_RETENTION = {"log.retention.check.interval.ms": "200"}
HOUR_MS = 3_600_000


def _earliest(bs: str, topic: str) -> int:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bs, "group.id": "probe"})
    try:
        low, _ = c.get_watermark_offsets(TopicPartition(topic, 0), 10, cached=False)
        return int(low)
    finally:
        c.close()


@pytest.mark.timeout(120)
@pytest.mark.skipif(bool(EXTERNAL), reason="needs the broker's retention settings")
def test_range_whose_start_retention_deleted(tmp_path: Path) -> None:
    broker = _spawn(tmp_path, "retention", FAST_RETENTION)
    try:
        bs = broker.bootstrap
        topic = topic_name("retained")
        admin = AdminClient({"bootstrap.servers": bs})
        config = {"segment.ms": "300", "retention.ms": str(HOUR_MS)}
        admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(10)
        p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
        old = int(time.time() * 1000) - 2 * HOUR_MS  # past retention.ms: deleted once rolled
        for i in range(150):
            p.produce(topic, b"old-%d" % i, partition=0, timestamp=old)
        assert p.flush(10) == 0
        time.sleep(0.5)  # past segment.ms: the next append rolls the segment of old records
        for i in range(170):
            p.produce(topic, b"new-%d" % i, partition=0)
        assert p.flush(10) == 0
        deadline = time.monotonic() + 60
        while (earliest := _earliest(bs, topic)) == 0:
            assert time.monotonic() < deadline, "retention deleted nothing"
            time.sleep(0.2)
        assert earliest == 150
        planned = OffsetRange(topic, 0, 0, 300)  # planned before retention ran

        def read(fail_on_data_loss: str) -> list[int]:
            opts = parse_read_options(
                {
                    "kafka.bootstrap.servers": bs,
                    "subscribe": topic,
                    "failOnDataLoss": fail_on_data_loss,
                    "kafkaConsumer.pollTimeoutMs": "20000",
                },
                streaming=False,
            )
            return [m.offset() for chunk in read_range(opts, planned) for m in chunk]

        with pytest.raises(
            DataLossError, match=rf"\[0, 150\) of the planned range \[0, 300\) of {topic}-0"
        ):
            read("true")
        assert read("false") == list(range(earliest, 300))
    finally:
        broker.stop()
        _LIVE.remove(broker)


@pytest.mark.timeout(SPARK_TIMEOUT_S)
def test_stream_over_a_recreated_topic(spark: Any, bootstrap: str, tmp_path: Path) -> None:  # noqa: F811
    pytest.importorskip("pyspark")
    src = create(bootstrap, topic_name("recreated"), 1)
    out = create(bootstrap, topic_name("recreated-out"), 1)
    produce_plain(bootstrap, src, [b"first-%d" % i for i in range(10)])

    def copy(fail_on_data_loss: str) -> Any:
        df = stream(spark, bootstrap, src, failOnDataLoss=fail_on_data_loss)
        return sink(df.selectExpr("value"), bootstrap, out, tmp_path / "ckpt")

    q = copy("true")
    assert q.awaitTermination(SPARK_TIMEOUT_S) and q.exception() is None
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([src])[src].result(10)
    deadline = time.monotonic() + 30
    while True:  # the deletion completes in the background
        try:
            create(bootstrap, src, 1)
            break
        except KafkaException:
            assert time.monotonic() < deadline, "the topic could not be re-created"
            time.sleep(0.2)
    produce_plain(bootstrap, src, [b"second-%d" % i for i in range(4)])
    q = copy("true")
    with pytest.raises(
        Exception, match=rf"Partition {src}-0.s offset was changed from 10 to 4, some"
    ):
        q.awaitTermination(SPARK_TIMEOUT_S)
    q = copy("false")  # starts the partition over from its earliest offset
    assert q.awaitTermination(SPARK_TIMEOUT_S) and q.exception() is None
    got = sorted(v for _, _, v in read_all(bootstrap, [(out, 0)], "read_committed"))
    assert got == sorted(
        [b"first-%d" % i for i in range(10)] + [b"second-%d" % i for i in range(4)]
    )
