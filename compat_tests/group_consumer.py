"""A group consumer for test_groups.py, one process per member, for the three Python clients.

    python -m compat_tests.group_consumer CLIENT BOOTSTRAP TOPIC GROUP [INSTANCE_ID]

CLIENT "confluent-consumer" is confluent-kafka with ``group.protocol=consumer`` (KIP-848);
"confluent-cooperative" is the classic protocol with ``cooperative-sticky`` (incremental).

Subscribes, and for each record commits its offset synchronously and only then prints
``{"ev": "rec", "p": partition, "o": offset, "v": value}``; prints ``{"ev": "start"}`` when the
consumer exists. SIGTERM: close the consumer (leaving the group unless static) and exit 0.

A commit can fail when the member lost its partitions (its session expired, e.g. on a starved
machine, and the group rebalanced without it) or while a rebalance is under way (kafka-python
then raises RebalanceInProgressError, as the Java client does): the record is then not printed,
the consumer seeks back to it and keeps polling, which rejoins the group, as a real application
would.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys

SESSION_MS = 6000
stop = False


def emit(**kw: object) -> None:
    print(json.dumps(kw), flush=True)


def _stop(*_: object) -> None:
    global stop
    stop = True


def run_confluent(
    bs: str,
    topic: str,
    group: str,
    instance: str | None,
    consumer_protocol: bool = False,
    strategy: str | None = None,
) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    conf: dict[str, object] = {
        "bootstrap.servers": bs,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if consumer_protocol:  # KIP-848: the broker sets the session timeout and interval
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 500})
    if strategy:
        conf["partition.assignment.strategy"] = strategy
    if instance:
        conf["group.instance.id"] = instance
    c = Consumer(conf)
    c.subscribe([topic])
    emit(ev="start")
    while not stop:
        m = c.poll(0.1)
        if m is None or m.error():
            continue
        try:
            c.commit(m, asynchronous=False)
        except KafkaException:
            # if no longer assigned, the next owner starts at the committed offset
            with contextlib.suppress(KafkaException):
                c.seek(TopicPartition(m.topic(), m.partition(), m.offset()))
            continue
        emit(ev="rec", p=m.partition(), o=m.offset(), v=m.value().decode())
    c.close()


def run_kafka_python(bs: str, topic: str, group: str, instance: str | None) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka.errors import CommitFailedError, IllegalStateError, RebalanceInProgressError

    kw: dict[str, object] = {}
    if instance:
        kw["group_instance_id"] = instance
    c = KafkaConsumer(
        topic,
        bootstrap_servers=bs,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=500,
        **kw,
    )
    emit(ev="start")
    while not stop:
        # 1 s, not 100 ms: kafka-python 3.0.12 loses a rejoin when poll() times out while its
        # JoinGroup/SyncGroup are in flight and the rejoin was caused by new topic metadata
        # (the first assignment was made before the topic's metadata arrived): the finished
        # join is never applied, heartbeats stay disabled and the member's session expires.
        # Records end a poll at once, so the longer timeout costs no latency.
        for tp, msgs in c.poll(timeout_ms=1000).items():
            for m in msgs:
                try:
                    c.commit({tp: OffsetAndMetadata(m.offset + 1, "", -1)})
                except (CommitFailedError, RebalanceInProgressError):
                    # kafka-python raises RebalanceInProgressError itself (as the Java client's
                    # commitSync does) when its heartbeat has already learnt of a rebalance
                    with contextlib.suppress(IllegalStateError):  # no longer assigned
                        c.seek(tp, m.offset)
                    break
                emit(ev="rec", p=m.partition, o=m.offset, v=m.value.decode())
    c.close()


def run_aiokafka(bs: str, topic: str, group: str, instance: str | None) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka.errors import CommitFailedError, IllegalStateError
    from aiokafka.structs import OffsetAndMetadata

    async def main() -> None:
        c = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bs,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=500,
            group_instance_id=instance,
        )
        await c.start()
        emit(ev="start")
        try:
            while not stop:
                batches = await c.getmany(timeout_ms=100)
                for tp, msgs in batches.items():
                    for m in msgs:
                        try:
                            await c.commit({tp: OffsetAndMetadata(m.offset + 1, "")})
                        except IllegalStateError:
                            break  # revoked since getmany(): the next owner resumes from here
                        except CommitFailedError:
                            with contextlib.suppress(IllegalStateError):  # no longer assigned
                                c.seek(tp, m.offset)
                            break
                        emit(ev="rec", p=m.partition, o=m.offset, v=m.value.decode())
        finally:
            await c.stop()

    asyncio.run(main())


def run_confluent_consumer_protocol(bs: str, topic: str, group: str, instance: str | None) -> None:
    run_confluent(bs, topic, group, instance, consumer_protocol=True)


def run_confluent_cooperative(bs: str, topic: str, group: str, instance: str | None) -> None:
    run_confluent(bs, topic, group, instance, strategy="cooperative-sticky")


RUNNERS = {
    "confluent": run_confluent,
    "confluent-cooperative": run_confluent_cooperative,
    "confluent-consumer": run_confluent_consumer_protocol,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
}

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _stop)
    client, bs, topic, group = sys.argv[1:5]
    instance = sys.argv[5] if len(sys.argv) > 5 else None
    RUNNERS[client](bs, topic, group, instance)
