"""``kafkad verify TOPIC``: what the log itself shows about exactly-once (rules in
kafkad/eos_rules.py). Reads every partition's raw batches (read_uncommitted) and its records
at read_committed, then applies the rules; exit 1 on any finding."""

from __future__ import annotations

import argparse
import time
from typing import Any

from kafkad.cli.options import add_common
from kafkad.cli.output import emit
from kafkad.cli.topics import topic_configs
from kafkad.client.cluster import Client
from kafkad.client.fetching import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    list_offset,
    read_batches,
)
from kafkad.eos_rules import BatchView, Finding, check_partition, read_order


def register(nouns: Any) -> None:
    p = nouns.add_parser("verify", help="check a topic's log for exactly-once anomalies")
    p.add_argument("topic")
    p.add_argument("--partition", type=int, action="append")
    p.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, client: Client) -> int:
    info = client.topic(args.topic)
    parts = args.partition or sorted(info.partitions)
    policy = topic_configs(client, args.topic, ["cleanup.policy"])
    compacted = any("compact" in str(c["value"] or "") for c in policy)
    findings: list[Finding] = []
    summary = []
    now = int(time.time() * 1000)
    for part in parts:
        tp = f"{args.topic}-{part}"
        start = list_offset(client, args.topic, part, EARLIEST)
        hw = list_offset(client, args.topic, part, LATEST, READ_UNCOMMITTED)
        lso = list_offset(client, args.topic, part, LATEST, READ_COMMITTED)
        views = []
        for b in read_batches(client, args.topic, part, start, READ_UNCOMMITTED, end=hw):
            h = b.header
            views.append(
                BatchView(
                    h.base_offset,
                    h.last_offset,
                    h.producer_id,
                    h.producer_epoch,
                    h.base_sequence,
                    h.records_count,
                    h.is_transactional,
                    h.is_control,
                    b.marker,
                    h.max_timestamp,
                )
            )
        committed = []
        for b in read_batches(client, args.topic, part, start, READ_COMMITTED, end=lso):
            if b.header.is_control or b.aborted:
                continue
            committed += [b.header.base_offset + r.offset_delta for r in b.records]
        findings += check_partition(
            tp, views, committed, hw, lso, now, args.max_transaction_timeout * 60_000, compacted
        )
        findings += [
            Finding("order", tp, f"offset {b} after {a}") for a, b in read_order(committed)
        ]
        summary.append(
            {
                "partition": part,
                "log_start": start,
                "high_watermark": hw,
                "last_stable_offset": lso,
                "batches": len(views),
                "committed_records": len(committed),
            }
        )
    data = {
        "topic": args.topic,
        "clean": not findings,
        "partitions": summary,
        "findings": [
            {"kind": f.kind, "partition": f.partition, "detail": f.detail} for f in findings
        ],
    }
    if args.json:
        emit(True, data)
    else:
        emit(
            False,
            None,
            ("PARTITION", "LOG START", "HW", "LSO", "BATCHES", "COMMITTED RECORDS"),
            [list(s.values()) for s in summary],
        )
        if findings:
            emit(
                False,
                None,
                ("FINDING", "PARTITION", "DETAIL"),
                [(f.kind, f.partition, f.detail) for f in findings],
            )
        else:
            print(f"{args.topic}: clean")
    return 1 if findings else 0
