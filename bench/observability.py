"""What watching the broker costs: produce/consume throughput with the web console's HTTP
listener on and ``/metrics`` scraped every second, against a broker with both off.

    .venv/bin/python -m bench.observability                    # 3 rounds, 100 B and 1 KiB
    .venv/bin/python -m bench.observability --rounds 5 --sizes 100

Two kafkad brokers are started from this checkout: ``observed`` with
``kafkad.http.listeners=http://127.0.0.1:PORT`` and ``plain`` without it. Each round runs the
phases of ``bench/throughput.py`` (produce acks=1 and acks=all, consume; ``--transactions``
adds the transactional phases) on both, alternating which goes first. While a phase runs on
``observed``, a scraper thread GETs ``/metrics`` (and each ``--also-get`` path, e.g. a
console page) every ``--scrape-interval`` seconds, and checks each answer is 200. The
summary's "msg/s ratio" is observed / plain: the issue's target is >= 0.97 (within 3 %).
Any other ``bench/throughput.py`` option passes through (``--records``, ``--partitions``,
``--clients``, ``--acks``, ...). KIP-714 client telemetry is left at its default (on) on
both brokers; the load clients push their metrics every 5 minutes, i.e. not within a run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import throughput
from bench.brokers import RESULTS_DIR, Broker, free_port, start_kafkad
from bench.report import print_summary, summarize


class Scraper:
    """GETs the URLs every ``interval`` seconds in a thread while ``running``."""

    def __init__(self, urls: list[str], interval: float) -> None:
        self.urls = urls
        self.interval = interval
        self.latencies_ms: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            for url in self.urls:
                t0 = time.perf_counter()
                try:
                    with urllib.request.urlopen(url, timeout=5) as r:
                        r.read()
                        if r.status != 200:
                            self.failures.append(f"{url}: HTTP {r.status}")
                except OSError as exc:
                    self.failures.append(f"{url}: {exc}")
                self.latencies_ms.append((time.perf_counter() - t0) * 1000)
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        self._stop.clear()
        thread = threading.Thread(target=self._loop, daemon=True)
        thread.start()
        try:
            yield
        finally:
            self._stop.set()
            thread.join(10)


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, argparse.Namespace]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--http-port", type=int, default=0, help="console port (default: a free one)")
    p.add_argument("--scrape-interval", type=float, default=1.0)
    p.add_argument("--also-get", action="append", default=[], help="another path to GET")
    p.add_argument("--kafkad-data-dir", default=None)
    own, rest = p.parse_known_args(argv)
    args = throughput.parse_args(["--bootstrap", "unused", *rest])
    return own, args


def main(argv: list[str] | None = None) -> int:
    own, args = parse_args(argv)
    log_dir = Path(tempfile.mkdtemp(prefix="bench-observability-"))
    port = own.http_port or free_port()
    base = f"http://127.0.0.1:{port}"
    scraper = Scraper([base + "/metrics", *(base + p for p in own.also_get)], own.scrape_interval)
    brokers: list[Broker] = []
    rows: list[dict[str, Any]] = []
    failure = None
    started_at = time.time()
    try:
        observed = start_kafkad(
            own.kafkad_data_dir, log_dir, ["--set", f"kafkad.http.listeners={base}"]
        )
        observed.name = "observed"
        plain = start_kafkad(own.kafkad_data_dir, log_dir, [])
        plain.name = "plain"
        brokers = [observed, plain]
        print(f"observed: {observed.bootstrap}, console {base}; plain: {plain.bootstrap}")
        with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
            if r.status != 200:
                raise RuntimeError(f"GET /metrics answered {r.status}")
        for b in brokers:
            warm = argparse.Namespace(**{**vars(args), "records": 50_000, "acks": args.acks[:1]})
            warm.idempotent = warm.transactions = warm.profile = False
            throughput.bench_broker_size(b, args.sizes[0], warm)
        rows.extend(
            throughput.measured_rounds(
                brokers,
                args,
                lambda b: scraper.running() if b is observed else contextlib.nullcontext(),
            )
        )
    except KeyboardInterrupt:
        failure = "interrupted"
    except Exception as exc:
        failure = f"{type(exc).__name__}: {exc}"
        print(f"\nFAILED: {failure}", file=sys.stderr)
    finally:
        for b in brokers:
            b.stop()
    summary = summarize(rows, brokers)
    if rows:
        print_summary(summary, brokers)
    lat = scraper.latencies_ms
    scrapes = {
        "count": len(lat),
        "failures": len(scraper.failures),
        "first_failures": scraper.failures[:5],
        "median_ms": statistics.median(lat) if lat else None,
        "max_ms": max(lat) if lat else None,
    }
    print(f"\nscrapes: {json.dumps(scrapes)}")
    worst = min((e["ratio"] for e in summary if e.get("ratio") is not None), default=None)
    if worst is not None:
        verdict = "within" if worst >= 0.97 else "OUTSIDE"
        print(f"worst observed/plain ratio {worst:.3f}: {verdict} the 3 % target")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = RESULTS_DIR / time.strftime("observability-%Y%m%d-%H%M%S.json")
    report = {
        "started_at": started_at,
        "duration_s": time.time() - started_at,
        "args": {**vars(own), **{k: str(v) for k, v in vars(args).items()}},
        "environment": throughput.environment(),
        "runs": rows,
        "summary": summary,
        "scrapes": scrapes,
        "failure": failure,
    }
    out.write_text(json.dumps(report, indent=2, default=str))
    print(f"results: {out}")
    shutil.rmtree(log_dir, ignore_errors=True)
    return 1 if failure or scraper.failures else 0


if __name__ == "__main__":
    sys.exit(main())
