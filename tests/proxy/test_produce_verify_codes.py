"""What a transactional Produce answers when the coordinator refuses its partition, as Kafka
4.2's ReplicaManager (``postVerificationCallback``) maps it: NETWORK_EXCEPTION and the
coordinator codes become NOT_ENOUGH_REPLICAS (retried without a metadata refresh);
CONCURRENT_TRANSACTIONS too for a verification (Produce v3-11), but not for a TV2 add (v12+,
``supportsEpochBump``), where it is common while the previous transaction's markers are being
written and the client retries it as is. The coordinator's answer is forced to reach each case
(the add for v12, the verification for v11)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tests.proxy.harness import connect, running_broker
from tests.proxy.test_broker_requests import create
from tests.proxy.test_tv2_wire import init, produce

E = ErrorCode


@pytest.mark.parametrize(
    ("refused", "v11", "v12"),
    [
        (E.concurrent_transactions, E.not_enough_replicas, E.concurrent_transactions),
        (E.coordinator_load_in_progress, E.not_enough_replicas, E.not_enough_replicas),
        (E.not_coordinator, E.not_enough_replicas, E.not_enough_replicas),
        (E.producer_fenced, E.invalid_producer_epoch, E.invalid_producer_epoch),
    ],
)
async def test_refused_partition_codes_by_produce_version(
    monkeypatch: pytest.MonkeyPatch, refused: E, v11: E, v12: E
) -> None:
    async with running_broker() as (server, port), connect(port) as c:
        broker = server.broker
        assert await create(c, "in") is E.none
        _, pid, epoch = await init(c, "tx")

        async def add_partitions(*args: object) -> E:
            return refused

        monkeypatch.setattr(broker.txns, "add_partitions", add_partitions)
        monkeypatch.setattr(broker, "txn_verifier", lambda *args: refused)
        assert await produce(c, "tx", pid, epoch, 0, v=12) is v12
        assert await produce(c, "tx", pid, epoch, 0, v=11) is v11
