"""bench/null_broker.py serves a confluent-kafka transactional producer end to end: the
canned answers are ones librdkafka accepts, so the bench's figures for it are a real load."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from bench.null_broker import LOOPS

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(params=LOOPS)
def null_broker(request: pytest.FixtureRequest) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.null_broker", "--loop", request.param, "--topic", "t"],
        cwd=REPO,
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert line.startswith("null ready advertise="), line
        yield line.split()[2].split("=", 1)[1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_transactional_producer(null_broker: str) -> None:
    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": null_broker,
            "transactional.id": "null-test",
            "linger.ms": 0,
            "error_cb": lambda err: errors.append(str(err)),
        }
    )
    producer.init_transactions(10)
    delivered: list[tuple[int, int]] = []

    def on_delivery(err: object, msg: object) -> None:
        assert err is None, err
        delivered.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    for _ in range(3):
        producer.begin_transaction()
        for i in range(5):
            producer.produce("t", b"x" * 100, partition=i % 4, on_delivery=on_delivery)
        producer.commit_transaction(10)
    assert len(delivered) == 15
    assert errors == []
