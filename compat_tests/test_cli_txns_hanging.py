"""``kafkad txns find-hanging`` and ``abort`` on a transaction hung on purpose: a transactional
batch with no marker, from a producer id no coordinator knows, written straight into a stopped
broker's partition log (as a lost marker or a coordinator that forgot the transaction leaves
it). Kafka's tool calls it hanging because no transactional id owns the producer id; the open
transaction holds the LSO back until ``abort`` writes the ABORT marker."""

from __future__ import annotations

import json

import pytest
import trio

from compat_tests._support import topic_name
from compat_tests.conftest import BrokerProcess
from compat_tests.test_cli import cli, cli_json
from storage.api import LogConfig, TopicPartition
from storage.backends import open_store
from wire.record_codec import Record, build_batch

TS = 1_700_000_000_000  # 2023: far past any --max-transaction-timeout
PID = 4242


async def write_hung(data_dir: str, topic: str) -> None:
    """Partition 1: producer PID's transactional records at offsets 0-1, never ended."""
    async with open_store(data_dir) as store:
        p1 = await store.open_partition(TopicPartition(topic, 1), LogConfig())
        records = [
            Record(offset_delta=i, timestamp_delta=0, key=None, value=b"hung") for i in (0, 1)
        ]
        batch = build_batch(
            records,
            base_offset=0,
            base_timestamp=TS,
            producer_id=PID,
            producer_epoch=3,
            base_sequence=0,
            transactional=True,
            partition_leader_epoch=0,
        )
        await p1.append(0, 1, TS, batch)


def test_find_hanging_lists_a_hung_transaction_and_abort_ends_it(
    own_broker: BrokerProcess,
) -> None:
    topic = topic_name("cli-hung")
    cli(own_broker.bootstrap, "topics", "create", topic, "--partitions", "2")
    assert own_broker.stop() == 0
    trio.run(write_hung, str(own_broker.data_dir), topic)
    own_broker.start()
    bootstrap = own_broker.bootstrap

    hung = cli(bootstrap, "txns", "find-hanging", "--topic", topic, "--json", expect=1)
    (h,) = json.loads(hung.stdout)
    assert (h["topic"], h["partition"], h["producer_id"], h["producer_epoch"]) == (
        topic,
        1,
        PID,
        3,
    )
    assert h["current_txn_start_offset"] == 0 and h["last_timestamp"] == TS
    table = cli(bootstrap, "txns", "find-hanging", "--topic", topic, expect=1).stdout
    assert table.splitlines()[0].split() == [
        "Topic",
        "Partition",
        "ProducerId",
        "ProducerEpoch",
        "CoordinatorEpoch",
        "StartOffset",
        "LastTimestamp",
        "Duration(min)",
    ]
    assert str(PID) in table.splitlines()[1].split()
    # --broker-id alone (Kafka's other scope): every partition that broker holds
    node = cli_json(bootstrap, "topics", "describe", topic)[0]["leader"]
    by_broker = json.loads(
        cli(bootstrap, "txns", "find-hanging", "--broker-id", str(node), "--json", expect=1).stdout
    )
    assert [(x["topic"], x["partition"], x["producer_id"]) for x in by_broker] == [(topic, 1, PID)]
    (p,) = cli_json(
        bootstrap,
        "txns",
        "describe-producers",
        "--broker-id",
        str(node),
        "--topic",
        topic,
        "--partition",
        "1",
    )
    assert (p["producer_id"], p["current_txn_start_offset"]) == (PID, 0)
    # partition 0 alone has nothing hanging
    assert cli_json(bootstrap, "txns", "find-hanging", "--topic", topic, "--partition", "0") == []
    # the hung transaction holds the LSO of partition 1 at its start
    held = json.loads(
        cli(bootstrap, "verify", topic, "--partition", "1", "--json", expect=1).stdout
    )
    assert held["partitions"][0]["last_stable_offset"] == 0
    assert "held by a transaction past its timeout" in json.dumps(held["findings"])

    done = cli_json(
        bootstrap, "txns", "abort", "--topic", topic, "--partition", "1", "--start-offset", "0"
    )
    assert (done["producer_id"], done["producer_epoch"], done["result"]) == (PID, 3, "ABORT")
    assert cli_json(bootstrap, "txns", "find-hanging", "--topic", topic) == []
    moved = cli_json(bootstrap, "verify", topic, "--partition", "1")
    assert moved["clean"] is True
    assert (
        moved["partitions"][0]["last_stable_offset"]
        == moved["partitions"][0]["high_watermark"]
        == 3
    )
    assert (
        cli(bootstrap, "consume", topic, "--from-beginning", "--isolation", "read_committed").stdout
        == ""
    )


def test_force_terminate_fences_the_producer_and_aborts_its_transaction(bootstrap: str) -> None:
    """``kafkad txns forceTerminateTransaction --transactionalId`` (Kafka 4.1's, KIP-939): an
    InitProducerId without producer id or epoch, as Admin.fenceProducers sends it."""
    from kafkad.client.cluster import Client
    from kafkad.client.errors import KafkaError
    from kafkad.client.producing import Message, Producer

    topic, tid = topic_name("cli-force"), topic_name("cli-force-tid")
    cli(bootstrap, "topics", "create", topic)
    with Client(bootstrap, 10) as client:
        producer = Producer(client, tid, transaction_timeout_ms=900_000)
        base = producer.send(topic, 0, [Message(None, b"open")])
        pid, epoch = producer.producer_id, producer.producer_epoch
        before = cli_json(bootstrap, "txns", "describe", "--transactional-id", tid)
        assert before["state"] == "Ongoing"

        done = cli_json(bootstrap, "txns", "forceTerminateTransaction", "--transactionalId", tid)
        assert done["transactional_id"] == tid and done["producer_id"] == pid
        assert done["producer_epoch"] > epoch
        after = cli_json(bootstrap, "txns", "describe", "--transactional-id", tid)
        assert (after["state"], after["producer_epoch"]) == ("Empty", done["producer_epoch"])
        # the ABORT marker moved the LSO past the open records; the old producer is fenced
        (p0,) = cli_json(bootstrap, "verify", topic)["partitions"]
        assert p0["last_stable_offset"] == p0["high_watermark"] == base + 2
        with pytest.raises(KafkaError) as fenced:
            producer.send(topic, 0, [Message(None, b"zombie")])
        assert fenced.value.code in (47, 90)  # INVALID_PRODUCER_EPOCH / PRODUCER_FENCED
    # the kafkad-style spelling of the same verb and option
    again = cli(bootstrap, "txns", "force-terminate", "--transactional-id", tid).stdout
    assert again.split()[:3] == ["TransactionalId", "ProducerId", "ProducerEpoch"]
