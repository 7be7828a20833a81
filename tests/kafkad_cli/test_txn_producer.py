"""The raw-protocol transactional producer (``kafkad/client/txn_producer.py``) against recorded
replies: what it sends in the TV2 and the classic flow, and what it does with each answer
(retry, look the coordinator up again, abortable, fenced), as Java 4.x's TransactionManager."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkad.client.build import build, response_class
from kafkad.client.txn_producer import (
    State,
    TxnAbortable,
    TxnFatal,
    TxnFenced,
    TxnProducer,
    TxnTimeout,
)
from kafkad.client.txn_rules import Step, step_for
from kafkad.client.txn_transport import Disconnected
from wire.batch import read_batch_header

E = ErrorCode
NAMES = {0: "produce", 22: "init", 24: "add_partitions", 25: "add_offsets", 26: "end"}
NAMES |= {28: "offsets"}


def produce_reply(code: E = E.none, base: int = 0) -> dict[str, Any]:
    part = {"index": 0, "error_code": code, "base_offset": base}
    return {"responses": [{"name": "t", "partition_responses": [part]}]}


def pid_reply(pid: int, epoch: int, code: E = E.none) -> dict[str, Any]:
    return {"error_code": code, "producer_id": pid, "producer_epoch": epoch}


def offsets_reply(code: E = E.none) -> dict[str, Any]:
    parts = [{"partition_index": 0, "error_code": code}]
    return {"topics": [{"name": "in", "partitions": parts}]}


def add_partitions_reply(code: E = E.none) -> dict[str, Any]:
    parts = [{"partition_index": 0, "partition_error_code": code}]
    return {"results_by_topic_v3_and_below": [{"name": "t", "results_by_partition": parts}]}


class Recorded:
    """A transport answering from a script of (api name, reply dict | exception)."""

    def __init__(self, script: list[tuple[str, Any]]) -> None:
        self.script = list(script)
        self.sent: list[tuple[str, int, int, dict[str, Any]]] = []  # name, node, version, data
        self.lookups: list[tuple[str, int]] = []
        self.forgotten = 0
        self.coordinator_node = 1

    def coordinator(self, key: str, key_type: int) -> int:
        self.lookups.append((key, key_type))
        return self.coordinator_node

    def forget_coordinator(self, key: str, key_type: int) -> None:
        self.forgotten += 1

    def leader(self, topic: str, partition: int) -> int:
        return 2

    def forget_leaders(self) -> None:
        self.forgotten += 1

    def send(self, node: int, api_key: int, version: int, data: dict[str, Any]) -> Any:
        name = NAMES[api_key]
        self.sent.append((name, node, version, data))
        want, reply = self.script.pop(0)
        assert want == name, f"sent {name}, the script expected {want}"
        if isinstance(reply, Exception):
            raise reply
        return build(response_class(api_key, version), reply)

    def names(self) -> list[str]:
        return [s[0] for s in self.sent]


def producer(script: list[tuple[str, Any]], tv2: bool = True) -> tuple[TxnProducer, Recorded]:
    t = Recorded([("init", pid_reply(7, 0)), *script])
    p = TxnProducer(t, "tid", tv2=tv2, op_timeout_s=5.0, sleep=lambda s: None)
    p.init_transactions()
    return p, t


def batch_of(sent: tuple[str, int, int, dict[str, Any]]) -> Any:
    records = sent[3]["topic_data"][0]["partition_data"][0]["records"]
    return read_batch_header(records)


def test_tv2_flow_takes_the_bumped_epoch_from_end_txn() -> None:
    p, t = producer(
        [
            ("produce", produce_reply(base=10)),
            ("offsets", offsets_reply()),
            ("end", pid_reply(7, 1)),
            ("produce", produce_reply(base=12)),
            ("end", pid_reply(7, 2)),
        ]
    )
    assert t.sent[0][2] == 5 and t.sent[0][3]["producer_id"] == -1
    p.begin()
    assert p.send("t", 0, [b"a", b"b"]) == 10
    p.send_offsets("g", [("in", 0, 5)], generation_id=3, member_id="m")
    p.commit()
    assert (p.producer_id, p.producer_epoch) == (7, 1)
    p.begin()
    p.send("t", 0, [b"c"])
    p.commit()
    assert t.names() == ["init", "produce", "offsets", "end", "produce", "end"]
    versions = [s[2] for s in t.sent]
    assert versions == [5, 12, 5, 5, 12, 5]
    first, second = batch_of(t.sent[1]), batch_of(t.sent[4])
    assert (first.producer_epoch, first.base_sequence, first.is_transactional) == (0, 0, True)
    assert (second.producer_epoch, second.base_sequence) == (1, 0)  # new epoch: sequence 0
    offsets = t.sent[2][3]
    assert (offsets["generation_id"], offsets["member_id"], offsets["producer_epoch"]) == (
        3,
        "m",
        0,
    )
    assert t.sent[3][3]["producer_epoch"] == 0 and t.sent[5][3]["producer_epoch"] == 1
    assert ("g", 0) in t.lookups  # TxnOffsetCommit goes to the group coordinator


def test_classic_flow_adds_partitions_and_offsets_and_keeps_the_epoch() -> None:
    p, t = producer(
        [
            ("add_partitions", add_partitions_reply()),
            ("produce", produce_reply()),
            ("produce", produce_reply()),
            ("add_offsets", {"error_code": E.none}),
            ("offsets", offsets_reply()),
            ("end", pid_reply(-1, -1)),
            ("add_partitions", add_partitions_reply()),
            ("produce", produce_reply()),
            ("end", pid_reply(-1, -1)),
        ],
        tv2=False,
    )
    p.begin()
    p.send("t", 0, [b"a", b"b"])
    p.send("t", 0, [b"c"])
    p.send_offsets("g", [("in", 0, 5)])
    p.commit()
    p.begin()
    p.send("t", 0, [b"d"])
    p.commit()
    assert [s[2] for s in t.sent] == [5, 3, 11, 11, 4, 4, 4, 3, 11, 4]
    assert (p.producer_id, p.producer_epoch) == (7, 0)
    assert [batch_of(t.sent[i]).base_sequence for i in (2, 3, 8)] == [0, 2, 3]


def test_an_exhausted_epoch_moves_to_the_producer_id_end_txn_names() -> None:
    p, t = producer(
        [("produce", produce_reply()), ("end", pid_reply(8, 0)), ("produce", produce_reply())]
    )
    p.begin()
    p.send("t", 0, [b"a", b"b"])
    p.commit()
    p.begin()
    p.send("t", 0, [b"c"])
    batch = batch_of(t.sent[-1])
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (8, 0, 0)


def test_a_transaction_that_sent_nothing_ends_without_end_txn() -> None:
    p, t = producer([])
    p.begin()
    p.commit()
    p.begin()
    p.abort()
    assert t.names() == ["init"]


def test_retriable_answers_and_lost_connections_are_retried() -> None:
    lost = Disconnected("reset")
    p, t = producer(
        [
            ("produce", produce_reply(E.not_enough_replicas)),
            ("produce", lost),
            ("produce", produce_reply(E.duplicate_sequence_number)),
            ("end", pid_reply(-1, -1, E.concurrent_transactions)),
            ("end", pid_reply(-1, -1, E.not_coordinator)),
            ("end", lost),  # handled, answer lost: the retry carries the pre-bump epoch
            ("end", pid_reply(7, 1)),
        ]
    )
    p.begin()
    p.send("t", 0, [b"a"])
    p.commit()
    produced = [s[3]["topic_data"][0]["partition_data"][0]["records"] for s in t.sent[1:4]]
    assert produced[0] == produced[1] == produced[2]  # the same batch, the same sequence
    assert {s[3]["producer_epoch"] for s in t.sent[4:]} == {0}
    assert (p.producer_epoch, p.state) == (1, State.READY)
    assert t.forgotten >= 2


def test_stale_epoch_produce_is_abortable_and_the_abort_is_fenced() -> None:
    """Java (KIP-588): a Produce answered INVALID_PRODUCER_EPOCH (what the broker tells a stale
    epoch since 2.7) fails the batch with InvalidProducerEpochException, an abortable error;
    the abort's EndTxn is then told PRODUCER_FENCED, which is fatal."""
    p, t = producer(
        [
            ("produce", produce_reply(E.invalid_producer_epoch)),
            ("end", pid_reply(-1, -1, E.producer_fenced)),
        ]
    )
    p.begin()
    with pytest.raises(TxnAbortable):
        p.send("t", 0, [b"late"])
    assert p.state is State.ABORTABLE_ERROR
    with pytest.raises(TxnFenced):
        p.abort()
    with pytest.raises(TxnFenced):
        p.begin()
    assert t.names() == ["init", "produce", "end"]


def test_fenced_produce_is_fatal_and_stays_so() -> None:
    p, t = producer([("produce", produce_reply(E.producer_fenced))])
    p.begin()
    with pytest.raises(TxnFenced):
        p.send("t", 0, [b"late"])
    with pytest.raises(TxnFenced):
        p.abort()
    assert t.names() == ["init", "produce"]


def test_transaction_abortable_while_aborting_is_fatal() -> None:
    """Java's EndTxnHandler: TRANSACTION_ABORTABLE in answer to an abort is fatal (aborting
    again would loop)."""
    p, _ = producer(
        [("produce", produce_reply()), ("end", pid_reply(-1, -1, E.transaction_abortable))]
    )
    p.begin()
    p.send("t", 0, [b"a"])
    with pytest.raises(TxnFatal):
        p.abort()
    assert p.state is State.FATAL_ERROR
    with pytest.raises(TxnFatal):
        p.begin()


def test_produce_retried_past_the_timeout_is_abortable() -> None:
    """Java 4.x: a batch that exhausted its retries (delivery timeout) fails with a retriable
    error, which ``maybeTransitionToErrorState`` turns into an abortable one."""
    now = [0.0]
    t = Recorded([("produce", produce_reply(E.not_enough_replicas))] * 3)
    p = TxnProducer(t, "tid", op_timeout_s=1.0, sleep=lambda s: now.__setitem__(0, now[0] + 0.5))
    p._clock = lambda: now[0]
    p.producer_id, p.producer_epoch, p.state = 7, 0, State.READY
    p.begin()
    with pytest.raises(TxnAbortable):
        p.send("t", 0, [b"a"])
    assert p.state is State.ABORTABLE_ERROR


def test_fenced_end_txn() -> None:
    p, _ = producer([("produce", produce_reply()), ("end", pid_reply(-1, -1, E.producer_fenced))])
    p.begin()
    p.send("t", 0, [b"a"])
    with pytest.raises(TxnFenced):
        p.commit()
    assert p.state is State.FATAL_ERROR


def test_abortable_offset_commit_then_abort_takes_the_new_epoch() -> None:
    p, t = producer(
        [
            ("produce", produce_reply()),
            ("offsets", offsets_reply(E.illegal_generation)),
            ("end", pid_reply(7, 1)),
        ]
    )
    p.begin()
    p.send("t", 0, [b"a"])
    with pytest.raises(TxnAbortable):
        p.send_offsets("g", [("in", 0, 1)], 1, "m")
    with pytest.raises(TxnAbortable):
        p.commit()
    p.abort()
    assert t.sent[-1][3]["committed"] is False and p.producer_epoch == 1
    assert p.state is State.READY


def test_retries_end_when_the_operation_time_runs_out() -> None:
    now = [0.0]
    t = Recorded(
        [("init", pid_reply(7, 0))] + [("init", pid_reply(-1, -1, E.concurrent_transactions))] * 3
    )
    t.script.pop(0)
    p = TxnProducer(t, "tid", op_timeout_s=1.0, sleep=lambda s: now.__setitem__(0, now[0] + 0.5))
    p._clock = lambda: now[0]
    with pytest.raises(TxnTimeout):
        p.init_transactions()
    assert len(t.sent) == 3


@pytest.mark.parametrize(
    ("api", "code", "step"),
    [
        (26, E.invalid_producer_epoch, Step.FENCED),
        (26, E.transaction_abortable, Step.ABORTABLE),
        (26, E.coordinator_load_in_progress, Step.RETRY),
        (26, E.invalid_txn_state, Step.FATAL),
        (28, E.request_timed_out, Step.RECOORDINATE),
        (28, E.unknown_member_id, Step.ABORTABLE),
        (0, E.not_enough_replicas, Step.RETRY),
        (0, E.out_of_order_sequence_number, Step.ABORTABLE),
        (0, E.message_too_large, Step.ABORTABLE),
        (24, E.operation_not_attempted, Step.RETRY),
        (22, E.concurrent_transactions, Step.RETRY),
        (22, E.producer_fenced, Step.FENCED),
        # Java 4.x: maybeTransitionToErrorState, and the handlers' INVALID_PRODUCER_ID_MAPPING
        (0, E.invalid_producer_epoch, Step.ABORTABLE),
        (0, E.invalid_txn_state, Step.ABORTABLE),
        (0, E.producer_fenced, Step.FENCED),
        (0, E.invalid_producer_id_mapping, Step.FATAL),
        (0, E.unsupported_version, Step.FATAL),
        (24, E.invalid_producer_id_mapping, Step.FATAL),
        (25, E.invalid_producer_id_mapping, Step.FATAL),
        (25, E.invalid_txn_state, Step.FATAL),
        (26, E.invalid_producer_id_mapping, Step.FATAL),
    ],
)
def test_steps_follow_the_java_handlers(api: int, code: E, step: Step) -> None:
    assert step_for(api, code) is step


@pytest.mark.parametrize(
    "code",
    [
        E.transaction_abortable,
        E.transactional_id_authorization_failed,
        E.cluster_authorization_failed,
    ],
)
def test_abortable_init_producer_id_as_java_4(code: E) -> None:
    """Java 4.x's InitProducerIdHandler: these move to ABORTABLE_ERROR (from INITIALIZING),
    not to the fatal state; the abort sends nothing (no transaction started) and, with no
    producer id, nothing can be sent afterwards: a new instance is the way on."""
    t = Recorded([("init", pid_reply(-1, -1, code))])
    p = TxnProducer(t, "tid", op_timeout_s=5.0, sleep=lambda s: None)
    with pytest.raises(TxnAbortable):
        p.init_transactions()
    assert p.state is State.ABORTABLE_ERROR
    p.abort()
    assert p.state is State.READY
    p.begin()
    with pytest.raises(TxnAbortable):
        p.send("t", 0, [b"x"])
    assert t.names() == ["init"]


def test_unexpected_init_producer_id_error_is_fatal() -> None:
    t = Recorded([("init", pid_reply(-1, -1, E.invalid_txn_state))])
    p = TxnProducer(t, "tid", op_timeout_s=5.0, sleep=lambda s: None)
    with pytest.raises(TxnFatal):
        p.init_transactions()
    assert p.state is State.FATAL_ERROR
