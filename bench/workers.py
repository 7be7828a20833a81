"""The benchmark's load: produce, consume and transactional worker processes
(confluent-kafka), and the topics they use."""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

# Settings every client gets, e.g. TLS (throughput.py --client-config): workers receive them
# in their cfg, the admin helpers below read them here.
CLIENT_EXTRA: dict[str, str] = {}


def _client_cpu() -> float:
    t = os.times()
    return t.user + t.system


def produce_worker(
    cfg: dict[str, Any],
    topic: str,
    counts: dict[int, int],
    size: int,
    deadline_s: float,
    barrier: Any,
    out: Any,
) -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[str] = []  # failed deliveries ("" past the first 10)
    not_queued: list[str] = []  # refused by produce_batch, never sent
    client_errors: list[str] = []  # librdkafka's error_cb: connection trouble and such

    def on_delivery(err: Any, _msg: Any) -> None:
        errors.append(str(err) if len(errors) < 10 else "")

    def on_client_error(err: Any) -> None:
        if len(client_errors) < 10:
            client_errors.append(str(err))

    # delivery.report.only.error is set: on_delivery runs for failed records only
    producer = Producer({**cfg, "on_delivery": on_delivery, "error_cb": on_client_error})
    producer.list_topics(topic, timeout=10)
    payload = os.urandom(size)
    chunk = 1000
    batch = [{"value": payload} for _ in range(chunk)]
    plan = dict(counts)
    barrier.wait()
    cpu0 = _client_cpu()
    t0 = time.monotonic()
    deadline = t0 + deadline_s
    queued = 0
    timed_out = False
    while plan and not timed_out:
        for part in list(plan):
            left = plan[part]
            msgs = batch if left >= chunk else batch[:left]
            pending = msgs
            while pending:
                try:
                    n = producer.produce_batch(topic, pending, partition=part)
                except BufferError:  # local queue full: let librdkafka send some
                    producer.poll(0.005)
                    continue
                queued += n
                if n == len(pending):
                    break
                # the records not queued carry an "_error"; retry those refused for a
                # full queue, count the others as failed
                retry = []
                for m in pending:
                    err = m.pop("_error", None)
                    if err is None:
                        continue
                    if err.code() == KafkaError._QUEUE_FULL and time.monotonic() < deadline:
                        retry.append(m)
                    else:
                        not_queued.append(str(err))
                pending = retry
                producer.poll(0.005)
            plan[part] = left - len(msgs)
            if plan[part] <= 0:
                del plan[part]
        producer.poll(0)
        if time.monotonic() > deadline:
            timed_out = True
    left = producer.flush(max(0.1, deadline - time.monotonic()))
    t1 = time.monotonic()
    if left:
        timed_out = True
        producer.purge()
        producer.flush(5)
    n_err = len(errors)
    out.put(
        {
            "t0": t0,
            "t1": t1,
            "records": queued - left - n_err,
            "unacked": left,
            "errors": n_err + len(not_queued),
            "error_samples": [e for e in errors if e][:10] + not_queued[:5] + client_errors,
            "timed_out": timed_out,
            "cpu": _client_cpu() - cpu0,
        }
    )


def consume_worker(
    cfg: dict[str, Any],
    topic: str,
    counts: dict[int, int],
    size: int,
    deadline_s: float,
    barrier: Any,
    out: Any,
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    # a transactional topic: the markers take offsets too, so the positions to reach are the
    # partitions' end offsets, not the record counts
    ends: dict[int, int] | None = cfg.pop("bench.end.offsets", None)
    consumer = Consumer(cfg)
    consumer.list_topics(topic, timeout=10)
    want = {p: n for p, n in counts.items() if n > 0}
    total_want = sum(want.values())
    reach = {p: ends[p] for p in want} if ends is not None else want
    tps = [TopicPartition(topic, p, 0) for p in want]
    got: dict[int, int] = dict.fromkeys(want, 0)
    errors: list[str] = []
    bad_size = 0
    barrier.wait()
    cpu0 = _client_cpu()
    t0 = time.monotonic()
    deadline = t0 + deadline_s
    consumer.assign(tps)
    # No per-record Python work: count what consume() hands over, and once that is
    # enough, check each partition's position (next offset to hand over; the topic is
    # fresh, so offsets start at 0). Error events would show up as a shortfall there.
    received = 0
    timed_out = False
    consume = consumer.consume
    while True:
        # never ask for more than is left: consume() waits out its timeout for the rest
        # (past the last record only a marker may be left to step over: poll briefly)
        wait = 0.5 if received < total_want else 0.01
        msgs = consume(num_messages=max(1, min(10_000, total_want - received)), timeout=wait)
        if msgs:
            received += len(msgs)
            last = msgs[-1]
            err = last.error()
            if err is not None:
                if len(errors) < 10:
                    errors.append(str(err))
            elif len(last.value() or b"") != size:
                bad_size += 1
        if received >= total_want:
            got = {tp.partition: max(0, tp.offset) for tp in consumer.position(tps)}
            if all(got[p] >= n for p, n in reach.items()):
                break
        if time.monotonic() > deadline:
            got = {tp.partition: max(0, tp.offset) for tp in consumer.position(tps)}
            timed_out = True
            break
    total = sum(got.values()) if ends is None else received
    t1 = time.monotonic()
    cpu = _client_cpu() - cpu0
    consumer.close()
    out.put(
        {
            "t0": t0,
            "t1": t1,
            "records": total,
            "per_partition": got,
            "errors": len(errors),
            "error_samples": errors,
            "bad_size_batches": bad_size,
            "timed_out": timed_out,
            "cpu": cpu,
        }
    )


def txn_produce_worker(
    cfg: dict[str, Any],
    topic: str,
    counts: dict[int, int],
    size: int,
    deadline_s: float,
    barrier: Any,
    out: Any,
) -> None:
    """Back-to-back transactions of ``bench.records.per.txn`` records, dealt round-robin over
    this worker's partitions; a failed transaction is aborted and its records not counted."""
    from confluent_kafka import KafkaException, Producer

    per_txn = int(cfg.pop("bench.records.per.txn"))
    client_errors: list[str] = []

    def on_client_error(err: Any) -> None:
        if len(client_errors) < 10:
            client_errors.append(str(err))

    producer = Producer(
        {**cfg, "transactional.id": f"bench-{uuid.uuid4().hex[:12]}", "error_cb": on_client_error}
    )
    producer.list_topics(topic, timeout=10)
    producer.init_transactions(30)
    payload = os.urandom(size)
    plan = dict(counts)
    written = dict.fromkeys(plan, 0)
    errors: list[str] = []
    txns = failed_txns = 0
    commit_latencies: list[float] = []  # begin_transaction to commit_transaction returned
    barrier.wait()
    cpu0 = _client_cpu()
    t0 = time.monotonic()
    deadline = t0 + deadline_s
    timed_out = False
    while plan:
        if time.monotonic() > deadline:
            timed_out = True
            break
        taken: dict[int, int] = {}
        began = time.monotonic()
        producer.begin_transaction()
        parts = list(plan)
        for i in range(min(per_txn, sum(plan.values()))):
            part = parts[i % len(parts)]
            if plan.get(part, 0) <= taken.get(part, 0):
                part = next(p for p in parts if plan[p] > taken.get(p, 0))
            while True:
                try:
                    producer.produce(topic, payload, partition=part)
                    break
                except BufferError:
                    producer.poll(0.005)
            taken[part] = taken.get(part, 0) + 1
        try:
            producer.commit_transaction(max(1.0, deadline - time.monotonic() + 30))
        except KafkaException as exc:
            failed_txns += 1
            if len(errors) < 10:
                errors.append(str(exc))
            try:
                producer.abort_transaction(30)
            except KafkaException:
                timed_out = True
                break
            continue
        commit_latencies.append(time.monotonic() - began)
        txns += 1
        for part, n in taken.items():
            written[part] += n
            plan[part] -= n
            if plan[part] <= 0:
                del plan[part]
    t1 = time.monotonic()
    out.put(
        {
            "t0": t0,
            "t1": t1,
            "records": sum(written.values()),
            "per_partition": written,
            "transactions": txns,
            "latencies": commit_latencies,
            "errors": failed_txns,
            "error_samples": errors + client_errors,
            "timed_out": timed_out,
            "cpu": _client_cpu() - cpu0,
        }
    )


def latency_worker(
    cfg: dict[str, Any],
    topic: str,
    counts: dict[int, int],
    size: int,
    deadline_s: float,
    barrier: Any,
    out: Any,
) -> None:
    """One record in flight: produce it, wait until it is acknowledged, repeat; the time of
    each round trip (produce call to delivery report)."""
    from confluent_kafka import Producer

    errors: list[str] = []
    producer = Producer(cfg)
    producer.list_topics(topic, timeout=10)
    payload = os.urandom(size)
    part, wanted = next(iter(counts.items()))
    producer.produce(topic, payload, partition=part)  # connection and first batch: not timed
    producer.flush(30)
    latencies: list[float] = []
    delivered: list[bool] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        delivered.append(True)
        if err is not None and len(errors) < 10:
            errors.append(str(err))

    barrier.wait()
    cpu0 = _client_cpu()
    t0 = time.monotonic()
    deadline = t0 + deadline_s
    timed_out = False
    while len(latencies) < wanted:
        if time.monotonic() > deadline:
            timed_out = True
            break
        delivered.clear()
        sent = time.monotonic()
        producer.produce(topic, payload, partition=part, on_delivery=on_delivery)
        while not delivered:
            producer.poll(0.05)  # returns as soon as the delivery report is served
        latencies.append(time.monotonic() - sent)
    t1 = time.monotonic()
    out.put(
        {
            "t0": t0,
            "t1": t1,
            "records": len(latencies),
            "latencies": latencies,
            "errors": len(errors),
            "error_samples": errors,
            "timed_out": timed_out,
            "cpu": _client_cpu() - cpu0,
        }
    )


def percentile(sorted_values: list[float], pct: float) -> float | None:
    """The nearest-rank percentile of already sorted values, or None for none."""
    if not sorted_values:
        return None
    rank = max(1, -(-len(sorted_values) * pct // 100))
    return sorted_values[int(rank) - 1]


# --------------------------------------------------------------------------- phases


def split_partitions(partitions: int, clients: int, records: int) -> list[dict[int, int]]:
    """Per client, {partition: records}; partitions dealt round-robin to clients."""
    per_part = [
        records // partitions + (1 if p < records % partitions else 0) for p in range(partitions)
    ]
    plans: list[dict[int, int]] = [{} for _ in range(clients)]
    for p in range(partitions):
        plans[p % clients][p] = per_part[p]
    return [plan for plan in plans if plan]


CREATE_WARNINGS: list[str] = []


def create_topic(bootstrap: str, partitions: int, timeout: float = 30.0) -> str:
    """A fresh topic, ready when every partition has a leader.

    If the CreateTopics answer does not come but the topic shows up in Metadata, the
    topic is used and the broker's failure to answer is recorded in CREATE_WARNINGS.
    """
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"bench-{uuid.uuid4().hex[:12]}"
    admin = AdminClient({**CLIENT_EXTRA, "bootstrap.servers": bootstrap, "log_level": 4})
    (fut,) = admin.create_topics([NewTopic(name, partitions, 1)], request_timeout=timeout).values()
    deadline = time.monotonic() + timeout
    answered = False
    while time.monotonic() < deadline:
        if not answered and fut.done():
            fut.result()  # raises the broker's error, if any
            answered = True
        # all topics, not list_topics(name): that could auto-create the topic
        md = admin.list_topics(timeout=5).topics.get(name)
        if (
            md is not None
            and md.error is None
            and len(md.partitions) == partitions
            and all(p.leader >= 0 for p in md.partitions.values())
        ):
            if not answered:
                time.sleep(0.2)
                if not fut.done():
                    msg = f"{bootstrap}: no CreateTopics response, but the topic exists"
                    if msg not in CREATE_WARNINGS:
                        print(f"  WARNING: {msg}", flush=True)
                    CREATE_WARNINGS.append(msg)
            return name
        time.sleep(0.05)
    raise RuntimeError(f"topic {name} not created with leaders after {timeout}s")


def delete_topics(bootstrap: str, topics: list[str], timeout: float = 30.0) -> str | None:
    """Best effort, so that rounds start from a similar state; returns an error text."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**CLIENT_EXTRA, "bootstrap.servers": bootstrap, "log_level": 4})
    try:
        for fut in admin.delete_topics(topics, request_timeout=timeout).values():
            fut.result(timeout)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**CLIENT_EXTRA, "bootstrap.servers": bootstrap, "group.id": "bench-watermarks"})
    try:
        return [
            c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        ]
    finally:
        c.close()
