"""``kafkad produce TOPIC``: one record per stdin line, idempotent (or transactional).

Each partition's records go out in batches of at most ``BATCH_BYTES`` (Kafka's producer
``batch.size`` default) of key, value and headers, so any amount of input stays under the
broker's ``message.max.bytes``; a single larger record goes alone, as in Kafka."""

from __future__ import annotations

import argparse
import random
import sys
from collections import defaultdict
from typing import Any

from kafkad.cli.options import UsageError, add_common, key_value
from kafkad.cli.output import emit
from kafkad.client.cluster import Client
from kafkad.client.producing import Message, Producer, murmur2_partition
from wire.compression import CODEC_NAMES

CODECS = {name: code for code, name in CODEC_NAMES.items()}
BATCH_BYTES = 16_384
_RECORD_OVERHEAD = 21  # a record's length, attributes, deltas and counts at most


def register(nouns: Any) -> None:
    p = nouns.add_parser("produce", help="write stdin lines as records")
    p.add_argument("topic")
    p.add_argument("--key-separator", metavar="SEP", help="split each line into KEY SEP VALUE")
    p.add_argument("--header", action="append", type=key_value, default=[], metavar="NAME=VALUE")
    p.add_argument(
        "--partition", type=int, help="default: by key hash (Kafka's), keyless to one partition"
    )
    p.add_argument("--compression", default="none", help=f"one of {', '.join(CODECS)}")
    p.add_argument("--transactional-id", metavar="ID", help="write inside one transaction")
    end = p.add_mutually_exclusive_group()
    end.add_argument(
        "--commit", dest="abort", action="store_false", help="commit at the end (default)"
    )
    end.add_argument("--abort", dest="abort", action="store_true", help="abort at the end")
    p.set_defaults(abort=False)
    p.add_argument("--transaction-timeout-ms", type=int, default=60_000)
    add_common(p)
    p.set_defaults(run=run)


def parse_lines(
    lines: list[str], separator: str | None, headers: list[tuple[str, str]]
) -> list[Message]:
    """Records from text lines (trailing newline dropped; a line without the separator is
    keyless, as in kafka-console-producer with parse.key=true it would be an error: we keep
    it, keyless, which is friendlier)."""
    hdrs: list[tuple[str, bytes | None]] = [(k, v.encode()) for k, v in headers]
    out = []
    for line in lines:
        line = line.removesuffix("\n").removesuffix("\r")
        key: bytes | None = None
        if separator is not None and separator in line:
            k, _, line = line.partition(separator)
            key = k.encode()
        out.append(Message(key, line.encode(), hdrs))
    return out


def _size(m: Message) -> int:
    heads = sum(len(k.encode()) + len(v or b"") + 10 for k, v in m.headers)
    return _RECORD_OVERHEAD + len(m.key or b"") + len(m.value or b"") + heads


def split_batches(messages: list[Message], budget: int = BATCH_BYTES) -> list[list[Message]]:
    """``messages`` in order, cut into runs whose estimated size stays within ``budget``
    (a record above it is a run of its own)."""
    out: list[list[Message]] = []
    size = 0
    for m in messages:
        n = _size(m)
        if not out or size + n > budget:
            out.append([])
            size = 0
        out[-1].append(m)
        size += n
    return out


def run(args: argparse.Namespace, client: Client) -> int:
    codec = CODECS.get(args.compression)
    if codec is None:
        raise UsageError(
            f"--compression {args.compression}: not a codec kafkad supports ({', '.join(CODECS)})"
        )
    if args.transactional_id is None and args.abort:
        raise UsageError("--abort needs --transactional-id")
    messages = parse_lines(sys.stdin.readlines(), args.key_separator, args.header)
    info = client.topic(args.topic)
    count = len(info.partitions)
    if args.partition is not None and args.partition not in info.partitions:
        raise UsageError(
            f"topic {args.topic!r} has no partition {args.partition} ({count} partitions)"
        )
    sticky = random.randrange(count) if count else 0
    by_partition: dict[int, list[Message]] = defaultdict(list)
    for m in messages:
        if args.partition is not None:
            part = args.partition
        elif m.key is not None:
            part = murmur2_partition(m.key, count)
        else:
            part = sticky
        by_partition[part].append(m)
    producer = Producer(client, args.transactional_id, args.transaction_timeout_ms, codec)
    written = []
    for part, msgs in sorted(by_partition.items()):
        bases = [producer.send(args.topic, part, chunk) for chunk in split_batches(msgs)]
        base = bases[0]
        written.append({"partition": part, "base_offset": base, "records": len(msgs)})
    outcome = "written"
    if args.transactional_id is not None:
        producer.end(commit=not args.abort)
        outcome = "aborted" if args.abort else "committed"
    data = {
        "topic": args.topic,
        "producer_id": producer.producer_id,
        "producer_epoch": producer.producer_epoch,
        "transaction": outcome,
        "partitions": written,
    }
    rows = [(args.topic, w["partition"], w["base_offset"], w["records"], outcome) for w in written]
    emit(
        args.json,
        data,
        ("TOPIC", "PARTITION", "BASE OFFSET", "RECORDS", "OUTCOME"),
        rows,
        out=sys.stderr if not args.json else None,
    )
    return 0
