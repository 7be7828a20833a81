"""The transaction coordinator's async runtime: the log, the markers, the timers.

Theory of operation
-------------------
Every decision is made by the pure core (``decisions``, ``lifecycle``); this module feeds it
the time, makes its writes durable and writes the markers. kafkad is one broker, so it
coordinates every transactional id (FindCoordinator(TRANSACTION) answers this broker) and
keeps one ``TxnCache`` for all partitions of ``__transaction_state`` (``txn_log.py``).

* Writes: a decision that returns ``Write`` has already set the id's pending state (no await
  between the decision and that effect, so it is atomic under trio). The runtime appends the
  transit's record, then applies it (``TxnCache.apply``) or, if the append failed, abandons it
  and answers ``decisions.append_error``. Append + apply/abandon run shielded from
  cancellation: a request cancelled mid-append (connection closed, shutdown) must not leave
  the id pending forever. One pending change per id; every other request for it gets
  CONCURRENT_TRANSACTIONS from the decisions.
* Completion: once a PrepareCommit/PrepareAbort is durable the outcome is final.
  ``lifecycle.begin_completion`` gives the markers and the pending Complete transit; a task in
  the coordinator's own nursery (so no request cancellation can interrupt it) writes a marker
  to every partition through the injected marker writer (``Broker.write_txn_marker``'s
  signature), acts on each result per ``lifecycle.marker_action``, then appends Complete*.
  When none of those writes may wait for anything but this process's own disk writes (the
  injected ``write_may_wait``, ``Broker.txn_write_may_wait``: no ``flush.messages`` fsync, no
  group coordinator), the request that appended the Prepare makes that first pass itself,
  under the shield of its Prepare append, and needs no task unless a write fails (the task
  then retries the rest, beginning with the backoff): the same writes in the same order,
  answered at the same point, without a task, a timed wait and two scheduler passes.
  EndTxn (and the fencing InitProducerId) wait for that task up to
  ``TxnConfig.completion_wait_ms`` (5 s) before answering, so a client normally never sees
  the CONCURRENT_TRANSACTIONS window (franz-go's kfake does the same); if a marker keeps
  failing the task keeps retrying in the background with a capped backoff and the request is
  answered anyway (the decision is durable). The optional ``crash_point`` hook is called
  after a durable Prepare* (``"txn_after_prepare"``) and after the first of several markers
  (``"txn_after_first_marker"``): the broker's fault injection may end the process there.
  Any request for an id whose completion is
  running first waits for it the same way.
* Startup (``run``): replay the whole topic into the cache (requests get
  COORDINATOR_LOAD_IN_PROGRESS until then), then re-drive every PrepareCommit/PrepareAbort left
  behind (``lifecycle.transactions_to_complete``): markers again (they are idempotent), then
  Complete*.
* Timers on trio's clock (MockClock in tests): every
  ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` abort transactions older
  than their timeout with the epoch bumped (the fenced producer sees PRODUCER_FENCED /
  INVALID_PRODUCER_EPOCH), and every
  ``transaction.remove.expired.transaction.cleanup.interval.ms`` tombstone ids resting longer
  than ``transactional.id.expiration.ms``. Record timestamps come from ``now_ms`` (wall clock
  in the broker; tests pass a MockClock-driven one).

Deliberate differences from Kafka:
* markers are written one partition after the other, in process, with no leader grouping;
* the coordinator epoch sent with markers is a constant (``COORDINATOR_EPOCH`` = 0, the leader
  epoch of every ``__transaction_state`` partition on a single node);
* STOP (INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED from a partition): Kafka stops
  sending because a newer coordinator owns the id and will finish it. Here there is no other
  coordinator, so waiting would leave the id stuck in Prepare* forever: the answering partition
  is settled (a newer epoch has closed the producer's transaction there), the remaining ones
  still get their markers, and the transaction completes. BUG codes (and a refusing writer)
  drop the partition with an error in the log. UNKNOWN_TOPIC_OR_PARTITION for a partition
  that no longer exists (deleted topic; ``__consumer_offsets`` never created because the
  transaction added offsets but never committed any) drops it, as Kafka does when no leader
  can be found; an exception from the writer is retried.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Final, Protocol

import trio
import trio.lowlevel
from kio.schema.errors import ErrorCode

from coordinator.producer_ids import ProducerIdManager
from coordinator.txn import decisions, lifecycle
from coordinator.txn.counters import TxnCounters
from coordinator.txn.decisions import Write
from coordinator.txn.lifecycle import Completion, MarkerAction
from coordinator.txn.metadata import TP, TxnCache, TxnMetadata
from coordinator.txn.state import TxnState
from coordinator.txn.txn_log import TxnLog
from storage.api import InternalTopics, StorageError, TopicPartition

__all__ = [
    "COORDINATOR_EPOCH",
    "EndTxnResult",
    "InitResult",
    "MarkerWriter",
    "TxnConfig",
    "TxnCoordinator",
]

log = logging.getLogger("kafkad.txn")
E = ErrorCode
S = TxnState


class MarkerWriter(Protocol):
    """``Broker.write_txn_marker(tp, producer_id, producer_epoch, commit, coordinator_epoch,
    transaction_version=...)``."""

    def __call__(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        *,
        transaction_version: int = 0,
    ) -> Awaitable[ErrorCode]: ...


COORDINATOR_EPOCH: Final = 0
RETRY_MIN_S: Final = 0.05
RETRY_MAX_S: Final = 5.0
# A completion pass lets other tasks run after this many markers: a marker to a free partition
# never yields (storage/append_lock.FastLock), so a transaction over hundreds of partitions
# would otherwise hold the event loop for its whole pass (~0.1 ms a marker).
MARKERS_PER_YIELD: Final = 32


@dataclass(frozen=True, slots=True)
class TxnConfig:
    max_timeout_ms: int = 900_000
    num_partitions: int = 50
    id_expiration_ms: int = 604_800_000
    abort_interval_ms: int = 10_000
    expire_interval_ms: int = 3_600_000
    completion_wait_ms: int = 5_000  # kafkad's own: how long EndTxn waits for the markers
    # The finalized ``transaction.version``: decides how the coordinator's own fences (an
    # InitProducerId meeting an Ongoing transaction, the timeout abort) abort. 0 while the
    # feature is not offered; clients choose their own version per request either way.
    transaction_version: int = 0

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> TxnConfig:
        return cls(
            max_timeout_ms=values["transaction.max.timeout.ms"],
            num_partitions=values["transaction.state.log.num.partitions"],
            id_expiration_ms=values["transactional.id.expiration.ms"],
            abort_interval_ms=values["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
            expire_interval_ms=values["transaction.remove.expired.transaction.cleanup.interval.ms"],
        )


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class EndTxnResult:
    """EndTxn's answer; v5+ (TV2) carries the producer id and epoch to continue with."""

    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


class _NeedProducerId(Exception):
    """The decision wants a fresh producer id: allocate one (async) and decide again."""


class TxnCoordinator:
    def __init__(
        self,
        topics: InternalTopics,
        config: TxnConfig,
        producer_ids: ProducerIdManager,
        write_marker: MarkerWriter | None,
        now_ms: Callable[[], int],
        crash_point: Callable[[str], None] | None = None,
        write_may_wait: Callable[[str], bool] | None = None,
    ) -> None:
        self.topics = topics
        self.write_may_wait = write_may_wait
        self.crash_point = crash_point or (lambda point: None)
        self.config = config
        self.producer_ids = producer_ids
        self.write_marker = write_marker
        self.now_ms = now_ms
        self.cache = TxnCache()
        self.counters = TxnCounters()
        self.txn_log = TxnLog(topics, config.num_partitions, now_ms)
        self.loaded = trio.Event()
        self._completions: dict[str, trio.Event] = {}
        self._nursery: trio.Nursery | None = None

    # -- background ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Load the log, re-drive unfinished transactions, then run the timers until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await self.load()
            nursery.start_soon(self._every, self.config.abort_interval_ms, self.abort_timed_out)
            nursery.start_soon(self._every, self.config.expire_interval_ms, self.expire_ids)

    async def load(self) -> None:
        async for transit in self.txn_log.replay():
            self.cache.apply(transit)
        completions = lifecycle.transactions_to_complete(self.cache, self.now_ms())
        log.info(
            "loaded %d transactional id(s); completing %d transaction(s)",
            len(self.cache),
            len(completions),
        )
        for completion in completions:
            self._start_completion(completion)
        self.loaded.set()

    @staticmethod
    async def _every(interval_ms: int, job: Callable[[], Awaitable[None]]) -> None:
        while True:
            await trio.sleep(interval_ms / 1000)
            await job()

    async def abort_timed_out(self) -> None:
        """Fence and abort every Ongoing transaction older than its timeout."""
        for meta in lifecycle.expired_transactions(self.cache, self.now_ms()):
            now = self.now_ms()
            tid = meta.transactional_id
            # re-check: earlier iterations awaited, the id may have moved on
            if self.cache.get(tid) is not meta or not lifecycle.expired_transactions(
                {tid: meta}, now
            ):
                continue
            level = self.config.transaction_version
            next_id = -1
            if decisions.fence_needs_new_producer_id(meta, level):
                try:
                    next_id = await self.producer_ids.generate_producer_id()
                except StorageError as exc:
                    log.error("cannot reserve a producer id to fence %s: %s", tid, exc)
                    continue
                # the id may have moved on meanwhile, to a transaction that needs no rotation
                # (the next scan fences it then, with its own decision)
                if (
                    self.cache.get(tid) is not meta
                    or not lifecycle.expired_transactions({tid: meta}, self.now_ms())
                    or not decisions.fence_needs_new_producer_id(meta, level)
                ):
                    continue
                now = self.now_ms()
            write = lifecycle.abort_timed_out(meta, now, level, next_id)
            if write is not None:
                log.info("%s: transaction timed out, aborting with a bumped epoch", tid)
                self.counters.timeout_aborts += 1
                await self._execute(write)

    async def expire_ids(self) -> None:
        """Tombstone every transactional id idle longer than transactional.id.expiration.ms."""
        expiration = self.config.id_expiration_ms
        for meta in lifecycle.expired_transactional_ids(self.cache, self.now_ms(), expiration):
            now, tid = self.now_ms(), meta.transactional_id
            if self.cache.get(tid) is not meta or not lifecycle.expired_transactional_ids(
                {tid: meta}, now, expiration
            ):
                continue
            log.info("%s: transactional id expired", tid)
            await self._execute(lifecycle.expire_transactional_id(meta))

    # -- writes --------------------------------------------------------------------------------

    async def _execute(self, write: Write) -> ErrorCode:
        """Append, then apply (or abandon); start the markers of a durable Prepare*."""
        if write.created is not None:
            self.cache.put_if_absent(write.created)
        transit = write.transit
        meta = self.cache[transit.transactional_id]
        with trio.CancelScope(shield=True):
            try:
                await self.txn_log.append(transit)
            except StorageError as exc:
                log.error(
                    "%s: writing %s failed: %s", meta.transactional_id, transit.state.name, exc
                )
                meta.abandon(transit)
                return decisions.append_error(E.kafka_storage_error)
            self.cache.apply(transit)
            if write.writes_markers:
                self.crash_point("txn_after_prepare")
                completion = lifecycle.begin_completion(meta, self.now_ms())
                pending = set(completion.markers.partitions)
                done = self._completions[meta.transactional_id] = trio.Event()
                if self._writes_without_waiting(completion):  # inline: see _completion_pass
                    if await self._completion_pass(completion, pending, shielded=True):
                        del self._completions[meta.transactional_id]
                        done.set()
                        return write.reply
                    self._start_completion(completion, done, pending, retry=True)
                else:
                    self._start_completion(completion, done, pending, retry=False)
        return write.reply

    def _writes_without_waiting(self, completion: Completion) -> bool:
        """Whether every write of ``completion`` (its markers, its Complete record) waits for
        nothing but this process's own disk writes (``write_may_wait``, the broker's: no
        ``flush.messages`` fsync, no group coordinator): then the request that made the
        Prepare durable runs it at once, shielded, instead of a task it then waits for (a
        task, a timed wait and two scheduler passes: ~50 µs of a ~300 µs transaction). No
        such write can keep it from answering within ``completion_wait_ms``."""
        may_wait = self.write_may_wait
        if may_wait is None or may_wait(self.txn_log.topic.name):
            return False
        return not any(may_wait(topic) for topic, _ in completion.markers.partitions)

    def _start_completion(
        self,
        completion: Completion,
        done: trio.Event | None = None,
        pending: set[TP] | None = None,
        *,
        retry: bool = False,
    ) -> None:
        """The completion in a task of the coordinator's nursery (``retry``: a first pass has
        already failed, so it begins with the backoff)."""
        assert self._nursery is not None, "TxnCoordinator.run is not running"
        if done is None:
            done = self._completions[completion.markers.transactional_id] = trio.Event()
        if pending is None:
            pending = set(completion.markers.partitions)
        self._nursery.start_soon(self._complete, completion, done, pending, retry)

    async def settle(self, transactional_id: str, timeout_s: float | None = None) -> None:
        """Wait (at most ``timeout_s``, default ``completion_wait_ms``) for a running
        completion of ``transactional_id``."""
        done = self._completions.get(transactional_id)
        if done is not None:
            if timeout_s is None:
                timeout_s = self.config.completion_wait_ms / 1000
            with trio.move_on_after(timeout_s):
                await done.wait()

    async def _complete(
        self, completion: Completion, done: trio.Event, pending: set[TP], retry: bool
    ) -> None:
        delay = RETRY_MIN_S
        while True:
            if retry:
                await trio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
            retry = True
            if await self._completion_pass(completion, pending):
                break
        del self._completions[completion.markers.transactional_id]
        done.set()

    async def _completion_pass(
        self, completion: Completion, pending: set[TP], *, shielded: bool = False
    ) -> bool:
        """A marker to every partition in ``pending`` (those settled leave it), then, if none
        is left, the Complete record; True once that is durable. ``shielded``: the caller
        holds a shield already (the Complete append and its apply always run under one)."""
        markers = completion.markers
        tid = markers.transactional_id
        meta = self.cache[tid]
        for i, tp in enumerate(sorted(pending)):
            if i and not i % MARKERS_PER_YIELD:  # a yield, never a cancel: the pass goes on
                await trio.lowlevel.cancel_shielded_checkpoint()
            if self._marker_settled(tid, tp, await self._write_marker(tp, markers)):
                pending.discard(tp)
                meta.remove_partition(tp)
                if len(pending) == len(markers.partitions) - 1 and pending:
                    self.crash_point("txn_after_first_marker")
        if pending:
            return False
        try:
            with nullcontext() if shielded else trio.CancelScope(shield=True):
                await self.txn_log.append(completion.transit)
                self.cache.apply(completion.transit)
        except StorageError as exc:
            log.error("%s: writing %s failed: %s", tid, completion.transit.state.name, exc)
            return False
        self.counters.completed(markers.commit)
        return True

    async def _write_marker(self, tp: TP, markers: lifecycle.Markers) -> ErrorCode | None:
        """The writer's answer; None if it raised (retried)."""
        if self.write_marker is None:
            return E.unknown_server_error
        try:
            return await self.write_marker(
                TopicPartition(*tp),
                markers.producer_id,
                markers.producer_epoch,
                markers.commit,
                COORDINATOR_EPOCH,
                transaction_version=markers.transaction_version,
            )
        except StorageError:
            return E.kafka_storage_error
        except Exception:
            log.exception("%s: marker for %s raised", markers.transactional_id, tp)
            return None

    def _marker_settled(self, tid: str, tp: TP, code: ErrorCode | None) -> bool:
        """Whether ``tp`` needs no further marker (see the module docstring)."""
        if code is None:
            return False
        action = lifecycle.marker_action(code)
        if action is MarkerAction.RETRY:
            if code is E.unknown_topic_or_partition and self.topics.partition(*tp) is None:
                log.warning("%s: %s no longer exists; no marker", tid, tp)
                return True
            log.info("%s: marker for %s: %s, retrying", tid, tp, code.name)
            return False
        if action is MarkerAction.STOP:
            log.warning("%s: marker for %s: %s; a newer epoch owns it", tid, tp, code.name)
        elif action is MarkerAction.DROP:
            log.warning("%s: marker for %s dropped: %s", tid, tp, code.name)
        elif action is MarkerAction.BUG:
            log.error("%s: marker for %s failed with %s; dropped", tid, tp, code.name)
        return True

    # -- requests ------------------------------------------------------------------------------

    def _status(self) -> ErrorCode:
        return E.none if self.loaded.is_set() else E.coordinator_load_in_progress

    async def init_producer_id(
        self,
        transactional_id: str,
        txn_timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> InitResult:
        """InitProducerId with a transactional id (the null-id path is the handler's)."""
        if (err := self._status()) is not E.none:
            return InitResult(err)
        await self.settle(transactional_id)

        def decide(new_producer_id: Callable[[], int]) -> ErrorCode | Write:
            return decisions.init_producer_id(
                self.cache.get(transactional_id),
                transactional_id,
                txn_timeout_ms,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                max_timeout_ms=self.config.max_timeout_ms,
                new_producer_id=new_producer_id,
                now_ms=self.now_ms(),
                transaction_version=self.config.transaction_version,
            )

        outcome = await self._decide_with_producer_ids(decide)
        if outcome is None:
            return InitResult(E.coordinator_not_available)
        if isinstance(outcome, ErrorCode):
            return InitResult(outcome)
        code = await self._execute(outcome)
        if outcome.writes_markers:  # fenced an ongoing transaction: let its abort finish
            await self.settle(transactional_id)
        if code is not E.none:
            return InitResult(code)
        return InitResult(E.none, outcome.transit.producer_id, outcome.transit.producer_epoch)

    async def _decide_with_producer_ids(
        self, decide: Callable[[Callable[[], int]], ErrorCode | Write]
    ) -> ErrorCode | Write | None:
        """``decide(new_producer_id)``, a pure decision; when it asks for a producer id none is
        reserved for, reserve one (an await) and decide again. None if none can be reserved."""
        fresh: list[int] = []

        def new_producer_id() -> int:
            if not fresh:
                raise _NeedProducerId
            return fresh.pop()

        while True:
            try:
                return decide(new_producer_id)
            except _NeedProducerId:
                try:
                    fresh.append(await self.producer_ids.generate_producer_id())
                except StorageError as exc:
                    log.error("cannot reserve producer ids: %s", exc)
                    return None

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TP],
        client_transaction_version: int = 0,
    ) -> ErrorCode:
        """AddPartitionsToTxn; ``client_transaction_version`` 2 for v5+ (a TV2 producer's
        partitions added by the broker on its behalf)."""
        if (err := self._status()) is not E.none:
            return err
        await self.settle(transactional_id)
        outcome = decisions.add_partitions_to_txn(
            self.cache.get(transactional_id),
            transactional_id,
            producer_id,
            producer_epoch,
            partitions,
            self.now_ms(),
            client_transaction_version,
        )
        return outcome if isinstance(outcome, ErrorCode) else await self._execute(outcome)

    async def add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets_partition: int,
        client_transaction_version: int = 0,
    ) -> ErrorCode:
        """AddOffsetsToTxn: ``offsets_partition`` is the group's ``__consumer_offsets``
        partition. With ``client_transaction_version`` 2 it is the implicit add a
        TxnOffsetCommit v5 makes (no AddOffsetsToTxn from a TV2 client)."""
        return await self.add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            [(decisions.OFFSETS_TOPIC, offsets_partition)],
            client_transaction_version,
        )

    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool
    ) -> ErrorCode:
        """EndTxn v0-4 (client transaction version 0); see ``end_transaction``."""
        result = await self.end_transaction(
            transactional_id, producer_id, producer_epoch, committed
        )
        return result.error

    async def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        client_transaction_version: int = 0,
    ) -> EndTxnResult:
        """EndTxn: answered once the markers are written and Complete* is durable, or after
        ``TxnConfig.completion_wait_ms`` with the completion still retrying in the background.
        ``client_transaction_version`` 2 (EndTxn v5+) bumps the epoch; the result carries the
        producer id and epoch the client continues with."""
        if (err := self._status()) is not E.none:
            return EndTxnResult(err)
        await self.settle(transactional_id)
        meta: TxnMetadata | None = None

        def decide(new_producer_id: Callable[[], int]) -> ErrorCode | Write:
            nonlocal meta
            meta = self.cache.get(transactional_id)
            return decisions.end_txn(
                meta,
                transactional_id,
                producer_id,
                producer_epoch,
                committed,
                self.now_ms(),
                client_transaction_version,
                new_producer_id,
            )

        outcome = await self._decide_with_producer_ids(decide)
        if outcome is None:
            return EndTxnResult(E.coordinator_not_available)
        if isinstance(outcome, ErrorCode):
            return EndTxnResult(outcome, *decisions.end_txn_reply_ids(meta, outcome))
        code = await self._execute(outcome)
        if code is not E.none:
            return EndTxnResult(code)
        await self.settle(transactional_id)
        return EndTxnResult(code, *decisions.end_txn_reply_ids(meta, outcome))

    def verify_partition(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> ErrorCode:
        """KIP-890 part 1: NONE if ``tp`` is in the producer's ongoing transaction."""
        key = (tp.topic, tp.partition)
        result = self.verify_partitions(transactional_id, producer_id, producer_epoch, [key])
        return result if isinstance(result, ErrorCode) else result[key]

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tps: list[TP]
    ) -> ErrorCode | dict[TP, ErrorCode]:
        """AddPartitionsToTxn v4+ ``VerifyOnly`` (``decisions.verify_partitions``)."""
        if (err := self._status()) is not E.none:
            return err
        return decisions.verify_partitions(
            self.cache.get(transactional_id), transactional_id, producer_id, producer_epoch, tps
        )

    # -- admin ---------------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TxnMetadata | ErrorCode:
        """DescribeTransactions for one id (its partitions: those still lacking markers)."""
        if not transactional_id:
            return E.invalid_request
        if (err := self._status()) is not E.none:
            return err
        meta = self.cache.get(transactional_id)
        if meta is None or meta.state is S.DEAD:
            return E.transactional_id_not_found
        return meta

    def list_transactions(
        self, state_filters: Iterable[str], producer_id_filters: Iterable[int], duration_ms: int
    ) -> tuple[ErrorCode, list[str], list[TxnMetadata]]:
        """ListTransactions: (error, unknown state filters, matching ids). A duration filter
        < 0 is off; otherwise only transactions running longer than it (now - start >
        duration, as Kafka compares, so resting ids with start -1 always match)."""
        if (err := self._status()) is not E.none:  # Kafka: the error alone, no filters echoed
            return err, [], []
        names = list(state_filters)
        unknown: list[str] = []
        states: set[TxnState] = set()
        for name in names:
            state = TxnState.from_kafka_name(name)
            if state is None:
                unknown.append(name)
            else:
                states.add(state)
        pids = set(producer_id_filters)
        now = self.now_ms()
        found = [
            meta
            for meta in self.cache.values()
            if meta.state is not S.DEAD
            and (not pids or meta.producer_id in pids)
            and (not names or meta.state in states)
            and (duration_ms < 0 or now - meta.txn_start_timestamp > duration_ms)
        ]
        return E.none, unknown, sorted(found, key=lambda m: m.transactional_id)
