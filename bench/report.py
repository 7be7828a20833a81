"""Printing and summarizing the benchmark's rows (ratios against the peer)."""

from __future__ import annotations

import statistics
from typing import Any

from bench.brokers import Broker


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
        if r.get("broker_us_per_txn") is not None:
            flag += f", broker {r['broker_us_per_txn']:,.0f} µs/txn"
    if r.get("p50_ms") is not None:
        what = "commit" if r.get("transactions") is not None else "round trip"
        flag += f"  {what} p50 {r['p50_ms']:.2f} ms p99 {r['p99_ms']:.2f} ms"
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
            "latency acks=all",
        )
        if any(r["phase"] == p for r in rows)
    ]
    for size in sizes:
        for phase in phases:
            entry: dict[str, Any] = {"size": size, "phase": phase}
            entry["not_run"] = [  # e.g. a null broker's consume phases
                n for n in names if not any(
                    r["broker"] == n and r["size"] == size and r["phase"] == phase for r in rows
                )
            ]  # fmt: skip
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
                        "broker_us_per_txn": _median_or_none(
                            [r.get("broker_us_per_txn") for r in ok]
                        ),
                        "broker_us_per_txn_runs": [r.get("broker_us_per_txn") for r in ok],
                        "txns_per_s_runs": [r.get("txns_per_s") for r in ok],
                        "p50_ms": _median_or_none([r.get("p50_ms") for r in ok]),
                        "p99_ms": _median_or_none([r.get("p99_ms") for r in ok]),
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
                what = "not run" if n in e.get("not_run", ()) else "failed"
                line += f" {what:>14} {'':>7} {'':>6} {'':>10}"
        if len(names) == 2:
            ratio = f"{e['ratio']:.2f}" if e.get("ratio") is not None else "-"
            cpu_ratio = f"{e['cpu_ratio']:.2f}" if e.get("cpu_ratio") is not None else "-"
            line += f" {ratio:>11} {cpu_ratio:>13}"
        print(line)
    _print_txn_and_latency(summary, names)
    if any(not e[n]["all_complete"] for e in summary for n in names if n in e):
        print("* incomplete: the phase timed out or lost records; the rate covers what was done")
    if len(names) == 2:
        print(
            f"msg/s ratio = {names[0]} / {names[1]} throughput (>1: {names[0]} faster); "
            f"CPU/msg ratio = {names[0]} / {names[1]} broker CPU per record "
            f"(<1: {names[0]} cheaper). Medians over rounds; spread = (max-min)/median."
        )


def _print_txn_and_latency(summary: list[dict[str, Any]], names: list[str]) -> None:
    """The transaction and latency phases' own figures: transactions per second, broker CPU
    per transaction, and latency p50/p99 (commit latency for txn phases)."""
    rows = [e for e in summary if any(e.get(n, {}).get("p50_ms") is not None for n in names)]
    if not rows:
        return
    head = f"\n{'size':>6}  {'phase':<18}"
    for n in names:
        head += f" {n + ' txn/s':>12} {'µs/txn':>8} {'p50 ms':>7} {'p99 ms':>7}"
    if len(names) == 2:
        head += f" {'txn/s ratio':>11} {'CPU/txn ratio':>13} {'p50 ratio':>9}"
    print(head)
    print("-" * len(head))

    def num(v: float | None, fmt: str) -> str:
        return format(v, fmt) if v is not None else "-"

    def ratio(a: dict[str, Any], b: dict[str, Any], key: str) -> str:
        x, y = a.get(key), b.get(key)
        return f"{x / y:.2f}" if x is not None and y else "-"

    for e in rows:
        line = f"{e['size']:>4} B  {e['phase']:<17}"
        for n in names:
            d = e.get(n, {})
            line += (
                f" {num(d.get('txns_per_s'), ',.1f'):>12}"
                f" {num(d.get('broker_us_per_txn'), ',.0f'):>8}"
                f" {num(d.get('p50_ms'), '.2f'):>7} {num(d.get('p99_ms'), '.2f'):>7}"
            )
        if len(names) == 2 and all(n in e for n in names):
            a, b = (e[n] for n in names)
            line += (
                f" {ratio(a, b, 'txns_per_s'):>11} {ratio(a, b, 'broker_us_per_txn'):>13}"
                f" {ratio(a, b, 'p50_ms'):>9}"
            )
        print(line)
