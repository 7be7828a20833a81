"""What ``kafkad proxy`` adds: latency and throughput through the proxy against talking to
the upstream directly, in the same run.

    .venv/bin/python -m bench.proxy_latency                      # starts both (memory://)
    .venv/bin/python -m bench.proxy_latency --bootstrap H:P --proxy H:P   # running ones

One kafkad upstream (``serve --data-dir memory://``) and one ``kafkad proxy`` in front of it.
Blocks alternate direct / proxy (A B B A ...), ``--rounds`` of each:

* latency: one request in flight on one connection, ``--requests`` per block: a Produce
  (acks=1, one batch of 10 x 100 B) and a Metadata (one topic); p50/p99 per target, and the
  proxy's added latency = proxy - direct of each percentile (medians over blocks).
* produce throughput: ``--window`` Produce requests in flight on one connection, requests/s.
* CPU: for an upstream and a proxy on this machine (found by their listening ports), the
  CPU seconds each spent per pipelined Produce, from /proc: the proxy's own cost per request,
  which the machine's load moves far less than the latencies.
* fetch throughput: Fetch requests of up to 1 MiB each from offset 0 of a partition holding
  ``--fill-mb`` MB, one in flight, MB/s of response bytes.

The client is plain blocking sockets with pre-encoded frames (``bench/pipelining.py``), with
TCP_NODELAY as Kafka's clients set it. On this 2-core machine client, proxy and upstream share
the CPU, so the throughput cost here includes the proxy's CPU taken from the other two; the
figures move with the load: read them as ratios within one run (bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from bench.brokers import CLK_TCK, pid_listening_on
from bench.pipelining import (
    MS,
    TOPIC,
    Conn,
    ensure_topic,
    frame,
    metadata_frame,
    produce_frame,
    started_kafkad,
)

Address = tuple[str, int]


@contextmanager
def started_proxy(upstream: Address) -> Iterator[Address]:
    with tempfile.TemporaryFile() as log:
        args = ["proxy", "--upstream", f"{upstream[0]}:{upstream[1]}", "--listen", "127.0.0.1:0"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", *args, "--log-level", "WARNING"],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line.startswith("kafkad proxy ready"):
                log.seek(0)
                raise RuntimeError(f"kafkad proxy did not start: {line!r} {log.read()!r}")
            host, port = line.split("listen=")[1].split()[0].rsplit(":", 1)
            yield host, int(port)
        finally:
            proc.terminate()
            proc.wait(10)


def one_at_a_time(target: Address, request: bytes, count: int) -> list[float]:
    """Round trips in ms of ``count`` requests sent one after another on one connection."""
    c = Conn(*target)
    c.sock.sendall(request)
    c.read_frames(1)  # warm: the proxy's first request on a connection opens its upstream
    out = []
    for _ in range(count):
        t0 = time.perf_counter()
        c.sock.sendall(request)
        c.read_frames(1)
        out.append((time.perf_counter() - t0) * 1000)
    c.close()
    return out


def cpu_seconds(pid: int | None) -> float:
    """user+system CPU seconds of ``pid`` (0 when unknown)."""
    if pid is None:
        return 0.0
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def pipelined(target: Address, request: bytes, window: int, seconds: float) -> tuple[float, int]:
    """Requests/s with ``window`` in flight, and how many were answered."""
    burst = request * window
    c = Conn(*target)
    c.sock.sendall(burst)
    c.read_frames(window)
    done = 0
    t0 = time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < seconds:
        c.sock.sendall(burst)
        c.read_frames(window)
        done += window
    c.close()
    return done / elapsed, done


def fetch_frame() -> bytes:
    from kio.schema.fetch.v12 import request as fr

    return frame(
        fr.FetchRequest(
            max_wait=0 * MS,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=(
                fr.FetchTopic(
                    topic=TOPIC,
                    partitions=(
                        fr.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),
                    ),
                ),
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
    )


def fetch_rate(target: Address, seconds: float) -> float:
    """MB/s of Fetch responses (1 MiB each at most), one in flight."""
    request = fetch_frame()
    c = Conn(*target)
    c.sock.sendall(request)
    c.read_frames(1)
    got = 0
    t0 = time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < seconds:
        c.sock.sendall(request)
        got += len(c.read_frames(1)[0])
    c.close()
    return got / elapsed / 1e6


def fill(target: Address, megabytes: float) -> None:
    request = produce_frame()
    per = len(request)
    c = Conn(*target)
    for _ in range(max(1, int(megabytes * 1e6 / per / 64))):
        c.sock.sendall(request * 64)
        c.read_frames(64)
    c.close()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def block(
    target: Address, pids: dict[str, int | None], args: argparse.Namespace
) -> dict[str, float]:
    """One block of every phase against ``target``; with the CPU the upstream and the proxy
    (``pids``, where known) spent per pipelined Produce."""
    out: dict[str, float] = {}
    for name, request in (("produce", produce_frame()), ("metadata", metadata_frame())):
        times = one_at_a_time(target, request, args.requests)
        out[f"{name}_p50_ms"] = percentile(times, 50)
        out[f"{name}_p99_ms"] = percentile(times, 99)
    before = {who: cpu_seconds(pid) for who, pid in pids.items()}
    rate, done = pipelined(target, produce_frame(), args.window, args.seconds)
    out["produce_pipelined_req_per_s"] = rate
    for who, pid in pids.items():
        if pid is not None:
            spent = cpu_seconds(pid) - before[who]
            out[f"{who}_cpu_us_per_produce"] = spent / done * 1e6
    out["fetch_mb_per_s"] = fetch_rate(target, args.seconds)
    return out


def run(direct: Address, proxied: Address, args: argparse.Namespace) -> dict[str, Any]:
    up_pid, proxy_pid = pid_listening_on(direct[1]), pid_listening_on(proxied[1])
    ensure_topic(*direct)
    fill(direct, args.fill_mb)
    blocks: dict[str, list[dict[str, float]]] = {"direct": [], "proxy": []}
    order = ["direct", "proxy"]
    for r in range(args.rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            if name == "direct":
                result = block(direct, {"upstream": up_pid}, args)
            else:
                result = block(proxied, {"upstream": up_pid, "proxy": proxy_pid}, args)
            blocks[name].append(result)
            print(name, json.dumps({k: round(v, 3) for k, v in result.items()}), flush=True)
    medians = {
        name: {k: statistics.median(b.get(k, 0.0) for b in runs) for k in runs[0]}
        for name, runs in blocks.items()
    }
    d, p = medians["direct"], medians["proxy"]
    added = {k.replace("_ms", "_added_ms"): p[k] - d[k] for k in d if k.endswith("_ms")}
    ratios = {
        "produce_pipelined_ratio": p["produce_pipelined_req_per_s"]
        / d["produce_pipelined_req_per_s"],
        "fetch_ratio": p["fetch_mb_per_s"] / d["fetch_mb_per_s"],
    }
    return {"direct": d, "proxy": p, "added": added, "ratios": ratios, "blocks": blocks}


def report(result: dict[str, Any]) -> str:
    d, p = result["direct"], result["proxy"]
    lines = [f"{'':34}{'direct':>12}{'proxy':>12}{'added/ratio':>14}"]
    for k in p:
        if k not in d:
            lines.append(f"{k:34}{'':12}{p[k]:12.3f}")
            continue
        extra = f"{p[k] - d[k]:+14.3f}" if k.endswith("_ms") else f"{p[k] / d[k]:14.2f}"
        lines.append(f"{k:34}{d[k]:12.3f}{p[k]:12.3f}{extra}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", help="HOST:PORT of a running upstream")
    ap.add_argument("--proxy", help="HOST:PORT of a kafkad proxy in front of it")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--fill-mb", type=float, default=8.0)
    ap.add_argument("--json", action="store_true", help="print every block as JSON too")
    args = ap.parse_args()
    with ExitStack() as stack:
        if args.bootstrap:
            h, port = args.bootstrap.rsplit(":", 1)
            direct: Address = (h, int(port))
        else:
            direct = stack.enter_context(started_kafkad())
        if args.proxy:
            h, port = args.proxy.rsplit(":", 1)
            proxied: Address = (h, int(port))
        else:
            proxied = stack.enter_context(started_proxy(direct))
        result = run(direct, proxied, args)
    print(report(result))
    if args.json:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
