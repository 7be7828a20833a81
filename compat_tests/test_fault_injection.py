"""confluent-kafka (librdkafka) through kafkad's fault-injection switch: retriable Produce
errors and dropped connections cost retries, never a record. A non-idempotent producer is
used, so only faults that happen *before* the write are safe (NOT_LEADER_OR_FOLLOWER, a
connection closed before the request is handled); REQUEST_TIMED_OUT or ``drop_after`` would
rightly produce duplicates without idempotence."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from compat_tests._support import EXTERNAL
from compat_tests.conftest import _LIVE, _spawn
from compat_tests.test_confluent_kafka import consume, create_topic

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="needs its own kafkad with a setting")

N = 300
TIMEOUT_S = 60


@pytest.mark.parametrize(
    "spec",
    [
        "seed=3; produce:error=NOT_LEADER_OR_FOLLOWER@0.3",
        "seed=4; produce:drop@0.15",
    ],
    ids=["not-leader", "drop"],
)
def test_every_record_survives_injected_produce_faults(tmp_path: Path, spec: str) -> None:
    broker = _spawn(tmp_path, "faulty", {"kafkad.fault.injection": spec})
    try:
        bootstrap = broker.bootstrap
        topic = create_topic(AdminClient({"bootstrap.servers": bootstrap}))
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": False,
                "max.in.flight.requests.per.connection": 1,
                "linger.ms": 5,
                "batch.num.messages": 20,
                "retry.backoff.ms": 10,
                "retries": 1000,
                "message.timeout.ms": TIMEOUT_S * 1000,
            }
        )
        errors: list[object] = []

        def on_delivery(err: object, msg: object) -> None:
            if err is not None:
                errors.append(err)

        values = [b"v%04d" % i for i in range(N)]
        for v in values:
            producer.produce(topic, value=v, partition=0, on_delivery=on_delivery)
            producer.poll(0)
        assert producer.flush(TIMEOUT_S) == 0
        assert errors == []
        got = consume(bootstrap, [TopicPartition(topic, 0, 0)], N)
        # each once; librdkafka keeps the order across retries only when idempotent
        assert sorted(m.value() for m in got) == values
        assert [m.offset() for m in got] == list(range(N))
        assert "fault injection: api 0" in broker.log_path.read_text(), "nothing was injected"
    finally:
        broker.stop()
        _LIVE.remove(broker)
