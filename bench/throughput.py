"""Produce/consume throughput of a Kafka-compatible broker, as a ratio against a peer.

    python bench/throughput.py --start-kafkad --start-peer
    python bench/throughput.py --bootstrap HOST:PORT [--peer-bootstrap HOST:PORT]
                               [--records N] [--sizes 100,1024] [--acks 1,all]

For each record size, on each broker (kafkad first or the peer first, alternating from
one size and round to the next), three timed phases run against fresh topics:

* ``produce acks=1``   N records into topic A,
* ``produce acks=all`` N records into topic B,
* ``consume``          all N records of topic A, from offset 0, manual assignment.

With ``--idempotent`` a fourth phase, ``produce idempotent`` (acks=all and
``enable.idempotence=true``: InitProducerId, producer ids and sequences, the broker's
duplicate checks), runs after the plain ones into its own topic C, so idempotent and plain
produce are measured in the same run, on the same broker, with the same load.

With ``--transactions`` three more phases run after those, with a transactional producer
(``transactional.id`` per worker, acks=all): ``txn 5/txn`` and ``txn 1000/txn`` (records per
transaction, ``--txn-sizes``) each write ``--txn-records`` records as back-to-back
transactions (begin, produce, commit) into a fresh topic and report transactions per second
too; then ``consume read_committed`` reads the topic of the largest transactions the way the
``consume`` phase does, with ``isolation.level=read_committed`` (the LSO, the aborted-index
lookups and the markers on the fetch path), until every partition's position reaches its end.

With ``--latency`` a last phase, ``latency acks=all``, has one producer send one record at a
time (``linger.ms=0``, acks=all, the next record only once the last one was acknowledged) and
reports the round trip's p50/p99; the txn phases report their commit latency (begin to commit
acknowledged) p50/p99 and broker CPU per transaction. The txn phases' producers run at
``linger.ms=0``, so small transactions are limited by the broker, not the clients' timers; they
are ``--txn-clients`` producers (default 8, one partition each: the topic has that many
partitions, or ``--partitions`` if more), since with 4 each producer's round trip, not the
broker, limits the transactions per second (bench/README.md, the floor's review).

With ``--start-null trio,asyncio,selectors`` a null broker per loop (``bench/null_broker.py``:
canned answers built once, nothing decoded past the header, no storage) runs next to the others,
only the txn and latency phases, on its one topic: the floor of a Python server's cost per
transaction with each event loop. ``--txn-only`` skips the plain produce and consume phases on
every broker.

Over TLS: ``--bootstrap`` an SSL listener and ``--client-config FILE`` (librdkafka settings
for every client, e.g. the ``librdkafka.properties`` that ``kafkad certs DIR`` writes).

The load comes from ``--clients`` worker processes (confluent-kafka, librdkafka 2.x,
``produce_batch``), all started before the clock and released together by a barrier.
A phase's time is first start to last finish (producers: until ``flush`` returned,
i.e. every record was acknowledged; consumers: until every partition's position reached
the count produced). msgs/s and MB/s (MB = 10**6 bytes of record value) follow from that.
For brokers this script started, or found listening on this machine, the broker's CPU
time over the phase is read from /proc: "broker cores" says how busy the broker was and
"CPU µs/msg" what one record cost it; "client cores" is the same for the load generator.
Each block's topics are deleted after its consume phase (--keep-topics to keep them).
Results go to bench/results/ as JSON.

See bench/README.md for the peer (Tansu, a Rust Kafka-compatible broker) and how to
read the ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: python bench/throughput.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.brokers import (
    PEER_PACKAGE,
    REPO_DIR,
    RESULTS_DIR,
    Broker,
    external_broker,
    start_kafkad,
    start_null,
    start_peer,
)
from bench.null_broker import LOOPS as NULL_LOOPS
from bench.phases import LATENCY_PHASE, latency_phase, run_phase, txn_phases
from bench.profiling import ProfileRecorder, ensure_py_spy, print_profile
from bench.report import print_row, print_summary, summarize
from bench.workers import (
    CLIENT_EXTRA,
    CREATE_WARNINGS,
    create_topic,
    delete_topics,
    high_watermarks,
    split_partitions,
)

# --------------------------------------------------------------------------- driver


def records_for(args: argparse.Namespace, size: int) -> int:
    if args.records:
        return int(args.records)
    return min(1_000_000, max(100_000, 200_000_000 // size))


IDEMPOTENT = "idempotent"  # the pseudo acks value of the --idempotent phase


def profiled_phase(
    broker: Broker,
    kind: str,
    topic: str,
    plans: list[dict[int, int]],
    size: int,
    acks: str,
    args: argparse.Namespace,
    label: str,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """run_phase, under `py-spy record` of kafkad when --profile is on; ``overrides`` replace
    the --producer-set/--consumer-set settings (the txn phases pass their own)."""
    if overrides is None:
        overrides = args.producer_set if kind == "produce" else args.consumer_set
    if kind == "produce" and acks == IDEMPOTENT:
        acks = "all"
        overrides = {**overrides, "enable.idempotence": True}
    profiler = None
    if args.profile and broker.name == "kafkad" and broker.pid is not None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        slug = label.replace(" ", "-").replace("=", "").replace("/", "-per-")
        out = RESULTS_DIR / f"profile-{stamp}-kafkad-{size}B-{slug}.txt"
        profiler = ProfileRecorder(args.py_spy, broker.pid, out)
    try:
        res = run_phase(broker, kind, topic, plans, size, acks, args.phase_timeout, overrides)
    finally:
        if profiler is not None:
            prof = profiler.stop()
    if profiler is not None:
        res["profile"] = prof
    return res


def bench_broker_size(broker: Broker, size: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The phases for one broker and one record size; returns one row per phase."""
    plans = split_partitions(args.partitions, args.clients, records_for(args, size))
    rows: list[dict[str, Any]] = []
    topics: dict[str, str] = {}
    if broker.fixed_topic is not None or args.txn_only:
        return txn_and_latency(broker, size, args, topics, rows)
    for acks in args.acks + ([IDEMPOTENT] if args.idempotent else []):
        phase = "produce idempotent" if acks == IDEMPOTENT else f"produce acks={acks}"
        topic = create_topic(broker.bootstrap, args.partitions)
        topics[acks] = topic
        res = profiled_phase(broker, "produce", topic, plans, size, acks, args, phase)
        if "failed" not in res:
            hw = high_watermarks(broker.bootstrap, topic, args.partitions)
            res["high_watermarks"] = hw
            res["high_watermark_total"] = sum(hw)
        rows.append({"broker": broker.name, "size": size, "phase": phase, **res})
        print_row(rows[-1])
        print_profile(rows[-1])
        if not broker.alive():
            raise RuntimeError(f"{broker.name} died during {phase}; see {broker.log_path}")
    src_acks = args.acks[0]
    topic = topics[src_acks]
    res = profiled_phase(broker, "consume", topic, plans, size, src_acks, args, "consume")
    rows.append(
        {"broker": broker.name, "size": size, "phase": "consume", "topic_acks": src_acks, **res}
    )
    print_row(rows[-1])
    print_profile(rows[-1])
    if not broker.alive():
        raise RuntimeError(f"{broker.name} died during consume; see {broker.log_path}")
    return txn_and_latency(broker, size, args, topics, rows)


def txn_and_latency(
    broker: Broker,
    size: int,
    args: argparse.Namespace,
    topics: dict[str, str],
    rows: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The --transactions and --latency phases, then the block's topics deleted."""
    if args.transactions:
        rows.extend(txn_phases(broker, size, args, topics, profiled_phase))
    if args.latency:
        rows.append(latency_phase(broker, size, args))
        topics[LATENCY_PHASE] = rows[-1]["topic"]
    if broker.fixed_topic is not None:
        return rows
    if not args.keep_topics and topics:
        err = delete_topics(broker.bootstrap, list(topics.values()))
        if err is not None:
            print(f"  WARNING: could not delete the topics on {broker.name}: {err}", flush=True)
            rows[-1]["delete_topics_error"] = err
    return rows


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ncpu = os.cpu_count() or 2
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--bootstrap", help="kafkad's HOST:PORT (or use --start-kafkad)")
    p.add_argument(
        "--start-kafkad",
        action="store_true",
        help="launch kafkad from this repo on a free port, temp data dir",
    )
    p.add_argument(
        "--kafkad-data-dir",
        default=None,
        help="data dir for --start-kafkad (default: a fresh temp dir; "
        "'memory://' for kafkad's in-memory storage)",
    )
    p.add_argument(
        "--kafkad-set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="broker config passed to --start-kafkad as --set (repeatable)",
    )
    p.add_argument("--peer-bootstrap", help="the peer's HOST:PORT, already running")
    p.add_argument(
        "--start-peer",
        action="store_true",
        help=f"install ({PEER_PACKAGE} into bench/.peer) and launch Tansu",
    )
    p.add_argument(
        "--start-null",
        default="",
        metavar="LOOPS",
        help="also launch bench/null_broker.py (canned answers: the floor of a Python server) "
        "with each of these loops (trio,asyncio,selectors); only the txn and latency phases "
        "run on it",
    )
    p.add_argument(
        "--txn-only",
        action="store_true",
        help="skip the plain produce and consume phases (and the warm-up's consume): only the "
        "--transactions and --latency phases",
    )
    p.add_argument(
        "--records",
        type=int,
        default=None,
        help="records per phase and size (default: 1,000,000 records or 200 MB of values, "
        "whichever is fewer, and at least 100,000)",
    )
    p.add_argument("--sizes", default="100,1024", help="record value sizes in bytes")
    p.add_argument("--acks", default="1,all", help="produce phases to run (1, all)")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument(
        "--idempotent",
        action="store_true",
        help="also run a 'produce idempotent' phase (acks=all, enable.idempotence=true) "
        "next to the plain produce phases",
    )
    p.add_argument(
        "--transactions",
        action="store_true",
        help="also run the transactional phases: 'txn K/txn' per --txn-sizes entry "
        "(transactional producer, back-to-back transactions of K records) and "
        "'consume read_committed' over the topic of the largest transactions",
    )
    p.add_argument(
        "--txn-sizes", default="5,1000", help="records per transaction of the txn phases"
    )
    p.add_argument(
        "--txn-records",
        type=int,
        default=20_000,
        help="records per txn phase (default 20,000: 4,000 transactions of 5)",
    )
    p.add_argument(
        "--latency",
        action="store_true",
        help="also run 'latency acks=all': one producer, one record in flight "
        "(linger.ms=0), p50/p99 of produce to acknowledgement",
    )
    p.add_argument(
        "--latency-records", type=int, default=2_000, help="records of the latency phase"
    )
    p.add_argument(
        "--clients",
        type=int,
        default=max(1, min(4, ncpu // 2)),
        help="producer/consumer processes per phase (default: half the cores, 1..4)",
    )
    p.add_argument(
        "--txn-clients",
        type=int,
        default=8,
        help="producer processes of the txn phases and consumers of their read_committed "
        "phase, one partition each or more (default 8: with 4, the producers' round trips, not "
        "the broker, limit small transactions)",
    )
    p.add_argument("--rounds", type=int, default=3, help="repeat everything; medians are reported")
    p.add_argument("--phase-timeout", type=float, default=60.0, help="seconds per phase")
    p.add_argument("--out", type=Path, default=None, help="JSON path (default bench/results/)")
    p.add_argument(
        "--producer-set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="librdkafka producer setting, over the defaults (repeatable)",
    )
    p.add_argument(
        "--consumer-set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="librdkafka consumer setting, over the defaults (repeatable)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="py-spy record kafkad (needs --start-kafkad) during each measured phase; "
        "writes collapsed stacks to bench/results/ and prints the top functions. "
        "Profiling slows kafkad: do not compare those rates with the peer",
    )
    p.add_argument(
        "--keep-topics",
        action="store_true",
        help="do not delete each block's topics after its consume phase",
    )
    p.add_argument("--py-spy", default=None, help="py-spy binary (default: PATH, else install)")
    p.add_argument(
        "--client-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="librdkafka NAME=VALUE lines every client gets (e.g. TLS: the "
        "librdkafka.properties `kafkad certs` writes, with --bootstrap an SSL listener)",
    )
    args = p.parse_args(argv)
    if args.client_config is not None:
        for line in args.client_config.read_text().splitlines():
            name, sep, value = line.partition("=")
            if sep and not line.lstrip().startswith("#"):
                CLIENT_EXTRA[name.strip()] = value.strip()
    for key in ("producer_set", "consumer_set"):
        pairs = [kv.partition("=") for kv in getattr(args, key)]
        if any(not sep for _, sep, _ in pairs):
            p.error(f"--{key.replace('_', '-')} takes NAME=VALUE")
        setattr(args, key, {k.strip(): v.strip() for k, sep, v in pairs})
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    args.txn_sizes = [int(s) for s in args.txn_sizes.split(",") if s]
    if any(k <= 0 for k in args.txn_sizes) or args.txn_records <= 0:
        p.error("--txn-sizes and --txn-records take positive numbers")
    args.acks = [a.strip() for a in args.acks.split(",") if a.strip()]
    if not args.acks or any(a not in ("1", "all", "-1", "0") for a in args.acks):
        p.error("--acks takes a list of 1, all, -1, 0")
    if not (args.bootstrap or args.start_kafkad):
        p.error("give --bootstrap HOST:PORT or --start-kafkad")
    if args.bootstrap and args.start_kafkad:
        p.error("--bootstrap and --start-kafkad exclude each other")
    if args.peer_bootstrap and args.start_peer:
        p.error("--peer-bootstrap and --start-peer exclude each other")
    if args.profile and not args.start_kafkad:
        p.error("--profile needs --start-kafkad (it profiles the broker process it starts)")
    args.start_null = [x.strip() for x in args.start_null.split(",") if x.strip()]
    if any(x not in NULL_LOOPS for x in args.start_null):
        p.error(f"--start-null takes a list of {', '.join(NULL_LOOPS)}")
    if args.clients > args.partitions:
        p.error("--clients must not exceed --partitions")
    if args.txn_clients < 1:
        p.error("--txn-clients must be at least 1")
    args.txn_partitions = max(args.partitions, args.txn_clients)
    return args


def environment() -> dict[str, Any]:
    import confluent_kafka

    load: tuple[float, ...] | None = None
    with contextlib.suppress(OSError):
        load = os.getloadavg()
    return {
        "host": platform.node(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_at_start": load,  # 1, 5, 15 minutes
        "confluent_kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
        "kafkad_git": subprocess.run(
            ["git", "-C", str(REPO_DIR), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
        ).stdout.strip(),
    }


def measured_rounds(
    brokers: list[Any],
    args: argparse.Namespace,
    around: Callable[[Any], contextlib.AbstractContextManager[Any]] | None = None,
) -> Iterator[dict[str, Any]]:
    """Every round and size on every broker, the order alternating from one (size, round) to
    the next; ``around(broker)`` wraps each broker's block (bench/observability.py scrapes)."""
    turn = 0
    for _ in range(args.rounds):
        for size in args.sizes:
            order = brokers if turn % 2 == 0 else list(reversed(brokers))
            turn += 1
            for b in order:
                with around(b) if around is not None else contextlib.nullcontext():
                    yield from bench_broker_size(b, size, args)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    log_dir = Path(tempfile.mkdtemp(prefix="bench-logs-"))
    brokers: list[Broker] = []
    started_at = time.time()
    env = environment()
    rows: list[dict[str, Any]] = []
    failure: str | None = None
    try:
        if args.profile:
            args.py_spy = args.py_spy or ensure_py_spy()
        if args.start_kafkad:
            brokers.append(
                start_kafkad(
                    args.kafkad_data_dir,
                    log_dir,
                    [x for kv in args.kafkad_set for x in ("--set", kv)],
                )
            )
        else:
            brokers.append(external_broker("kafkad", args.bootstrap))
        if args.start_peer:
            brokers.append(start_peer(log_dir))
        elif args.peer_bootstrap:
            brokers.append(external_broker("peer", args.peer_bootstrap))
        for loop in args.start_null:
            brokers.append(start_null(log_dir, loop, args.txn_partitions))
        for b in brokers:
            print(f"{b.name}: {b.bootstrap} ({b.kind}{f', pid {b.pid}' if b.pid else ''})")
        print(
            f"records={[records_for(args, z) for z in args.sizes]} sizes={args.sizes} "
            f"partitions={args.partitions} "
            f"clients={args.clients} txn-clients={args.txn_clients} rounds={args.rounds} "
            f"acks={args.acks}\n",
            flush=True,
        )
        # warm-up: connections, topic creation paths, first segment files
        for b in brokers:
            if b.fixed_topic is not None:  # nothing to warm up, and no Fetch to warm it with
                continue
            warm = argparse.Namespace(
                **{
                    **vars(args),
                    "records": min(records_for(args, args.sizes[0]), 50_000),
                    "acks": args.acks[:1],
                    "idempotent": False,
                    "transactions": False,
                    "latency": False,
                    "txn_only": False,
                }
            )
            warm.profile = False
            print(f"warm-up {b.name}:", flush=True)
            bench_broker_size(b, args.sizes[0], warm)
        print("\nmeasured:", flush=True)
        rows.extend(measured_rounds(brokers, args))
    except KeyboardInterrupt:
        failure = "interrupted"
    except Exception as exc:
        failure = f"{type(exc).__name__}: {exc}"
        print(f"\nFAILED: {failure}", file=sys.stderr)
    finally:
        for b in brokers:
            b.stop()
    log_errors = {b.name: b.log_errors() for b in brokers if b.log_path is not None}
    keep_logs = failure is not None
    for name, errs in log_errors.items():
        if errs and errs["count"]:
            keep_logs = True
            print(f"\n{name} logged {errs['count']} error line(s); first distinct:")
            for e in errs["first"]:
                print(f"  {e[:300]}")
    summary = summarize(rows, brokers)
    if rows:
        print_summary(summary, brokers)
    report = {
        "started_at": started_at,
        "duration_s": time.time() - started_at,
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "environment": env,
        "brokers": [
            {
                "name": b.name,
                "bootstrap": b.bootstrap,
                "kind": b.kind,
                "pid": b.pid,
                **b.detail,
                "log": str(b.log_path) if b.log_path else None,
                "log_errors": log_errors.get(b.name),
            }
            for b in brokers
        ],
        "runs": rows,
        "summary": summary,
        "failure": failure,
        "create_topic_warnings": sorted(set(CREATE_WARNINGS)),
    }
    out = args.out or RESULTS_DIR / time.strftime("throughput-%Y%m%d-%H%M%S.json")
    out.write_text(json.dumps(report, indent=2, default=str))
    print(f"\nresults: {out}  ({report['duration_s']:.0f} s)")
    if keep_logs:
        print(f"broker logs kept in {log_dir}", file=sys.stderr)
    else:
        shutil.rmtree(log_dir, ignore_errors=True)
    return 1 if failure else 0


if __name__ == "__main__":
    sys.exit(main())
