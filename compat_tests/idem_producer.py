"""An idempotent producer of one stock Python client, run as a subprocess by
test_idempotent_crash.py: ``python -u idem_producer.py CLIENT BOOTSTRAP TOPIC N PARTITIONS``.

Record i has the value b"%08d" % i and goes to partition i % PARTITIONS, in order. Every
acknowledgement is printed as ``ack <partition> <offset> <i>``, every final failure as
``fail <i> <error>``; ``done`` ends the run. Retries are left to the client (idempotence on,
acks=all), so a broker killed and restarted mid-stream must cost no duplicates and no
reordering.
"""

from __future__ import annotations

import asyncio
import sys


def out(line: str) -> None:
    sys.stdout.write(line + "\n")


def run_confluent(bootstrap: str, topic: str, n: int, parts: int) -> None:
    from confluent_kafka import Producer

    def delivered(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            out(f"ack {msg.partition()} {msg.offset()} {int(msg.value())}")
        else:
            out(f"fail {int(msg.value())} {err}")

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 60_000,
            "queue.buffering.max.messages": n,
            "reconnect.backoff.max.ms": 200,
        }
    )
    for i in range(n):
        while True:
            try:
                producer.produce(topic, b"%08d" % i, partition=i % parts, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(90)


def run_kafka_python(bootstrap: str, topic: str, n: int, parts: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        acks="all",
        linger_ms=5,
        delivery_timeout_ms=60_000,
        request_timeout_ms=5_000,
        reconnect_backoff_max_ms=200,
        max_block_ms=60_000,
    )
    for i in range(n):
        fut = producer.send(topic, b"%08d" % i, partition=i % parts)
        fut.add_callback(lambda m, i=i: out(f"ack {m.partition} {m.offset} {i}"))
        fut.add_errback(lambda e, i=i: out(f"fail {i} {e!r}"))
    producer.flush(90)
    producer.close(10)


async def run_aiokafka(bootstrap: str, topic: str, n: int, parts: int) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        acks="all",
        linger_ms=5,
        request_timeout_ms=60_000,
        retry_backoff_ms=100,
    )
    await producer.start()

    def done(fut: asyncio.Future, i: int) -> None:  # type: ignore[type-arg]
        if fut.exception() is None:
            m = fut.result()
            out(f"ack {m.partition} {m.offset} {i}")
        else:
            out(f"fail {i} {fut.exception()!r}")

    try:
        pending = []
        for i in range(n):
            fut = await producer.send(topic, b"%08d" % i, partition=i % parts)
            fut.add_done_callback(lambda f, i=i: done(f, i))
            pending.append(fut)
        await asyncio.gather(*pending, return_exceptions=True)
    finally:
        await producer.stop()


def main() -> None:
    client, bootstrap, topic, n, parts = sys.argv[1:6]
    args = (bootstrap, topic, int(n), int(parts))
    if client == "confluent-kafka":
        run_confluent(*args)
    elif client == "kafka-python":
        run_kafka_python(*args)
    elif client == "aiokafka":
        asyncio.run(run_aiokafka(*args))
    else:
        raise SystemExit(f"unknown client {client}")
    out("done")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
