"""Exactly-once rules that a partition's log alone can check; pure (values in, findings out).

Used by ``kafkad verify`` (kafkad/cli/verify.py) over batches it fetched, and by the workload
checker (compat_tests/workload/checker.py) for the rules it shares (``stuck_lso``,
``read_order``).

Per partition, from the raw batches (read_uncommitted) in offset order:

* ``duplicate_sequence`` / ``out_of_order_sequence``: within one producer id and epoch, each
  data batch's base sequence must be the previous batch's last sequence + 1 (mod 2^31). A
  base sequence at or below the last one repeats records the broker already had; one above
  the next leaves a gap. A new epoch starts its own run (its first batch is not compared).
  A batch's last sequence is its base sequence + last offset delta, so records the cleaner
  removed from inside a batch of a compacted topic are no gap (whole batches it removed:
  see the compacted rule below).
* ``open_transaction``: a producer's transactional data with no COMMIT/ABORT marker after it,
  whose first batch is older than the maximum transaction timeout.
* ``aborted_read``: a record a read_committed read returned that lies in an aborted
  transaction (its producer's data from the transaction's first batch up to its ABORT marker).
* ``stuck_lso``: the LSO below the high watermark, held by a transaction past the timeout
  (or by none the log shows).
* ``order``: offsets not increasing within one read.

On a compacted topic (``compacted``) a sequence gap is no finding, only a repeat is: Kafka's
cleaner (and kafkad's, storage/cleaner/decide.py) removes a whole batch whose records were
all superseded, unless it is its producer's last, so a correct broker's log skips sequences.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

__all__ = ["BatchView", "Finding", "check_partition", "read_order", "stuck_lso"]

SEQ_MOD = 1 << 31


@dataclass(frozen=True)
class BatchView:
    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: int
    transactional: bool
    control: bool
    marker: str | None  # COMMIT / ABORT for a marker batch
    max_timestamp: int


@dataclass(frozen=True)
class Finding:
    kind: str
    partition: str
    detail: str


def stuck_lso(tp: str, lso: int, hw: int) -> str | None:
    """The workload checker's rule, once every transaction is over: LSO below HW."""
    return f"{tp}: LSO {lso} < high watermark {hw} after the end" if lso < hw else None


def read_order(offsets: Sequence[int]) -> list[tuple[int, int]]:
    """(previous, offending) pairs where offsets do not increase within one read."""
    return [(a, b) for a, b in pairwise(offsets) if b <= a]


def check_partition(
    tp: str,
    batches: Sequence[BatchView],
    committed_reads: Iterable[int],
    hw: int,
    lso: int,
    now_ms: int,
    max_txn_ms: int,
    compacted: bool = False,
) -> list[Finding]:
    out: list[Finding] = []
    last_seq: dict[tuple[int, int], tuple[int, int]] = {}  # (pid, epoch) -> (last seq, offset)
    open_txn: dict[int, BatchView] = {}  # pid -> first batch of its open transaction
    aborted: list[tuple[int, int]] = []  # offset ranges of aborted transactions' data
    data_by_pid: dict[int, list[BatchView]] = {}
    for b in batches:
        if b.control:
            if b.marker is None:
                continue
            first = open_txn.pop(b.producer_id, None)
            members = data_by_pid.pop(b.producer_id, [])
            if b.marker == "ABORT" and first is not None:
                aborted += [(m.base_offset, m.last_offset) for m in members]
            continue
        if b.base_sequence >= 0 and b.producer_id >= 0:
            key = (b.producer_id, b.producer_epoch)
            prev = last_seq.get(key)
            if prev is not None:
                expected = (prev[0] + 1) % SEQ_MOD
                repeats = _at_or_below(b.base_sequence, prev[0])
                if b.base_sequence != expected and (repeats or not compacted):
                    kind = "duplicate_sequence" if repeats else "out_of_order_sequence"
                    out.append(
                        Finding(
                            kind,
                            tp,
                            f"producer {b.producer_id} epoch {b.producer_epoch}: batch at offset "
                            f"{b.base_offset} has sequence {b.base_sequence}, expected {expected} "
                            f"(previous batch at offset {prev[1]} ended at {prev[0]})",
                        )
                    )
            # Kafka's lastSequence: base sequence + last offset delta (not the record count,
            # which the cleaner lowers when it drops records from a compacted batch)
            span = b.last_offset - b.base_offset
            last_seq[key] = ((b.base_sequence + span) % SEQ_MOD, b.base_offset)
        if b.transactional:
            open_txn.setdefault(b.producer_id, b)
            data_by_pid.setdefault(b.producer_id, []).append(b)
    timed_out = []
    for pid, first in sorted(open_txn.items(), key=lambda kv: kv[1].base_offset):
        age = now_ms - first.max_timestamp
        if age > max_txn_ms:
            timed_out.append(first)
            out.append(
                Finding(
                    "open_transaction",
                    tp,
                    f"producer {pid} epoch {first.producer_epoch}: transaction from offset "
                    f"{first.base_offset} has no marker after {age // 1000} s "
                    f"(max transaction timeout {max_txn_ms // 1000} s)",
                )
            )
    reported = 0
    aborted.sort()  # disjoint batches: the one that may hold ``off`` starts at or below it
    starts = [lo for lo, _ in aborted]
    for off in committed_reads:
        i = bisect_right(starts, off) - 1
        if i >= 0 and off <= aborted[i][1]:
            reported += 1
            if reported <= 20:
                out.append(
                    Finding(
                        "aborted_read",
                        tp,
                        f"read_committed returned offset {off} of an aborted transaction",
                    )
                )
    if lso < hw:
        holders = [t for t in open_txn.values() if t.base_offset == lso]
        if not holders:
            out.append(
                Finding(
                    "stuck_lso",
                    tp,
                    f"LSO {lso} < high watermark {hw}, no open transaction starts there",
                )
            )
        elif any(t in timed_out for t in holders):
            out.append(
                Finding(
                    "stuck_lso",
                    tp,
                    f"LSO {lso} < high watermark {hw}, held by a transaction past its timeout",
                )
            )
    return out


def _at_or_below(seq: int, last: int) -> bool:
    """``seq`` repeats ``last`` or earlier (mod 2^31, within half the range)."""
    return (last - seq) % SEQ_MOD < SEQ_MOD // 2
