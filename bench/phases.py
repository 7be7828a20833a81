"""The timed phases of bench/throughput.py: one run of worker processes against one broker
(``run_phase``), the transactional phases (``txn_phases``) and the single-record latency
phase (``latency_phase``)."""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
import uuid
from collections.abc import Callable
from typing import Any

from bench.brokers import Broker
from bench.profiling import print_profile
from bench.report import print_row
from bench.workers import (
    CLIENT_EXTRA,
    consume_worker,
    create_topic,
    high_watermarks,
    latency_worker,
    percentile,
    produce_worker,
    split_partitions,
    txn_produce_worker,
)


def run_phase(
    broker: Broker,
    kind: str,
    topic: str,
    plans: list[dict[int, int]],
    size: int,
    acks: str,
    timeout: float,
    overrides: dict[str, str] | None = None,
) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(plans) + 1)
    out = ctx.Queue()
    if kind in ("produce", "txn", "latency"):
        cfg: dict[str, Any] = {
            "bootstrap.servers": broker.bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "compression.type": "none",
            "enable.idempotence": False,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "delivery.report.only.error": True,
            "message.timeout.ms": int(timeout * 1000) + 30_000,
        }
        target = produce_worker
        if kind == "latency":  # one record in flight, sent at once
            target = latency_worker
            cfg.update({"acks": "all", "linger.ms": 0})
            del cfg["delivery.report.only.error"]
        if kind == "txn":
            target = txn_produce_worker
            # message.timeout.ms must not exceed transaction.timeout.ms
            txn_timeout = cfg["message.timeout.ms"]
            cfg.update(
                {
                    "enable.idempotence": True,
                    "acks": "all",
                    # sent at once: small transactions are then limited by the broker,
                    # not by the clients' linger timers
                    "linger.ms": 0,
                    "transaction.timeout.ms": txn_timeout,
                }
            )
            del cfg["delivery.report.only.error"]
    else:
        cfg = {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 1_048_576,
            "queued.min.messages": 1_000_000,
        }
        target = consume_worker
    cfg.update(CLIENT_EXTRA)
    cfg.update(overrides or {})
    procs = [
        ctx.Process(target=target, args=(cfg, topic, plan, size, timeout, barrier, out))
        for plan in plans
    ]
    for p in procs:
        p.start()
    try:
        barrier.wait(timeout=60)
    except Exception as exc:  # BrokenBarrierError or timeout: a worker died while connecting
        for p in procs:
            p.kill()
        raise RuntimeError(f"{kind} workers failed to connect to {broker.bootstrap}") from exc
    cpu0 = broker.cpu_seconds()
    reports = []
    hard_deadline = time.monotonic() + timeout + 60
    for _ in procs:
        remaining = max(1.0, hard_deadline - time.monotonic())
        try:
            reports.append(out.get(timeout=remaining))
        except Exception:
            break
    cpu1 = broker.cpu_seconds()
    for p in procs:
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
    if len(reports) < len(procs):
        return {"failed": f"{len(procs) - len(reports)} {kind} worker(s) reported nothing"}
    t0 = min(r["t0"] for r in reports)
    t1 = max(r["t1"] for r in reports)
    elapsed = t1 - t0
    records = sum(r["records"] for r in reports)
    wanted = sum(sum(plan.values()) for plan in plans)
    res: dict[str, Any] = {
        "elapsed_s": elapsed,
        "records": records,
        "records_wanted": wanted,
        "complete": records == wanted and not any(r["timed_out"] for r in reports),
        "msgs_per_s": records / elapsed if elapsed > 0 else 0.0,
        "mb_per_s": records * size / 1e6 / elapsed if elapsed > 0 else 0.0,
        "client_cores": sum(r["cpu"] for r in reports) / elapsed if elapsed > 0 else None,
        "broker_cores": (cpu1 - cpu0) / elapsed
        if cpu0 is not None and cpu1 is not None and elapsed > 0
        else None,
        "broker_us_per_msg": (cpu1 - cpu0) * 1e6 / records
        if cpu0 is not None and cpu1 is not None and records
        else None,
        "errors": sum(r["errors"] for r in reports),
        "error_samples": [e for r in reports for e in r["error_samples"]][:10],
    }
    if kind == "consume":
        res["bad_size_batches"] = sum(r["bad_size_batches"] for r in reports)
    if kind == "txn":
        txns = sum(r["transactions"] for r in reports)
        res["transactions"] = txns
        res["txns_per_s"] = txns / elapsed if elapsed > 0 else 0.0
        res["per_partition"] = {p: n for r in reports for p, n in r["per_partition"].items()}
        res["broker_us_per_txn"] = (
            (cpu1 - cpu0) * 1e6 / txns if cpu0 is not None and cpu1 is not None and txns else None
        )
    if kind in ("txn", "latency"):  # commit latency / one record's round trip
        lat = sorted(x for r in reports for x in r["latencies"])
        for pct in (50, 99):
            v = percentile(lat, pct)
            res[f"p{pct}_ms"] = v * 1000 if v is not None else None
    return res


def txn_phases(
    broker: Broker,
    size: int,
    args: argparse.Namespace,
    topics: dict[str, str],
    profiled: Callable[..., dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The --transactions phases: one transactional produce phase per --txn-sizes entry,
    then a read_committed consume of the topic the largest transactions wrote. ``profiled``
    (throughput.profiled_phase) runs the txn produce phases under --profile."""
    rows: list[dict[str, Any]] = []
    partitions = args.txn_partitions  # --txn-clients producers, one partition or more each
    plans = split_partitions(partitions, args.txn_clients, args.txn_records)
    last: tuple[str, dict[int, int]] | None = None
    for per_txn in sorted(args.txn_sizes):
        phase = f"txn {per_txn}/txn"
        topic = topics[phase] = broker.fixed_topic or create_topic(broker.bootstrap, partitions)
        overrides = {**args.producer_set, "bench.records.per.txn": per_txn}
        if profiled is not None:
            res = profiled(broker, "txn", topic, plans, size, "all", args, phase, overrides)
        else:
            res = run_phase(broker, "txn", topic, plans, size, "all", args.phase_timeout, overrides)
        rows.append({"broker": broker.name, "size": size, "phase": phase, **res})
        print_row(rows[-1])
        print_profile(rows[-1])
        if "failed" not in res:
            last = (topic, res["per_partition"])
        if not broker.alive():
            raise RuntimeError(f"{broker.name} died during {phase}; see {broker.log_path}")
    if last is None or broker.fixed_topic is not None:  # a null broker serves no Fetch
        return rows
    topic, per_partition = last
    ends = high_watermarks(broker.bootstrap, topic, partitions)
    consume_plans = [
        {p: per_partition.get(p, 0) for p in plan} for plan in plans
    ]  # same partition -> client deal as the writers
    overrides = {
        **args.consumer_set,
        "isolation.level": "read_committed",
        "bench.end.offsets": dict(enumerate(ends)),
    }
    res = run_phase(
        broker, "consume", topic, consume_plans, size, "all", args.phase_timeout, overrides
    )
    rows.append({"broker": broker.name, "size": size, "phase": "consume read_committed", **res})
    print_row(rows[-1])
    if not broker.alive():
        raise RuntimeError(f"{broker.name} died during consume read_committed")
    return rows


LATENCY_PHASE = "latency acks=all"


def latency_phase(broker: Broker, size: int, args: argparse.Namespace) -> dict[str, Any]:
    """``--latency``: one producer, one partition, one record in flight at a time
    (``linger.ms=0``, acks=all): p50/p99 of the produce-to-acknowledgement round trip."""
    topic = broker.fixed_topic or create_topic(broker.bootstrap, 1)
    plans = [{0: args.latency_records}]
    res = run_phase(
        broker, "latency", topic, plans, size, "all", args.phase_timeout, args.producer_set
    )
    row = {"broker": broker.name, "size": size, "phase": LATENCY_PHASE, "topic": topic, **res}
    print_row(row)
    return row
