"""A synchronous stand-in for the coordinator runtime: decisions -> encoded log -> apply."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from coordinator.txn import decisions, lifecycle, log_format
from coordinator.txn.decisions import Write
from coordinator.txn.lifecycle import Completion
from coordinator.txn.metadata import TP, TxnCache, TxnMetadata
from coordinator.txn.state import TxnState

E = ErrorCode
S = TxnState
MAX_TIMEOUT = 900_000


def meta_in(
    state: TxnState,
    *,
    producer_id: int = 1000,
    epoch: int = 5,
    last_epoch: int = -1,
    partitions: frozenset[TP] | None = None,
    timeout_ms: int = 60_000,
    start: int | None = None,
    now_ms: int = 1_000,
    tv: int = 0,
) -> TxnMetadata:
    """Metadata resting in ``state`` (as if replayed), with plausible fields for it."""
    if partitions is None:
        partitions = (
            frozenset({("t", 0), ("t", 1)})
            if state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT)
            else frozenset()
        )
    if start is None:
        start = -1 if state is S.EMPTY else now_ms - 100
    return TxnMetadata(
        "tx",
        producer_id,
        timeout_ms,
        now_ms,
        producer_epoch=epoch,
        last_producer_epoch=last_epoch,
        prev_producer_id=producer_id,
        state=state,
        partitions=partitions,
        txn_start_timestamp=start,
        client_transaction_version=tv,
    )


@dataclass
class Coordinator:
    """Cache + log + producer id allocator; every durable transit is encoded into ``log``."""

    value_version: int = log_format.VALUE_VERSION
    now_ms: int = 1_000_000
    transaction_version: int = 0  # the coordinator's finalized level (how it fences)
    cache: TxnCache = field(default_factory=TxnCache)
    log: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    completions: dict[str, Completion] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))

    def new_producer_id(self) -> int:
        return next(self._ids)

    def run(self, outcome: ErrorCode | Write, *, fail: bool = False) -> ErrorCode:
        """Append and apply (or abandon) a Write; start the markers of a durable Prepare*."""
        if isinstance(outcome, ErrorCode):
            return outcome
        if outcome.created is not None:
            self.cache.put_if_absent(outcome.created)
        meta = self.cache[outcome.transit.transactional_id]
        if fail:
            meta.abandon(outcome.transit)
            return decisions.append_error(E.not_enough_replicas)
        self.log.append(log_format.encode(outcome.transit, self.value_version))
        self.cache.apply(outcome.transit)
        if outcome.writes_markers:
            self.completions[meta.transactional_id] = lifecycle.begin_completion(meta, self.now_ms)
        return outcome.reply

    def finish_markers(self, transactional_id: str, *, fail: bool = False) -> bool:
        """All markers acknowledged: append the Complete record (kept pending on failure)."""
        completion = self.completions.get(transactional_id)
        if completion is None:
            return False
        if not fail:
            del self.completions[transactional_id]
            self.log.append(log_format.encode(completion.transit, self.value_version))
            self.cache.apply(completion.transit)
        return True

    # request shortcuts ------------------------------------------------------------------

    def init(
        self, tid: str = "tx", timeout_ms: int = 60_000, pid: int = -1, epoch: int = -1
    ) -> ErrorCode | Write:
        return decisions.init_producer_id(
            self.cache.get(tid),
            tid,
            timeout_ms,
            producer_id=pid,
            producer_epoch=epoch,
            max_timeout_ms=MAX_TIMEOUT,
            new_producer_id=self.new_producer_id,
            now_ms=self.now_ms,
            transaction_version=self.transaction_version,
        )

    def add(self, tid: str, pid: int, epoch: int, *tps: TP, tv: int = 0) -> ErrorCode | Write:
        return decisions.add_partitions_to_txn(
            self.cache.get(tid), tid, pid, epoch, tps, self.now_ms, tv
        )

    def add_offsets(self, tid: str, pid: int, epoch: int, partition: int) -> ErrorCode | Write:
        return decisions.add_offsets_to_txn(
            self.cache.get(tid), tid, pid, epoch, partition, self.now_ms
        )

    def end(self, tid: str, pid: int, epoch: int, commit: bool, tv: int = 0) -> ErrorCode | Write:
        return decisions.end_txn(
            self.cache.get(tid), tid, pid, epoch, commit, self.now_ms, tv, self.new_producer_id
        )

    def ids(self, tid: str = "tx") -> tuple[int, int]:
        meta = self.cache[tid]
        return meta.producer_id, meta.producer_epoch

    def replayed(self) -> TxnCache:
        cache = TxnCache()
        cache.replay(log_format.decode(k, v) for k, v in self.log)
        return cache
