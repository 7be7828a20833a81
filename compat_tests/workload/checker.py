"""The history checker: every anomaly of spec eos.md §6.3 that a transactional workload over
stock clients can show, found in a recorded history. Pure: events in, a ``Report`` out; no
broker, no clients, no clock.

A history is a list of events (dicts, one JSON object a line on disk; ``history.py`` writes
them). Times ``t`` are ``time.monotonic_ns()``, one clock for every process of the machine.

=================  =========================================================================
event ``type``     fields
=================  =========================================================================
``begin``          ``txn`` (unique id), ``worker`` (one producer instance: its sends are
                   ordered)
``send``           ``txn``, ``topic``, ``partition``, ``value`` (unique in the run), optional
                   ``src`` = [topic, partition, offset] of the input a consume-transform-
                   produce worker copied
``ack``            ``value``, ``offset`` (the broker's acknowledgement of one send), or
                   ``error``
``end``            ``txn``, ``commit`` (bool), ``phase``: ``invoke`` (written *before* the
                   client is asked to commit/abort), ``ok`` (acknowledged), ``fail``
``offsets``        ``txn``, ``group``, ``offsets`` [[topic, partition, offset], ...]: the
                   input positions a transaction commits (send_offsets_to_transaction)
``poll``           ``reader``, ``isolation``, ``t`` (after the poll returned), ``records``
                   [[topic, partition, offset, value], ...] in the order received
``final_read``     ``isolation``, ``topic``, ``partition``, ``records`` [[offset, value], ...]
                   read from offset 0 to ``end`` (the LSO or the high watermark),
                   ``complete`` (whether the reader got there)
``end_offsets``    ``topic``, ``partition``, ``lso``, ``hw``, once every transaction is over
``final_offsets``  ``group``, ``offsets`` [[topic, partition, committed offset or -1], ...]
                   for every input partition of a consume-transform-produce group
``nemesis``        ``kind`` (broker_kill, crash_point, producer_kill, ...): counted only
=================  =========================================================================

A transaction's fate, from its ``end`` events: *committed* (commit acknowledged), *aborted*
(abort acknowledged: it must never be visible), *abort_unacked* (abort asked, never
acknowledged: all or nothing, like *indeterminate*), *indeterminate* (commit asked, never
acknowledged: all or nothing), *unfinished* (never asked to end: the producer died or failed;
the coordinator must abort it by timeout or fencing).

Why an unacknowledged abort is not *aborted*: with the classic protocol (transaction version
1) a producer keeps its epoch from one transaction to the next, so an EndTxn(COMMIT) of its
previous transaction that the network held past the client's request timeout (the client
closed the connection and committed through a retry on another one) still carries the
current epoch when it lands, and Kafka's TransactionCoordinator commits the *ongoing*
transaction with it (handleEndTransaction, TV1: Ongoing + COMMIT -> PrepareCommit; only
KIP-890's per-transaction epoch bump fences it). The client's abort then meets a committed
transaction and fails (INVALID_TXN_STATE, fatal in librdkafka): it was never told the abort
happened. An acknowledged abort rules this out: the late commit then finds CompleteAbort.

The same late commit can land while the ongoing transaction is still sending: it commits what
has landed so far, and a send held past it is refused (KIP-890 part 1's verification finds no
ongoing transaction) or times out in the client, whose own commit then fails locally (seen:
librdkafka's EndTxn held 5 s by a stall fault, retried after its 4 s timeout on a new
connection, the two transactions after it begun before the held one landed). So a classic
transaction whose commit was asked and never acknowledged *and* one of whose sends failed
(``Txn.late_commit_possible``) may be partly visible, and read before its commit was asked:
counted as ``txns.late_commit_possible``, not as torn or early. A transaction-version-2
producer (client kind ``tv2``) bumps its epoch per transaction, so none of this applies to it.
The late EndTxn must also be seen in the history: an earlier transaction of the same worker
(same producer epoch) whose commit was acknowledged only after ``SLOW_COMMIT_S`` (the client
timed out and retried it), asked less than ``HELD_S`` before this one began (the held request
can land no later: the fault stalls are 5 s). Without one, a part-visible transaction is torn.

Anomaly classes (``Report.anomalies`` keys), each with human-readable findings:

* ``lost_write``: a committed transaction none of whose sends is in the final
  read_committed read, or an acknowledged send (of any transaction) missing from the final
  read_uncommitted read below its last offset.
* ``torn_txn``: a committed, indeterminate or abort_unacked transaction partly visible.
* ``duplicate``: one value at two offsets of a partition (acks and reads together).
* ``inconsistent_offset``: one (partition, offset) with two values (acks and reads).
* ``aborted_read``: a read_committed read of a value of an aborted transaction.
* ``uncommitted_read``: a read_committed read of a value whose transaction was never asked
  to commit (unfinished), that no one ever sent, or read by a poll that returned before its
  commit was even asked (an early read).
* ``order``: offsets not increasing within one read of a partition, or one producer
  instance's sends to a partition landing out of send order.
* ``offset_atomicity``: for a consume-transform-produce group, the final committed offset
  of an input partition must sit exactly past the inputs whose copies are visible: a visible
  copy of an input at or past the committed offset (output committed, offsets not), a
  visible input below it without a visible copy (offsets committed, output not), or an
  input copied twice. A final offset sent by an unacknowledged transaction of the group, below
  an acknowledged one's, is a late TxnOffsetCommit (transaction version 1: ``late_offsets``).
* ``stuck_lso``: once every transaction is over, a partition whose LSO is below its high
  watermark, or a final read_committed read that could not reach its end.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from kafkad.eos_rules import stuck_lso

ANOMALIES = (
    "lost_write",
    "torn_txn",
    "duplicate",
    "inconsistent_offset",
    "aborted_read",
    "uncommitted_read",
    "order",
    "offset_atomicity",
    "stuck_lso",
)
# Findings kept per class in a report (the count is exact).
MAX_FINDINGS = 20
SLOW_COMMIT_S = 1.0  # a commit acknowledged this late was retried (stalls are 5 s, delays 40 ms)
HELD_S = 6.0  # how long a request can be held: the 5 s stall fault, and a margin

TP = tuple[str, int]
Event = Mapping[str, Any]


@dataclass
class Txn:
    id: str
    worker: str = ""
    sends: list[tuple[TP, str]] = field(default_factory=list)  # in send order
    commit_invoked_t: int | None = None
    abort_invoked: bool = False
    aborted: bool = False  # abort acknowledged
    committed: bool = False
    offsets: list[tuple[str, TP, int]] = field(default_factory=list)  # (group, tp, offset)
    failed_sends: int = 0  # sends acknowledged with an error (timed out, purged, ...)
    begin_t: int | None = None
    commit_ok_t: int | None = None
    after_slow_commit: bool = False  # begun within HELD_S of a slow commit of its worker's

    @property
    def late_commit_possible(self) -> bool:
        """A classic transaction a late EndTxn(COMMIT) of its predecessor may have committed
        part-way (the module's docstring): commit asked, never acknowledged, a send failed,
        begun soon after a commit of the same worker that was retried."""
        kind = self.worker.split(".")[0].split("-", 1)[-1]  # "p2-confluent.1" -> "confluent"
        return (
            self.fate == "indeterminate"
            and self.failed_sends > 0
            and kind != "tv2"
            and self.after_slow_commit
        )

    @property
    def fate(self) -> str:
        if self.abort_invoked:
            return "aborted" if self.aborted else "abort_unacked"
        if self.committed:
            return "committed"
        if self.commit_invoked_t is not None:
            return "indeterminate"
        return "unfinished"


@dataclass
class Report:
    anomalies: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in ANOMALIES})
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, kind: str, finding: str) -> None:
        self.counts[f"anomaly.{kind}"] += 1
        if len(self.anomalies[kind]) < MAX_FINDINGS:
            self.anomalies[kind].append(finding)

    @property
    def found(self) -> dict[str, int]:
        """Anomaly class -> how many, for the classes that have any."""
        return {k: self.counts[f"anomaly.{k}"] for k in ANOMALIES if self.counts[f"anomaly.{k}"]}

    @property
    def clean(self) -> bool:
        return not self.found

    def summary(self) -> str:
        lines = [f"{k}={v}" for k, v in sorted(self.counts.items()) if not k.startswith("anom")]
        out = ["counts: " + " ".join(lines)]
        if self.clean:
            out.append("checker: clean")
        for kind, n in self.found.items():
            out.append(f"ANOMALY {kind}: {n}")
            out += [f"  {f}" for f in self.anomalies[kind]]
        return "\n".join(out)


def _tp(topic: str, partition: int) -> TP:
    return (str(topic), int(partition))


def check(events: Iterable[Event]) -> Report:
    r = Report()
    txns: dict[str, Txn] = {}
    sent: dict[str, tuple[str, TP, list[Any] | None]] = {}  # value -> (txn, tp, src)
    # (tp, value) -> offsets and (tp, offset) -> values, over acks and every read
    offsets_of: dict[tuple[TP, str], set[int]] = defaultdict(set)
    values_at: dict[tuple[TP, int], set[str]] = defaultdict(set)
    rc_reads: list[tuple[str, int | None, TP, int, str]] = []  # (who, poll t, tp, offset, v)
    final: dict[tuple[str, TP], list[tuple[int, str]]] = {}
    end_offsets: list[Event] = []
    final_offsets: list[Event] = []
    acked: dict[str, int] = {}

    def txn(tid: str) -> Txn:
        return txns.setdefault(tid, Txn(tid))

    def saw(tp: TP, offset: int, value: str) -> None:
        offsets_of[(tp, value)].add(offset)
        values_at[(tp, offset)].add(value)

    for e in events:
        kind = e["type"]
        if kind == "begin":
            txn(e["txn"]).worker = e.get("worker", "")
            txn(e["txn"]).begin_t = int(e.get("t", 0))
            r.counts["txns"] += 1
        elif kind == "send":
            tp = _tp(e["topic"], e["partition"])
            txn(e["txn"]).sends.append((tp, e["value"]))
            sent[e["value"]] = (e["txn"], tp, e.get("src"))
            r.counts["sends"] += 1
        elif kind == "ack":
            if e.get("error") is None and e["value"] in sent:
                tp = sent[e["value"]][1]
                acked[e["value"]] = int(e["offset"])
                saw(tp, int(e["offset"]), e["value"])
                r.counts["acks"] += 1
            elif e["value"] in sent:
                txn(sent[e["value"]][0]).failed_sends += 1
        elif kind == "end":
            t = txn(e["txn"])
            if e["phase"] == "invoke":
                if e["commit"]:
                    t.commit_invoked_t = int(e.get("t", 0))
                else:
                    t.abort_invoked = True
            elif e["phase"] == "ok" and e["commit"]:
                t.committed = True
                t.commit_ok_t = int(e.get("t", 0))
            elif e["phase"] == "ok":
                t.aborted = True
        elif kind == "offsets":
            for topic, p, off in e["offsets"]:
                txn(e["txn"]).offsets.append((e["group"], _tp(topic, p), int(off)))
        elif kind == "poll":
            r.counts["polls"] += 1
            last: dict[TP, int] = {}
            for topic, p, off, value in e["records"]:
                tp = _tp(topic, p)
                if tp in last and off <= last[tp]:
                    r.add("order", f"{e['reader']} read {tp} offset {off} after {last[tp]}")
                last[tp] = off
                saw(tp, off, value)
                if e["isolation"] == "read_committed":
                    rc_reads.append((str(e["reader"]), int(e["t"]), tp, off, value))
        elif kind == "final_read":
            tp = _tp(e["topic"], e["partition"])
            recs = [(int(o), str(v)) for o, v in e["records"]]
            final[(e["isolation"], tp)] = recs
            for i, (off, value) in enumerate(recs):
                if i and off <= recs[i - 1][0]:
                    r.add(
                        "order",
                        f"final {e['isolation']} read of {tp}: {off} after {recs[i - 1][0]}",
                    )
                saw(tp, off, value)
                if e["isolation"] == "read_committed":
                    rc_reads.append(("final", None, tp, off, value))
            if e["isolation"] == "read_committed" and not e.get("complete", True):
                r.add(
                    "stuck_lso",
                    f"final read_committed read of {tp} stopped short of {e.get('end')}",
                )
        elif kind == "end_offsets":
            end_offsets.append(e)
        elif kind == "final_offsets":
            final_offsets.append(e)
        elif kind == "nemesis":
            r.counts[f"nemesis.{e['kind']}"] += 1

    slow: dict[str, list[int]] = defaultdict(list)  # worker -> when its slow commits were asked
    for t in txns.values():  # in begin order
        if t.begin_t is not None and any(
            0 <= t.begin_t - asked < HELD_S * 1e9 for asked in slow[t.worker]
        ):
            t.after_slow_commit = True
        asked, ok = t.commit_invoked_t, t.commit_ok_t
        if asked is not None and ok is not None and ok - asked >= SLOW_COMMIT_S * 1e9:
            slow[t.worker].append(asked)
    for t in txns.values():
        r.counts[f"txns.{t.fate}"] += 1
        if t.late_commit_possible:
            r.counts["txns.late_commit_possible"] += 1
    r.counts["ops"] = r.counts["sends"] + r.counts["polls"] + len(txns)

    # duplicate / inconsistent offsets
    for (tp, value), offs in offsets_of.items():
        if len(offs) > 1:
            r.add("duplicate", f"{value!r} at offsets {sorted(offs)} of {tp}")
    for (tp, off), vals in values_at.items():
        if len(vals) > 1:
            r.add("inconsistent_offset", f"{tp} offset {off} holds {sorted(vals)}")

    # reads at read_committed: aborted, unfinished, phantom, early
    reported: set[tuple[str, str]] = set()
    for who, poll_t, tp, off, value in rc_reads:
        if value not in sent:
            kind, why = "uncommitted_read", f"{value!r} at {tp}@{off} was never sent"
        else:
            t = txns[sent[value][0]]
            fate = t.fate
            if fate == "aborted":
                kind, why = "aborted_read", f"{value!r} of aborted {t.id} read at {tp}@{off}"
            elif fate == "unfinished":
                kind, why = "uncommitted_read", f"{value!r} of {t.id} (never asked to commit)"
            elif (
                poll_t is not None
                and t.commit_invoked_t is not None
                and poll_t < t.commit_invoked_t
                and not t.late_commit_possible
            ):
                kind, why = "uncommitted_read", f"{who} read {value!r} of {t.id} before its commit"
            else:
                continue
        if (kind, value) not in reported:
            reported.add((kind, value))
            r.add(kind, f"{who}: {why}")

    # visibility of transactions in the final read_committed read
    visible: dict[TP, dict[str, int]] = defaultdict(dict)
    for (iso, tp), recs in final.items():
        if iso == "read_committed":
            for off, value in recs:
                visible[tp][value] = off
    finally_read = {tp for iso, tp in final if iso == "read_committed"}
    for t in txns.values():
        mine = [(tp, v) for tp, v in t.sends if tp in finally_read]
        if not mine or t.fate not in ("committed", "indeterminate", "abort_unacked"):
            continue
        seen = [(tp, v) for tp, v in mine if v in visible[tp]]
        if len(seen) == len(mine):
            continue
        if seen and not t.late_commit_possible:
            missing = [v for tp, v in mine if v not in visible[tp]]
            r.add(
                "torn_txn",
                f"{t.fate} {t.id}: {len(seen)} of {len(mine)} visible, missing {missing[:5]}",
            )
        elif t.fate == "committed":
            r.add("lost_write", f"committed {t.id}: none of {len(mine)} sends visible ({mine[:3]})")

    # every acknowledged send stays in the log (read_uncommitted), whatever its transaction's
    # fate: an acknowledgement is a durability promise (a kill -9 loses no page cache)
    in_log: dict[TP, dict[str, int]] = defaultdict(dict)
    ru_end: dict[TP, int] = {}
    for (iso, tp), recs in final.items():
        if iso == "read_uncommitted":
            in_log[tp] = {v: off for off, v in recs}
            ru_end[tp] = recs[-1][0] if recs else -1
    for value, off in acked.items():
        tp = sent[value][1]
        if tp in ru_end and off <= ru_end[tp] and value not in in_log[tp]:
            r.add("lost_write", f"{value!r} acknowledged at {tp}@{off}, gone from the log")

    # order: one producer instance's sends to a partition, in send order, at rising offsets
    per_worker: dict[tuple[str, TP], list[tuple[int, str]]] = defaultdict(list)
    for t in txns.values():
        for tp, v in t.sends:
            off = visible[tp].get(v, acked.get(v))
            if off is not None:
                per_worker[(t.worker or t.id, tp)].append((off, v))
    for (worker, tp), offs in per_worker.items():
        for (a, va), (b, vb) in pairwise(offs):
            if b <= a:
                r.add("order", f"{worker}: {vb!r} sent after {va!r} but at {tp}@{b} <= {a}")

    _check_offsets(r, final_offsets, final, sent, txns)
    for e in end_offsets:
        finding = stuck_lso(str(_tp(e["topic"], e["partition"])), int(e["lso"]), int(e["hw"]))
        if finding is not None:
            r.add("stuck_lso", finding)
    return r


def _check_offsets(
    r: Report,
    final_offsets: list[Event],
    final: Mapping[tuple[str, TP], list[tuple[int, str]]],
    sent: Mapping[str, tuple[str, TP, list[Any] | None]],
    txns: Mapping[str, Txn],
) -> None:
    """Offset-commit atomicity of consume-transform-produce groups (see the module docstring):
    every visible copy counts against the group whose final offsets cover its source.

    A late TxnOffsetCommit: with transaction version 1 a producer keeps its epoch across
    transactions, so the offsets of a transaction that was not acknowledged committed (its
    TxnOffsetCommit timed out at the client, held by a delay fault) may reach the coordinator
    during a later transaction of the same producer and be committed with it, over that one's
    own (Kafka 4.2 does the same; KIP-890's epoch bump per transaction closes it). A final
    offset that such a transaction sent, below what an acknowledged commit sent, excuses the
    copies between the two (counted as ``late_offsets``), nothing else."""
    late: dict[tuple[str, TP], set[int]] = defaultdict(set)
    acked: dict[tuple[str, TP], int] = {}
    for t in txns.values():
        for group, tp, off in t.offsets:
            if t.committed:
                acked[(group, tp)] = max(acked.get((group, tp), -1), off)
            else:
                late[(group, tp)].add(off)
    copies: dict[TP, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    for (iso, _tp_out), recs in final.items():
        if iso != "read_committed":
            continue
        for _off, value in recs:
            src = sent.get(value, ("", ("", 0), None))[2]
            if src is not None:
                copies[_tp(src[0], src[1])][int(src[2])].append(value)
                r.counts["copies_visible"] += 1
    for e in final_offsets:
        for topic, p, committed in e["offsets"]:
            tp = _tp(topic, p)
            upto = max(int(committed), 0)
            inputs = [off for off, _ in final.get(("read_committed", tp), [])]
            for off, vals in copies.get(tp, {}).items():
                if len(vals) > 1:
                    r.add("offset_atomicity", f"{e['group']}: {tp}@{off} copied {len(vals)} times")
                key = (e["group"], tp)
                if off >= upto and committed in late[key] and off < acked.get(key, -1):
                    r.counts["late_offsets"] += 1  # a late TxnOffsetCommit (docstring)
                    continue
                if off >= upto:
                    r.add(
                        "offset_atomicity",
                        f"{e['group']}: {tp}@{off} copied, committed offset {committed}",
                    )
            for off in inputs:
                if off < upto and off not in copies.get(tp, {}):
                    r.add(
                        "offset_atomicity",
                        f"{e['group']}: {tp}@{off} below committed offset {committed}, no copy",
                    )
