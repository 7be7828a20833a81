"""The ledger job: account transfers in, per-account balance updates out, exactly once.

Input topic (default `transfers`): one JSON transfer per record,
`{"id": "t-000042", "from": "acct-07", "to": "acct-13", "amount": 250}` (amount in cents).
Output topic (default `balance-updates`): per valid transfer two records keyed by account, a
debit of the payer and a credit of the payee,
`{"account": "acct-07", "delta": -250, "entry": "debit", "transfer_id": "t-000042"}`.
Transfers with a non-positive amount, a missing field or from == to are rejected (dropped).
Summing the deltas per account gives its balance; every valid transfer must appear exactly
once as a debit and once as a credit, which `check` verifies with a read_committed consumer.

    python -m pipeline.examples.ledger demo --bootstrap 127.0.0.1:9092
    python -m pipeline.examples.ledger seed|run|batch|check --help

`run` is the streaming job (exactly-once sink, checkpoint in --checkpoint; --available-now
processes what is there and stops); `batch` is the same transformation as a batch job.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

TRANSFER_SCHEMA = "id string, `from` string, `to` string, amount long"


def make_transfers(
    n: int, accounts: int = 20, seed: int = 1, batch: str | None = None
) -> list[dict[str, Any]]:
    """n transfers between acct-00.. ; about one in 25 is invalid (zero amount or to itself).
    Ids are `t-<batch>-<i>`, batch random unless given, so seeding twice adds new transfers."""
    rng = random.Random(seed)
    batch = batch or uuid.uuid4().hex[:6]
    out = []
    for i in range(n):
        a, b = rng.randrange(accounts), rng.randrange(accounts)
        amount = rng.randrange(1, 100_000)
        if i % 25 == 7:
            amount = 0
        elif i % 25 == 19:
            b = a
        out.append(
            {
                "id": f"t-{batch}-{i:07d}",
                "from": f"acct-{a:02d}",
                "to": f"acct-{b:02d}",
                "amount": amount,
            }
        )
    return out


def is_valid(t: dict[str, Any]) -> bool:
    return bool(t.get("id")) and t.get("amount", 0) > 0 and t.get("from") != t.get("to")


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic in admin.list_topics(timeout=10).topics:
        return
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


def seed(bootstrap: str, topic: str, transfers: Iterable[dict[str, Any]], partitions: int) -> int:
    ensure_topic(bootstrap, topic, partitions)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    n = 0
    for t in transfers:
        while True:
            try:
                p.produce(topic, json.dumps(t).encode(), t["id"].encode())
                break
            except BufferError:
                p.poll(0.05)
        n += 1
    if p.flush(60) != 0:
        raise RuntimeError("not every transfer was acknowledged")
    return n


def balance_updates(transfers: Any) -> Any:
    """The transformation, on a DataFrame in Spark's Kafka schema (batch or streaming): rows
    with a `key` (the account) and a JSON `value`, ready for the kafkad sink. Deterministic."""
    from pyspark.sql import functions as F

    t = transfers.select(
        F.from_json(F.col("value").cast("string"), TRANSFER_SCHEMA).alias("t")
    ).select("t.*")
    valid = t.where("id IS NOT NULL AND amount > 0 AND `from` IS NOT NULL AND `from` != `to`")
    entry = F.explode(
        F.array(
            F.struct(
                F.col("from").alias("account"),
                (-F.col("amount")).alias("delta"),
                F.lit("debit").alias("entry"),
                F.col("id").alias("transfer_id"),
            ),
            F.struct(
                F.col("to").alias("account"),
                F.col("amount").alias("delta"),
                F.lit("credit").alias("entry"),
                F.col("id").alias("transfer_id"),
            ),
        )
    ).alias("e")
    return valid.select(entry).select(
        F.col("e.account").alias("key"), F.to_json(F.col("e")).alias("value")
    )


def reader(spark: Any, bootstrap: str, topic: str, streaming: bool, **options: str) -> Any:
    source = spark.readStream if streaming else spark.read
    source = source.format("kafkad").option("kafka.bootstrap.servers", bootstrap)
    source = source.option("subscribe", topic).option("startingOffsets", "earliest")
    for name, value in options.items():
        source = source.option(name, value)
    return source.load()


def run_stream(
    spark: Any,
    bootstrap: str,
    source: str,
    sink: str,
    checkpoint: str,
    available_now: bool,
    max_offsets_per_trigger: int | None = None,
) -> Any:
    options = {}
    if max_offsets_per_trigger:
        options["maxOffsetsPerTrigger"] = str(max_offsets_per_trigger)
    updates = balance_updates(reader(spark, bootstrap, source, True, **options))
    writer = (
        updates.writeStream.format("kafkad")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .queryName("ledger")
    )
    writer = (
        writer.trigger(availableNow=True)
        if available_now
        else writer.trigger(processingTime="1 second")
    )
    return writer.start()


def run_batch(spark: Any, bootstrap: str, source: str, sink: str) -> None:
    updates = balance_updates(reader(spark, bootstrap, source, False))
    updates.write.mode("append").format("kafkad").option(
        "kafka.bootstrap.servers", bootstrap
    ).option("topic", sink).save()


def read_topic(bootstrap: str, topic: str) -> list[bytes]:
    """Every committed value of a topic (read_committed, up to each partition's LSO)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"ledger-check-{uuid.uuid4()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        meta = c.list_topics(topic, timeout=10).topics[topic]
        ends = {}
        for p in meta.partitions:
            ends[p] = c.get_watermark_offsets(TopicPartition(topic, p), 10, cached=False)[1]
        c.assign([TopicPartition(topic, p, 0) for p, end in ends.items() if end > 0])
        out: list[bytes] = []
        pending = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + 120
        while pending and time.monotonic() < deadline:
            for m in c.consume(10_000, 0.2):
                offset, value = m.offset(), m.value()
                ok = m.error() is None and offset is not None and value is not None
                if ok and offset < ends[m.partition() or 0]:  # type: ignore[operator]
                    out.append(value)  # type: ignore[arg-type]
            for p in list(pending):
                (pos,) = c.position([TopicPartition(topic, p)])
                if pos.offset >= ends[p]:
                    pending.discard(p)
        if pending:
            raise TimeoutError(f"could not read {topic} up to {ends}")
        return out
    finally:
        c.close()


@dataclass
class Report:
    transfers: int = 0
    valid: int = 0
    updates: int = 0
    problems: list[str] = field(default_factory=list)
    balances: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


def check(transfers: list[dict[str, Any]], updates: list[dict[str, Any]]) -> Report:
    """Every valid transfer reflected exactly once: one debit of the payer, one credit of the
    payee, with its amount; nothing else."""
    report = Report(transfers=len(transfers), updates=len(updates))
    want: dict[tuple[str, str], tuple[str, int]] = {}
    for t in transfers:
        if is_valid(t):
            report.valid += 1
            want[(t["id"], "debit")] = (t["from"], -t["amount"])
            want[(t["id"], "credit")] = (t["to"], t["amount"])
    seen = Counter((u["transfer_id"], u["entry"]) for u in updates)
    for key, count in sorted(seen.items()):
        if key not in want:
            report.problems.append(f"unexpected update {key}")
        elif count != 1:
            report.problems.append(f"{key} appears {count} times")
    missing = sorted(set(want) - set(seen))
    if missing:
        report.problems.append(f"{len(missing)} updates missing, e.g. {missing[:5]}")
    balances: dict[str, int] = defaultdict(int)
    for u in updates:
        if want.get((u["transfer_id"], u["entry"])) != (u["account"], u["delta"]):
            report.problems.append(f"wrong update {u}")
        balances[u["account"]] += u["delta"]
    report.balances = dict(sorted(balances.items()))
    return report


def check_topics(bootstrap: str, source: str, sink: str) -> Report:
    transfers = [json.loads(v) for v in read_topic(bootstrap, source)]
    updates = [json.loads(v) for v in read_topic(bootstrap, sink)]
    return check(transfers, updates)


def _print(report: Report) -> None:
    print(
        f"transfers={report.transfers} valid={report.valid} updates={report.updates}"
        f" ok={report.ok} sum={sum(report.balances.values())}"
    )
    for account, balance in report.balances.items():
        print(f"  {account} {balance / 100:>12.2f}")
    for problem in report.problems[:20]:
        print(f"  PROBLEM {problem}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m pipeline.examples.ledger", description=__doc__.split("\n")[0]
    )
    ap.add_argument("command", choices=["seed", "run", "batch", "check", "demo"])
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--input", default="transfers")
    ap.add_argument("--output", default="balance-updates")
    ap.add_argument("--checkpoint", default="./data-ledger-checkpoint")
    ap.add_argument("--transfers", type=int, default=1000, help="seed/demo: how many")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--partitions", type=int, default=3, help="of the topics seed creates")
    ap.add_argument("--available-now", action="store_true", help="run: stop when caught up")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=None)
    args = ap.parse_args(argv)

    if args.command in ("seed", "demo"):
        n = seed(
            args.bootstrap,
            args.input,
            make_transfers(args.transfers, seed=args.seed),
            args.partitions,
        )
        ensure_topic(args.bootstrap, args.output, args.partitions)
        print(f"seeded {n} transfers into {args.input}", flush=True)
    if args.command in ("run", "batch", "demo"):
        from pipeline.session import local_spark

        ensure_topic(args.bootstrap, args.output, args.partitions)
        spark = local_spark("ledger")
        started = time.monotonic()
        if args.command == "batch":
            run_batch(spark, args.bootstrap, args.input, args.output)
        else:
            q = run_stream(
                spark,
                args.bootstrap,
                args.input,
                args.output,
                args.checkpoint,
                available_now=args.available_now or args.command == "demo",
                max_offsets_per_trigger=args.max_offsets_per_trigger,
            )
            q.awaitTermination()
            for progress in q.recentProgress:
                if progress["numInputRows"]:
                    ms = progress["durationMs"]
                    print(
                        f"batch {progress['batchId']}: {progress['numInputRows']} rows in"
                        f" {ms.get('triggerExecution', 0)} ms (addBatch {ms.get('addBatch', 0)})"
                    )
        print(f"{args.command} done in {time.monotonic() - started:.1f}s", flush=True)
    if args.command in ("check", "demo"):
        report = check_topics(args.bootstrap, args.input, args.output)
        _print(report)
        return 0 if report.ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
