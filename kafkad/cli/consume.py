"""``kafkad consume TOPIC``: print records (and with --show-batches, batch headers and
transaction markers) from a start point up to the end the broker reports, then exit."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kafkad.cli.options import UsageError, add_common, non_negative_int
from kafkad.client.cluster import Client
from kafkad.client.fetching import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    Batch,
    list_offset,
    read_batches,
)

ISOLATION = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}


def register(nouns: Any) -> None:
    p = nouns.add_parser("consume", help="print a topic's records (no group; exits at the end)")
    p.add_argument("topic")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true")
    start.add_argument("--offset", type=non_negative_int, metavar="N")
    start.add_argument(
        "--timestamp", type=int, metavar="MS", help="from the first record at or after"
    )
    p.add_argument(
        "--partition", type=int, action="append", help="only this partition (repeatable)"
    )
    p.add_argument("--max-messages", type=int, metavar="N")
    p.add_argument("--isolation", choices=tuple(ISOLATION), default="read_uncommitted")
    p.add_argument(
        "--show-batches", action="store_true", help="print each batch's header and markers"
    )
    p.add_argument("--print-key", action="store_true", help="print KEY<sep>VALUE")
    p.add_argument("--key-separator", default="\t", metavar="SEP")
    add_common(p)
    p.set_defaults(run=run)


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "backslashreplace")


def batch_summary(b: Batch) -> dict[str, Any]:
    h = b.header
    return {
        "base_offset": h.base_offset,
        "last_offset": h.last_offset,
        "producer_id": h.producer_id,
        "producer_epoch": h.producer_epoch,
        "base_sequence": h.base_sequence,
        "records": h.records_count,
        "transactional": h.is_transactional,
        "control": h.is_control,
        "marker": b.marker,
        "aborted": b.aborted,
    }


def batch_line(s: dict[str, Any]) -> str:
    flags = [f for f in ("transactional", "control") if s[f]]
    line = (
        f"# batch offsets {s['base_offset']}-{s['last_offset']} producer {s['producer_id']} "
        f"epoch {s['producer_epoch']} sequence {s['base_sequence']} records {s['records']}"
    )
    if flags:
        line += " " + " ".join(flags)
    if s["marker"]:
        line += f" marker {s['marker']}"
    if s["aborted"]:
        line += " (aborted: skipped at read_committed)"
    return line


def run(args: argparse.Namespace, client: Client) -> int:
    isolation = ISOLATION[args.isolation]
    info = client.topic(args.topic)
    parts = args.partition or sorted(info.partitions)
    for p in parts:
        if p not in info.partitions:
            raise UsageError(
                f"topic {args.topic!r} has no partition {p} ({len(info.partitions)} partitions)"
            )
    if args.offset is not None and not args.partition:
        # As kafka-console-consumer: an offset is a position in the partition(s) named.
        raise UsageError("--offset needs --partition")
    if args.max_messages is not None and args.max_messages < 0:
        raise UsageError("--max-messages must be >= 0")
    left = args.max_messages
    out = sys.stdout
    for part in parts:
        if left == 0:
            break
        start = _start(args, client, part, isolation)
        if start < 0:
            continue  # no record at or after --timestamp
        for batch in read_batches(client, args.topic, part, start, isolation):
            if args.show_batches:
                s = batch_summary(batch)
                out.write(
                    json.dumps({"partition": part, "batch": s}) if args.json else batch_line(s)
                )
                out.write("\n")
            if batch.header.is_control or batch.aborted:
                continue
            h = batch.header
            for r in batch.records:
                offset = h.base_offset + r.offset_delta
                if offset < start:
                    continue
                if left == 0:
                    break
                _print_record(args, part, offset, h.base_timestamp + r.timestamp_delta, r)
                if left is not None:
                    left -= 1
    out.flush()
    return 0


def _start(args: argparse.Namespace, client: Client, part: int, isolation: int) -> int:
    if args.offset is not None:
        return int(args.offset)
    if args.timestamp is not None:
        return list_offset(client, args.topic, part, args.timestamp, isolation)
    return list_offset(
        client, args.topic, part, EARLIEST if args.from_beginning else LATEST, isolation
    )


def _print_record(args: argparse.Namespace, part: int, offset: int, ts: int, r: Any) -> None:
    if args.json:
        doc = {
            "topic": args.topic,
            "partition": part,
            "offset": offset,
            "timestamp": ts,
            "key": _text(r.key),
            "value": _text(r.value),
            "headers": [[k, _text(v)] for k, v in r.headers],
        }
        sys.stdout.write(json.dumps(doc) + "\n")
        return
    value = _text(r.value) or ""
    if args.print_key:
        value = f"{_text(r.key) or ''}{args.key_separator}{value}"
    sys.stdout.write(value + "\n")
