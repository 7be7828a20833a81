"""The transaction view of ``kafkad proxy``: transactions as seen in the traffic (pure, no I/O).

What passes through the proxy is all it knows: this is *observed traffic*, not the upstream's
transaction state (a producer that talks to the cluster without the proxy, a coordinator's
own timeout abort, markers written by the cluster are invisible here). Each request of the
transactional APIs and its answer are decoded with kio (the only bodies the proxy decodes
besides endpoint-carrying answers) and folded into one ``Observed`` per transactional id:

==========================  ======================================================
InitProducerId (22)         producer id and epoch handed out; a new epoch while a
                            transaction was open here means the open one was fenced
AddPartitionsToTxn (24)     a transaction begins (state ``ongoing``); partitions
                            added; latency
AddOffsetsToTxn (25),       the group whose offsets join the transaction
TxnOffsetCommit (28)
EndTxn (26)                 ``committed`` / ``aborted`` (or the error), latency
==========================  ======================================================

An answer with ``PRODUCER_FENCED``, ``INVALID_PRODUCER_EPOCH`` or
``TRANSACTIONAL_ID_AUTHORIZATION_FAILED``-style errors is counted per id as ``fenced`` (the
first two) or an error. Latency is from the request's forwarding to its answer's arrival.
Only the newest ``MAX_IDS`` transactional ids are kept.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from kio.index import load_request_schema, load_response_schema

from proxy.forward.frames import read_body, response_body_start
from wire.headers import read_fixed_header, skip_tagged_fields

INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 28
TXN_APIS = frozenset({INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT})
FENCED_CODES = frozenset({90, 47})  # PRODUCER_FENCED, INVALID_PRODUCER_EPOCH
MAX_IDS = 10_000
LATENCY_KEPT = 512  # recent latencies per API, for the page's percentiles


@dataclass(slots=True)
class Observed:
    """One transactional id as the proxy saw it."""

    transactional_id: str
    producer_id: int = -1
    producer_epoch: int = -1
    state: str = "initialized"  # ongoing, committed, aborted, fenced, error
    partitions: set[tuple[str, int]] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    commits: int = 0
    aborts: int = 0
    fenced: int = 0
    errors: int = 0
    last_error: str = ""
    last_end_ms: float | None = None  # the last EndTxn's latency
    seen_unix: float = 0.0


@dataclass(slots=True)
class Totals:
    init_producer_id: int = 0
    commits: int = 0
    aborts: int = 0
    end_errors: int = 0
    fenced: int = 0
    add_partitions: int = 0
    # api key -> (count, sum of ms) and recent ms
    latency_count: dict[int, int] = field(default_factory=dict)
    latency_sum_ms: dict[int, float] = field(default_factory=dict)
    recent_ms: dict[int, list[float]] = field(default_factory=dict)


class TxnObserver:
    def __init__(self) -> None:
        self.ids: OrderedDict[str, Observed] = OrderedDict()
        self.totals = Totals()

    def observe(
        self, api_key: int, version: int, request: bytes, response: bytes, latency_ms: float
    ) -> None:
        """Fold one request and its answer in; a body kio cannot read is skipped."""
        try:
            req = _read_request(api_key, version, request)
            resp = read_body(
                load_response_schema(api_key, version),
                response,
                response_body_start(api_key, version, response),
            )
        except Exception:
            return
        self._latency(api_key, latency_ms)
        if api_key == ADD_PARTITIONS and version >= 4:
            for txn in req.transactions:
                self._add_partitions(txn.transactional_id, txn, txn.topics, resp)
            return
        if api_key == ADD_PARTITIONS:
            self._add_partitions(
                req.v3_and_below_transactional_id,
                None,
                req.v3_and_below_topics,
                resp,
                pid=req.v3_and_below_producer_id,
                epoch=req.v3_and_below_producer_epoch,
            )
            return
        tid = getattr(req, "transactional_id", None)
        if not tid:
            return
        seen = self._get(str(tid))
        code = first_error(resp)
        if api_key == INIT_PRODUCER_ID:
            self.totals.init_producer_id += 1
            if code == 0:
                if seen.state == "ongoing":  # a new producer took the id: the open one fenced
                    seen.fenced += 1
                    self.totals.fenced += 1
                seen.producer_id, seen.producer_epoch = (
                    int(resp.producer_id),
                    int(resp.producer_epoch),
                )
                seen.state = "initialized"
                seen.partitions.clear()
                seen.groups.clear()
        elif api_key == END_TXN:
            seen.last_end_ms = latency_ms
            if code == 0:
                if req.committed:
                    seen.commits += 1
                    self.totals.commits += 1
                    seen.state = "committed"
                else:
                    seen.aborts += 1
                    self.totals.aborts += 1
                    seen.state = "aborted"
                seen.partitions.clear()
                seen.groups.clear()
            else:
                self.totals.end_errors += 1
        elif api_key in (ADD_OFFSETS, TXN_OFFSET_COMMIT):
            seen.groups.add(str(req.group_id))
            self._ids_of(seen, req)
        if code != 0:
            self._error(seen, code)

    # -- pieces --------------------------------------------------------------------------

    def _get(self, tid: str) -> Observed:
        seen = self.ids.get(tid)
        if seen is None:
            seen = self.ids[tid] = Observed(tid)
            if len(self.ids) > MAX_IDS:
                self.ids.popitem(last=False)
        else:
            self.ids.move_to_end(tid)
        seen.seen_unix = time.time()
        return seen

    def _ids_of(self, seen: Observed, req: Any, pid: Any = None, epoch: Any = None) -> None:
        pid = getattr(req, "producer_id", pid)
        epoch = getattr(req, "producer_epoch", epoch)
        if pid is not None and int(pid) >= 0:
            seen.producer_id, seen.producer_epoch = int(pid), int(epoch)

    def _add_partitions(
        self, tid: Any, req: Any, topics: Any, resp: Any, pid: Any = None, epoch: Any = None
    ) -> None:
        seen = self._get(str(tid))
        self.totals.add_partitions += 1
        self._ids_of(seen, req, pid, epoch)
        code = first_error(resp)
        if code != 0:
            self._error(seen, code)
            return
        seen.state = "ongoing"
        for topic in topics:
            for p in topic.partitions:
                seen.partitions.add((str(topic.name), int(p)))

    def _error(self, seen: Observed, code: int) -> None:
        from kio.schema.errors import ErrorCode

        try:
            name = ErrorCode(code).name.upper()
        except ValueError:
            name = str(code)
        seen.last_error = name
        if code in FENCED_CODES:
            seen.fenced += 1
            self.totals.fenced += 1
            seen.state = "fenced"
        else:
            seen.errors += 1

    def _latency(self, api_key: int, ms: float) -> None:
        t = self.totals
        t.latency_count[api_key] = t.latency_count.get(api_key, 0) + 1
        t.latency_sum_ms[api_key] = t.latency_sum_ms.get(api_key, 0.0) + ms
        recent = t.recent_ms.setdefault(api_key, [])
        recent.append(ms)
        if len(recent) > LATENCY_KEPT:
            del recent[: len(recent) - LATENCY_KEPT]

    # -- what the page and /metrics show ----------------------------------------------------

    def open_transactions(self) -> int:
        return sum(1 for s in self.ids.values() if s.state == "ongoing")

    def percentile(self, api_key: int, p: float) -> float | None:
        recent = sorted(self.totals.recent_ms.get(api_key, ()))
        if not recent:
            return None
        return recent[min(len(recent) - 1, int(p / 100 * len(recent)))]

    def snapshot(self) -> dict[str, Any]:
        """Everything as JSON-able data, newest id first."""
        return {
            "source": "observed traffic through kafkad proxy, not broker state",
            "totals": {
                "init_producer_id": self.totals.init_producer_id,
                "commits": self.totals.commits,
                "aborts": self.totals.aborts,
                "end_txn_errors": self.totals.end_errors,
                "fenced": self.totals.fenced,
                "open": self.open_transactions(),
                "end_txn_p50_ms": self.percentile(END_TXN, 50),
                "end_txn_p99_ms": self.percentile(END_TXN, 99),
                "add_partitions_p50_ms": self.percentile(ADD_PARTITIONS, 50),
            },
            "transactional_ids": [
                {
                    "transactional_id": s.transactional_id,
                    "producer_id": s.producer_id,
                    "producer_epoch": s.producer_epoch,
                    "state": s.state,
                    "partitions": sorted(f"{t}-{p}" for t, p in s.partitions),
                    "groups": sorted(s.groups),
                    "commits": s.commits,
                    "aborts": s.aborts,
                    "fenced": s.fenced,
                    "errors": s.errors,
                    "last_error": s.last_error,
                    "last_end_txn_ms": s.last_end_ms,
                }
                for s in reversed(self.ids.values())
            ],
        }


def _read_request(api_key: int, version: int, frame: bytes) -> Any:
    cls = load_request_schema(api_key, version)
    _header, pos = read_fixed_header(frame)
    if cls.__flexible__:
        pos = skip_tagged_fields(frame, pos, len(frame))
    return read_body(cls, frame, pos)


def first_error(entity: Any) -> int:
    """The first non-zero ``*error_code`` anywhere in a decoded body, else 0."""
    if dataclasses.is_dataclass(entity):
        for f in dataclasses.fields(entity):
            value = getattr(entity, f.name)
            if f.name.endswith("error_code"):
                if int(value) != 0:
                    return int(value)
            elif isinstance(value, tuple) or dataclasses.is_dataclass(value):
                code = first_error(value)
                if code:
                    return code
    elif isinstance(entity, tuple):
        for item in entity:
            code = first_error(item)
            if code:
                return code
    return 0
