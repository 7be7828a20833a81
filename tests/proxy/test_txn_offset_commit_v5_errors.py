"""TxnOffsetCommit v5's implicit add of the group's offsets partition, when the coordinator
refuses it: the code every partition gets, as Kafka 4.2 builds it. The add goes through
``AddPartitionsToTxnManager`` (PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH, the rest as is, a
lost or timed-out request NETWORK_EXCEPTION), then ``GroupCoordinatorService`` answers the
failure through ``CoordinatorOperationExceptionHelper.handleOperationException``
(NETWORK_EXCEPTION -> COORDINATOR_LOAD_IN_PROGRESS; UNKNOWN_TOPIC_OR_PARTITION,
NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE; NOT_LEADER_OR_FOLLOWER,
KAFKA_STORAGE_ERROR -> NOT_COORDINATOR; anything else as is).

The coordinator's answer is forced (its ``add_offsets`` replaced) to reach each code; the
fenced case is also reached for real in ``test_tv2_timeout_fencing``. Nothing is committed."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tests.proxy.harness import connect, running_broker
from tests.proxy.test_broker_requests import create
from tests.proxy.test_tv2_wire import commit_offset, init

E = ErrorCode

CASES = [
    (E.producer_fenced, E.invalid_producer_epoch),  # fenced
    (E.concurrent_transactions, E.concurrent_transactions),
    (E.not_coordinator, E.not_coordinator),  # the transaction coordinator moved
    (E.coordinator_not_available, E.coordinator_not_available),
    (E.coordinator_load_in_progress, E.coordinator_load_in_progress),
    (E.invalid_producer_id_mapping, E.invalid_producer_id_mapping),
    (E.network_exception, E.coordinator_load_in_progress),  # the add request lost
    (E.request_timed_out, E.coordinator_not_available),  # timeouts
    (E.not_enough_replicas, E.coordinator_not_available),
    (E.not_leader_or_follower, E.not_coordinator),
    (E.kafka_storage_error, E.not_coordinator),
    (E.unknown_server_error, E.unknown_server_error),
]


@pytest.mark.parametrize(("refused", "answered"), CASES, ids=[c[0].name for c in CASES])
async def test_a_refused_implicit_add_answers_as_kafka(
    monkeypatch: pytest.MonkeyPatch, refused: E, answered: E
) -> None:
    async with running_broker() as (server, port), connect(port) as c:
        broker = server.broker
        assert await create(c, "in") is E.none
        _, pid, epoch = await init(c, "tx")
        asked: list[int] = []

        async def add_offsets(tid: str, p: int, e: int, index: int, tv: int = 0) -> E:
            asked.append(tv)
            return refused

        monkeypatch.setattr(broker.txns, "add_offsets", add_offsets)
        assert await commit_offset(c, "tx", pid, epoch, "g", 1) is answered
        assert asked == [2]  # a TV2 add
        assert broker.groups.groups.get("g") is None  # nothing committed, no group made
