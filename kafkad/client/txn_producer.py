"""A transactional producer over the raw protocol that sends what Java's producer (4.x
``TransactionManager`` and ``Sender``) sends, in either of its two flows, for tests and bench:

* ``tv2=True`` (transaction version 2, KIP-890 part 2; Java with ``transaction.version`` >= 2
  finalized): Produce v12 adds each partition to the transaction itself (no
  AddPartitionsToTxn), TxnOffsetCommit v5 adds the group's offsets (no AddOffsetsToTxn), and
  EndTxn v5 answers with the producer id and epoch the next transaction uses: the coordinator
  bumps the epoch at the end of every transaction, so sequences start again at 0.
* ``tv2=False`` (classic, KIP-98/447 with KIP-890 part 1): AddPartitionsToTxn v3 before the
  first batch to a partition, AddOffsetsToTxn v4 then TxnOffsetCommit v4, Produce v11,
  EndTxn v4; the epoch stays.

Both start with FindCoordinator and InitProducerId v5 (producer id and epoch -1: a new
instance, which fences an older one of the same transactional id and aborts its open
transaction). Every answer is classified by ``txn_rules.step_for``: retriable codes and lost
connections are retried (a lost connection on FindCoordinator's target asks it again) until
``op_timeout_s`` (then a Produce is abortable, as a batch past Java's delivery timeout, and any
other request raises ``TxnTimeout``); an abortable error raises ``TxnAbortable`` and leaves the
transaction to ``abort()`` (InitProducerId too, for TRANSACTION_ABORTABLE and the authorization
errors, as Java 4.x; with no producer id the abort sends nothing and a later ``send`` fails
abortable, see ``_require_producer_id``); fencing raises ``TxnFenced`` and every later call
raises it again, as Java's fatal state does. A transaction that sent nothing ends without
EndTxn (Java's ``transactionStarted``). Deliberate simplification: one request at a time, each
``send`` is one batch to one partition, and a retried Produce resends the same batch (same
sequence).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kafkad.client.errors import KafkaError
from kafkad.client.txn_rules import Step, step_for
from kafkad.client.txn_transport import Disconnected, Transport
from wire.record_codec import Record, build_batch

__all__ = ["TxnAbortable", "TxnError", "TxnFatal", "TxnFenced", "TxnProducer", "TxnTimeout"]

GROUP, TRANSACTION = 0, 1
PRODUCE, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, INIT_PID, TXN_OFFSET_COMMIT = 0, 24, 25, 26, 22, 28
TRANSACTION_ABORTABLE = 120
# api key -> version, per flow
TV2_VERSIONS = {INIT_PID: 5, PRODUCE: 12, TXN_OFFSET_COMMIT: 5, END_TXN: 5}
CLASSIC_VERSIONS = {
    INIT_PID: 5,
    PRODUCE: 11,
    ADD_PARTITIONS: 3,
    ADD_OFFSETS: 4,
    TXN_OFFSET_COMMIT: 4,
    END_TXN: 4,
}
_NAMES = {0: "Produce", 22: "InitProducerId", 24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn"}
_NAMES |= {26: "EndTxn", 28: "TxnOffsetCommit"}


class TxnError(Exception):
    def __init__(self, message: str, code: int = -1) -> None:
        super().__init__(message)
        self.code = code


class TxnAbortable(TxnError):
    """The transaction cannot commit; ``abort()`` it and go on."""


class TxnFenced(TxnError):
    """A newer producer of the transactional id fenced this one (fatal)."""


class TxnFatal(TxnError):
    """An error the producer cannot recover from (fatal)."""


class TxnTimeout(TxnError):
    """Retriable errors until the operation's time ran out: the outcome is unknown (for EndTxn
    commit, the transaction may have committed)."""


class State(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in_transaction"
    ABORTABLE_ERROR = "abortable_error"
    FATAL_ERROR = "fatal_error"


class TxnProducer:
    def __init__(
        self,
        transport: Transport,
        transactional_id: str,
        *,
        tv2: bool = True,
        transaction_timeout_ms: int = 60_000,
        op_timeout_s: float = 20.0,
        backoff_s: float = 0.02,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.t = transport
        self.tid = transactional_id
        self.tv2 = tv2
        self.versions = TV2_VERSIONS if tv2 else CLASSIC_VERSIONS
        self.timeout_ms = transaction_timeout_ms
        self.op_timeout_s, self.backoff_s = op_timeout_s, backoff_s
        self._sleep, self._clock = sleep, clock
        self.producer_id, self.producer_epoch = -1, -1
        self.state = State.UNINITIALIZED
        self._error: TxnError | None = None
        self._sequences: dict[tuple[str, int], int] = {}
        self._partitions: set[tuple[str, int]] = set()  # classic: added to the transaction
        self._groups: set[str] = set()  # classic: AddOffsetsToTxn done
        self.started = False  # something was sent in this transaction (Java: transactionStarted)

    # -- the application's calls ------------------------------------------------------------

    def init_transactions(self) -> None:
        self._require(State.UNINITIALIZED)
        data = {"transactional_id": self.tid, "transaction_timeout": self.timeout_ms}
        resp = self._coordinated(INIT_PID, data | {"producer_id": -1, "producer_epoch": -1})
        self._new_epoch(int(resp.producer_id), int(resp.producer_epoch))
        self.state = State.READY

    def begin(self) -> None:
        self._require(State.READY)
        self.state = State.IN_TRANSACTION
        self.started = False
        self._partitions.clear()
        self._groups.clear()

    def send(self, topic: str, partition: int, values: Sequence[bytes | None]) -> int:
        """Write ``values`` as one transactional batch; returns its base offset."""
        self._require(State.IN_TRANSACTION)
        self._require_producer_id()
        tp = (topic, partition)
        if not self.tv2 and tp not in self._partitions:
            self._add_partition(topic, partition)
        seq = self._sequences.get(tp, 0)
        batch = build_batch(
            [Record(i, 0, None, v, []) for i, v in enumerate(values)],
            base_timestamp=int(time.time() * 1000),
            compression=0,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=seq,
            transactional=True,
        )
        data = {
            "transactional_id": self.tid,
            "acks": -1,
            "timeout": 30_000,
            "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": batch}]}
            ],
        }
        self.started = True  # TV2: the broker may add the partition even if the answer is lost
        resp = self._call(PRODUCE, data, lambda: self.t.leader(topic, partition), _produce_code)
        self._sequences[tp] = (seq + len(values)) & 0x7FFFFFFF
        return int(resp.responses[0].partition_responses[0].base_offset)

    def send_offsets(
        self,
        group_id: str,
        offsets: Iterable[tuple[str, int, int]],
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
    ) -> None:
        """Commit the consumed ``offsets`` (topic, partition, next offset) with the transaction
        (Java's ``sendOffsetsToTransaction`` with the consumer's group metadata)."""
        self._require(State.IN_TRANSACTION)
        self._require_producer_id()
        ids = {"transactional_id": self.tid, "producer_id": self.producer_id}
        ids["producer_epoch"] = self.producer_epoch
        if not self.tv2 and group_id not in self._groups:
            self._coordinated(ADD_OFFSETS, ids | {"group_id": group_id})
            self._groups.add(group_id)
            self.started = True
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for topic, p, offset in offsets:
            by_topic.setdefault(topic, []).append(
                {"partition_index": p, "committed_offset": offset, "committed_leader_epoch": -1}
            )
        data = ids | {
            "group_id": group_id,
            "generation_id": generation_id,
            "member_id": member_id,
            "group_instance_id": group_instance_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        self.started = True
        self._coordinated(TXN_OFFSET_COMMIT, data, key=group_id, key_type=GROUP)

    def commit(self) -> None:
        self._end(True)

    def abort(self) -> None:
        self._end(False)

    # -- the steps ----------------------------------------------------------------------------

    def _end(self, commit: bool) -> None:
        if commit or self.state is not State.ABORTABLE_ERROR:
            self._require(State.IN_TRANSACTION)
        if self.started:
            data = {"transactional_id": self.tid, "producer_id": self.producer_id}
            data |= {"producer_epoch": self.producer_epoch, "committed": commit}
            try:
                resp = self._coordinated(END_TXN, data)
            except TxnAbortable as exc:
                if commit or exc.code != TRANSACTION_ABORTABLE:
                    raise
                # Java's EndTxnHandler: aborting again would loop; fatal
                self._error = TxnFatal(f"failed to abort: {exc}", exc.code)
                self.state = State.FATAL_ERROR
                raise self._error from exc
            if self.tv2 and int(resp.producer_id) >= 0:  # v5: the bumped id and epoch
                self._new_epoch(int(resp.producer_id), int(resp.producer_epoch))
        self.state = State.READY

    def _add_partition(self, topic: str, partition: int) -> None:
        data = {
            "v3_and_below_transactional_id": self.tid,
            "v3_and_below_producer_id": self.producer_id,
            "v3_and_below_producer_epoch": self.producer_epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [partition]}],
        }
        self._coordinated(ADD_PARTITIONS, data)
        self._partitions.add((topic, partition))
        self.started = True

    def _new_epoch(self, producer_id: int, epoch: int) -> None:
        self.producer_id, self.producer_epoch = producer_id, epoch
        self._sequences.clear()

    def _require(self, *states: State) -> None:
        if self._error is not None and self.state is State.FATAL_ERROR:
            raise self._error
        if self.state is State.ABORTABLE_ERROR and self._error is not None:
            raise self._error
        if self.state not in states:
            raise TxnFatal(f"{self.tid}: not allowed in state {self.state.value}")

    def _require_producer_id(self) -> None:
        """After an abortable InitProducerId and the abort, Java's producer is READY with no
        producer id: its batches are never drained and expire (abortable), so only a new
        producer instance goes on. Here the send fails at once, as that expiry, unsent."""
        if self.producer_id < 0:
            self._error = TxnAbortable(f"{self.tid}: no producer id (InitProducerId failed)")
            self.state = State.ABORTABLE_ERROR
            raise self._error

    def _coordinated(
        self, api_key: int, data: dict[str, Any], key: str | None = None, key_type: int = 1
    ) -> Any:
        key = self.tid if key is None else key
        return self._call(
            api_key,
            data,
            lambda: self.t.coordinator(key, key_type),
            _CODES[api_key],
            forget=lambda: self.t.forget_coordinator(key, key_type),
        )

    def _call(
        self,
        api_key: int,
        data: dict[str, Any],
        target: Callable[[], int],
        code_of: Callable[[Any], int],
        forget: Callable[[], None] | None = None,
    ) -> Any:
        """Send until the answer is DONE; retriable answers and lost connections again, after
        a back-off, until ``op_timeout_s``; anything else raises (and moves the state)."""
        forget = forget or self.t.forget_leaders
        name = _NAMES[api_key]
        deadline = self._clock() + self.op_timeout_s
        while True:
            code = -1
            try:
                resp = self.t.send(target(), api_key, self.versions[api_key], data)
                code = code_of(resp)
                step = step_for(api_key, code)
            except Disconnected:
                step = Step.RECOORDINATE
            except KafkaError as exc:  # FindCoordinator's or Metadata's own error
                step = Step.RECOORDINATE if exc.retriable else Step.FATAL
                code = exc.code
            if step is Step.DONE:
                return resp
            what = f"{name} for {self.tid!r}: error code {code}"
            if step in (Step.RETRY, Step.RECOORDINATE):
                if step is Step.RECOORDINATE or code in (5, 6):  # leader moved
                    forget()
                if self._clock() >= deadline:
                    if api_key == PRODUCE and self.state is State.IN_TRANSACTION:
                        # Java 4.x: a batch past its delivery timeout fails the transaction
                        # with an abortable error (maybeTransitionToErrorState)
                        self._error = TxnAbortable(f"{what}, retried until timed out", code)
                        self.state = State.ABORTABLE_ERROR
                        raise self._error
                    raise TxnTimeout(f"{what}, retried for {self.op_timeout_s:g} s", code)
                self._sleep(self.backoff_s)
                continue
            if step is Step.ABORTABLE and (
                self.state is State.IN_TRANSACTION
                or (api_key == INIT_PID and self.state is State.UNINITIALIZED)
            ):  # Java: ABORTABLE_ERROR may be entered from INITIALIZING too
                self._error = TxnAbortable(what, code)
                self.state = State.ABORTABLE_ERROR
            else:
                cls = TxnFenced if step is Step.FENCED else TxnFatal
                self._error = cls(what, code)
                self.state = State.FATAL_ERROR
            raise self._error


def _produce_code(resp: Any) -> int:
    return int(resp.responses[0].partition_responses[0].error_code)


def _top_code(resp: Any) -> int:
    return int(resp.error_code)


def _worst(codes: Iterable[int]) -> int:
    """The code to act on among per-partition codes (OPERATION_NOT_ATTEMPTED only if alone)."""
    found = [c for c in codes if c]
    real = [c for c in found if c != 55]
    return (real or found or [0])[0]


def _add_partitions_code(resp: Any) -> int:
    return _worst(
        int(p.partition_error_code)
        for t in resp.results_by_topic_v3_and_below
        for p in t.results_by_partition
    )


def _offsets_code(resp: Any) -> int:
    return _worst(int(p.error_code) for t in resp.topics for p in t.partitions)


_CODES: dict[int, Callable[[Any], int]] = {
    INIT_PID: _top_code,
    END_TXN: _top_code,
    ADD_OFFSETS: _top_code,
    ADD_PARTITIONS: _add_partitions_code,
    TXN_OFFSET_COMMIT: _offsets_code,
}
