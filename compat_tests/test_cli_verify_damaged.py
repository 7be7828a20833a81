"""``kafkad verify`` on data dirs damaged on purpose: batches a correct broker would never
write (a repeated and a skipped sequence) and an aborted-transaction index that lost an abort
are written straight into a stopped broker's files with the storage API, then the broker is
started on them and ``verify`` must name each damage (a correct log is checked clean in
test_cli.py)."""

from __future__ import annotations

import json

import trio

from compat_tests._support import topic_name
from compat_tests.conftest import BrokerProcess
from compat_tests.test_cli import cli, cli_json
from storage.api import LogConfig, TopicPartition
from storage.backends import open_store
from storage.producer_snapshot import encode_snapshot
from wire.record_codec import Record, build_batch, build_control_batch

TS = 1_700_000_000_000


def records(n: int) -> list[Record]:
    return [Record(offset_delta=i, timestamp_delta=0, key=None, value=b"v%d" % i) for i in range(n)]


def data_batch(base: int, pid: int, seq: int, n: int, *, transactional: bool = False) -> bytes:
    return build_batch(
        records(n),
        base_offset=base,
        base_timestamp=TS,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        transactional=transactional,
        partition_leader_epoch=0,
    )


async def write_damage(data_dir: str, topic: str) -> None:
    """Partition 0: producer 1000 writes sequences 0-1, again 0-1 (a duplicate the broker should
    have answered from its dedupe window), then 10-11 (a gap). Partition 1: producer 2000's
    transaction 0-1 ends with an ABORT marker, and a producer snapshot taken after the marker
    holds no aborted-transaction entry, so the broker serves the aborted records to
    read_committed readers."""
    async with open_store(data_dir) as store:
        p0 = await store.open_partition(TopicPartition(topic, 0), LogConfig())
        for base, seq in ((0, 0), (2, 0), (4, 10)):
            await p0.append(base, base + 1, TS, data_batch(base, 1000, seq, 2))
        p1 = await store.open_partition(TopicPartition(topic, 1), LogConfig())
        await p1.append(0, 1, TS, data_batch(0, 2000, 0, 2, transactional=True))
        marker = build_control_batch(2000, 0, False, 0, 2, TS, partition_leader_epoch=0)
        await p1.append(2, 2, TS, marker)
        await p1.write_producer_snapshot(3, encode_snapshot(3, [], []))


def test_verify_finds_a_repeated_and_a_skipped_sequence_and_an_aborted_read(
    own_broker: BrokerProcess,
) -> None:
    topic = topic_name("cli-verify-damaged")
    cli(own_broker.bootstrap, "topics", "create", topic, "--partitions", "2")
    assert own_broker.stop() == 0
    trio.run(write_damage, str(own_broker.data_dir), topic)
    own_broker.start()
    bootstrap = own_broker.bootstrap

    proc = cli(bootstrap, "verify", topic, "--json", expect=1)
    report = json.loads(proc.stdout)
    assert report["clean"] is False
    found = {(f["kind"], f["partition"]) for f in report["findings"]}
    assert found == {
        ("duplicate_sequence", f"{topic}-0"),
        ("out_of_order_sequence", f"{topic}-0"),
        ("aborted_read", f"{topic}-1"),
    }
    details = {f["kind"]: f["detail"] for f in report["findings"] if f["kind"] != "aborted_read"}
    assert "batch at offset 2 has sequence 0, expected 2" in details["duplicate_sequence"]
    assert "batch at offset 4 has sequence 10, expected 2" in details["out_of_order_sequence"]
    aborted = sorted(f["detail"] for f in report["findings"] if f["kind"] == "aborted_read")
    assert aborted == [
        f"read_committed returned offset {o} of an aborted transaction" for o in (0, 1)
    ]
    # the table form names the same findings and the exit status is the same
    text = cli(bootstrap, "verify", topic, expect=1).stdout
    assert "duplicate_sequence" in text and "aborted_read" in text
    # one partition at a time: partition 1 alone has only the aborted read
    only1 = cli(bootstrap, "verify", topic, "--partition", "1", "--json", expect=1)
    kinds = {f["kind"] for f in json.loads(only1.stdout)["findings"]}
    assert kinds == {"aborted_read"}
    assert cli_json(bootstrap, "topics", "describe", topic)[0]["leader"] >= 0
