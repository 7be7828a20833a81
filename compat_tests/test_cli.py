"""The ``kafkad`` client CLI (kafkad/cli) against a live broker: each verb's output and exit
status, ``--json`` parsed back, and one-line errors (no traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from compat_tests._support import topic_name
from compat_tests.conftest import REPO

TIMEOUT_S = 60


def cli(
    bootstrap: str, *args: str, stdin: str = "", expect: int | None = 0
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "proxy.cli", *args, "--bootstrap-server", bootstrap],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=TIMEOUT_S,
    )
    if expect is not None:
        assert proc.returncode == expect, f"kafkad {args} exited {proc.returncode}: {proc.stderr}"
    return proc


def cli_json(bootstrap: str, *args: str, stdin: str = "") -> Any:
    return json.loads(cli(bootstrap, *args, "--json", stdin=stdin).stdout)


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_topics_create_list_describe_delete(bootstrap: str) -> None:
    topic = topic_name("cli-topics")
    created = cli_json(bootstrap, "topics", "create", topic, "--partitions", "3")
    assert created == {"topic": topic, "partitions": 3, "created": True}
    again = cli(bootstrap, "topics", "create", topic, expect=1)
    assert "TOPIC_ALREADY_EXISTS" in again.stderr and "Traceback" not in again.stderr
    cli(bootstrap, "topics", "create", topic, "--if-not-exists")
    listed = cli_json(bootstrap, "topics", "list")
    assert {"topic": topic, "partitions": 3} in listed
    assert topic in cli(bootstrap, "topics", "list").stdout.split()
    described = cli_json(bootstrap, "topics", "describe", topic)
    assert [d["partition"] for d in described] == [0, 1, 2]
    assert all(d["leader"] >= 0 and d["replicas"] for d in described)
    table = cli(bootstrap, "topics", "describe", topic).stdout.splitlines()
    assert table[0].split() == ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"]
    assert len(table) == 4
    assert cli_json(bootstrap, "topics", "delete", topic) == {"deleted": [topic], "failed": []}
    gone = cli(bootstrap, "topics", "describe", topic, expect=1)
    assert f"topic {topic!r}: UNKNOWN_TOPIC_OR_PARTITION" in gone.stderr


def test_topic_configs_get_set_delete(bootstrap: str) -> None:
    topic = topic_name("cli-configs")
    cli(bootstrap, "topics", "create", topic, "--partitions", "1", "--config", "retention.ms=12345")
    got = {c["name"]: c for c in cli_json(bootstrap, "topics", "configs", "get", topic)}
    assert got["retention.ms"]["value"] == "12345"
    assert got["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    cli(bootstrap, "topics", "configs", "set", topic, "retention.ms=999", "max.message.bytes=2000")
    got = {
        c["name"]: c for c in cli_json(bootstrap, "topics", "configs", "get", topic, "retention.ms")
    }
    assert list(got) == ["retention.ms"] and got["retention.ms"]["value"] == "999"
    cli(bootstrap, "topics", "configs", "delete", topic, "retention.ms")
    got = {c["name"]: c for c in cli_json(bootstrap, "topics", "configs", "get", topic)}
    assert got["retention.ms"]["source"] == "DEFAULT_CONFIG"
    assert got["max.message.bytes"]["value"] == "2000"
    bad = cli(bootstrap, "topics", "configs", "set", topic, "retention.ms=soon", expect=1)
    assert "INVALID_CONFIG" in bad.stderr


def test_produce_consume_round_trip_with_keys_headers_and_compression(bootstrap: str) -> None:
    topic = topic_name("cli-roundtrip")
    cli(bootstrap, "topics", "create", topic, "--partitions", "2")
    lines = "".join(f"k{i}:v{i}\n" for i in range(6)) + "no-key\n"
    written = cli_json(
        bootstrap,
        "produce",
        topic,
        "--key-separator",
        ":",
        "--header",
        "h=1",
        "--header",
        "g=x=y",
        "--compression",
        "gzip",
        "--partition",
        "1",
        stdin=lines,
    )
    assert written["transaction"] == "written" and written["producer_id"] >= 0
    assert written["partitions"] == [{"partition": 1, "base_offset": 0, "records": 7}]
    got = json_lines(cli(bootstrap, "consume", topic, "--from-beginning", "--json").stdout)
    assert [(r["partition"], r["offset"], r["key"], r["value"]) for r in got] == [
        (1, i, f"k{i}", f"v{i}") for i in range(6)
    ] + [(1, 6, None, "no-key")]
    assert all(r["headers"] == [["h", "1"], ["g", "x=y"]] for r in got)
    text = cli(
        bootstrap, "consume", topic, "--from-beginning", "--print-key", "--key-separator", "="
    ).stdout
    assert text.splitlines()[:2] == ["k0=v0", "k1=v1"]
    assert cli(
        bootstrap, "consume", topic, "--offset", "5", "--partition", "1"
    ).stdout.splitlines() == ["v5", "no-key"]
    assert (
        len(
            cli(
                bootstrap, "consume", topic, "--from-beginning", "--max-messages", "2"
            ).stdout.splitlines()
        )
        == 2
    )
    assert cli(bootstrap, "consume", topic).stdout == ""  # default start: the end
    ts = got[3]["timestamp"]
    from_ts = json_lines(cli(bootstrap, "consume", topic, "--timestamp", str(ts), "--json").stdout)
    assert from_ts[0]["offset"] == 0  # one batch: every record carries its timestamp


def test_keyed_records_land_on_the_partition_kafka_would_pick(bootstrap: str) -> None:
    topic = topic_name("cli-keyed")
    cli(bootstrap, "topics", "create", topic, "--partitions", "3")
    cli(bootstrap, "produce", topic, "--key-separator", ":", stdin="21:a\nfoobar:b\nabc:c\n")
    got = {
        r["key"]: r["partition"]
        for r in json_lines(cli(bootstrap, "consume", topic, "--from-beginning", "--json").stdout)
    }
    # (murmur2 & 0x7fffffff) % 3 for Kafka's UtilsTest values
    assert got == {
        "21": (-973932308 & 0x7FFFFFFF) % 3,
        "foobar": (-790332482 & 0x7FFFFFFF) % 3,
        "abc": 479470107 % 3,
    }


def test_produce_splits_input_larger_than_a_request_into_batches(bootstrap: str) -> None:
    # 2 MB of lines, over the broker's 1 MiB message.max.bytes as one batch; inside one
    # transaction, so the batches share the producer's sequence run.
    topic = topic_name("cli-big")
    cli(bootstrap, "topics", "create", topic, "--partitions", "1")
    lines = "".join(f"{i:07d}{'x' * 993}\n" for i in range(2000))
    args = ("produce", topic, "--transactional-id", topic_name("cli-big-tid"))
    done = cli_json(bootstrap, *args, stdin=lines)
    assert done["partitions"] == [{"partition": 0, "base_offset": 0, "records": 2000}]
    read = ("consume", topic, "--from-beginning", "--isolation=read_committed", "--json")
    got = json_lines(cli(bootstrap, *read).stdout)
    assert [r["value"][:7] for r in got] == [f"{i:07d}" for i in range(2000)]
    assert cli_json(bootstrap, "verify", topic)["clean"] is True


def test_transactional_produce_abort_is_invisible_at_read_committed(bootstrap: str) -> None:
    topic = topic_name("cli-txn")
    tid = topic_name("cli-tid")
    cli(bootstrap, "topics", "create", topic, "--partitions", "1")
    aborted = cli_json(
        bootstrap, "produce", topic, "--transactional-id", tid, "--abort", stdin="gone1\ngone2\n"
    )
    assert aborted["transaction"] == "aborted"
    committed = cli_json(bootstrap, "produce", topic, "--transactional-id", tid, stdin="kept\n")
    assert committed["transaction"] == "committed"
    assert committed["producer_epoch"] > aborted["producer_epoch"]
    rc = cli(
        bootstrap, "consume", topic, "--from-beginning", "--isolation", "read_committed"
    ).stdout
    assert rc.splitlines() == ["kept"]
    ru = cli(bootstrap, "consume", topic, "--from-beginning").stdout
    assert ru.splitlines() == ["gone1", "gone2", "kept"]
    batches = cli(
        bootstrap,
        "consume",
        topic,
        "--from-beginning",
        "--show-batches",
        "--isolation",
        "read_committed",
    )
    lines = batches.stdout.splitlines()
    assert any("marker ABORT" in ln for ln in lines) and any("marker COMMIT" in ln for ln in lines)
    assert "(aborted: skipped at read_committed)" in lines[0]
    as_json = [
        d["batch"]
        for d in json_lines(
            cli(bootstrap, "consume", topic, "--from-beginning", "--show-batches", "--json").stdout
        )
        if "batch" in d
    ]
    assert [
        (b["transactional"], b["control"], b["marker"], b["base_sequence"]) for b in as_json
    ] == [
        (True, False, None, 0),
        (True, True, "ABORT", -1),
        (True, False, None, 0),
        (True, True, "COMMIT", -1),
    ]
    assert as_json[0]["producer_id"] == aborted["producer_id"]


def test_errors_are_one_line_for_an_unreachable_broker_and_an_unknown_topic(bootstrap: str) -> None:
    down = cli("127.0.0.1:1", "topics", "list", expect=1)
    assert down.stderr.startswith("kafkad: cannot reach a broker at 127.0.0.1:1")
    assert "Traceback" not in down.stderr and len(down.stderr.splitlines()) == 1
    missing = cli(bootstrap, "consume", "no-such-topic-here", expect=1)
    why = "UNKNOWN_TOPIC_OR_PARTITION (no such topic or partition)"
    assert missing.stderr == f"kafkad: topic 'no-such-topic-here': {why}\n"
    usage = cli(bootstrap, "produce", "x", "--compression", "brotli", expect=2)
    assert "not a codec" in usage.stderr
    assert cli(bootstrap, "topics", "bogus-verb", expect=2).returncode == 2


def test_an_endpoint_that_is_not_kafka_is_one_readable_line() -> None:
    import socket
    import threading

    with socket.create_server(("127.0.0.1", 0)) as server:

        def answer_http() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(1024)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        threading.Thread(target=answer_http, daemon=True).start()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        proc = cli(address, "topics", "list", expect=1)
    assert proc.stderr.startswith(f"kafkad: {address} does not answer like a Kafka broker")
    assert len(proc.stderr.splitlines()) == 1


def open_transaction(
    bootstrap: str, topic: str, tid: str, value: bytes = b"open"
) -> tuple[int, int, int]:
    """A transaction written with the raw protocol (InitProducerId, AddPartitionsToTxn, Produce)
    and never ended, with a 15-minute timeout: (base offset, producer id, epoch)."""
    from kafkad.client.cluster import Client
    from kafkad.client.producing import Message, Producer

    with Client(bootstrap, 10) as client:
        producer = Producer(client, tid, transaction_timeout_ms=900_000)
        base = producer.send(topic, 0, [Message(None, value)])
        return base, producer.producer_id, producer.producer_epoch


def abort_at(bootstrap: str, topic: str, start_offset: int, *flags: str) -> Any:
    """``kafkad txns abort`` of partition 0's open transaction starting at ``start_offset``."""
    args = ("txns", "abort", "--topic", topic, "--partition", "0")
    return cli_json(bootstrap, *args, "--start-offset", str(start_offset), *flags)


def test_txns_list_describe_and_describe_producers(bootstrap: str) -> None:
    topic = topic_name("cli-txns")
    tid = topic_name("cli-txns-tid")
    cli(bootstrap, "topics", "create", topic, "--partitions", "1")
    cli(bootstrap, "produce", topic, "--transactional-id", tid, stdin="done\n")
    _, pid, epoch = open_transaction(bootstrap, topic, tid)
    listed = [t for t in cli_json(bootstrap, "txns", "list") if t["transactional_id"] == tid]
    assert listed == [
        {
            "transactional_id": tid,
            "coordinator": listed[0]["coordinator"],
            "producer_id": pid,
            "state": "Ongoing",
        }
    ]
    # KIP-1152: the pattern matches whole ids (ListTransactions v2)
    by_pattern = cli_json(bootstrap, "txns", "list", "--transactional-id-pattern", f"{tid}|none")
    assert [t["transactional_id"] for t in by_pattern] == [tid]
    assert cli_json(bootstrap, "txns", "list", "--transactional-id-pattern", tid[:-1]) == []
    header = cli(bootstrap, "txns", "list").stdout.splitlines()[0].split()
    assert header == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    d = cli_json(bootstrap, "txns", "describe", "--transactional-id", tid)
    assert (d["producer_id"], d["producer_epoch"], d["state"], d["partitions"]) == (
        pid,
        epoch,
        "Ongoing",
        [f"{topic}-0"],
    )
    assert d["timeout_ms"] == 900_000 and d["duration_ms"] >= 0
    producers = cli_json(
        bootstrap, "txns", "describe-producers", "--topic", topic, "--partition", "0"
    )
    (mine,) = [p for p in producers if p["producer_id"] == pid]
    assert (
        mine["producer_epoch"] == epoch and mine["current_txn_start_offset"] == 2
    )  # after data+COMMIT
    unknown = cli(bootstrap, "txns", "describe", "--transactional-id", "no-such-tid", expect=1)
    assert "TRANSACTIONAL_ID_NOT_FOUND" in unknown.stderr
    cli(bootstrap, "txns", "abort", "--topic", topic, "--partition", "0", "--start-offset", "2")


def test_txns_find_hanging_and_abort_an_open_transaction(bootstrap: str) -> None:
    topic = topic_name("cli-hang")
    tid = topic_name("cli-hang-tid")
    cli(bootstrap, "topics", "create", topic, "--partitions", "1")
    base, pid, epoch = open_transaction(bootstrap, topic, tid)
    # Open but younger than the default 15 minutes: no candidate at all.
    assert cli_json(bootstrap, "txns", "find-hanging", "--topic", topic) == []
    # Past a 0-minute bound it is a candidate, but its coordinator knows it and lists the
    # partition: Kafka's tool does not call that hanging either.
    assert (
        cli_json(
            bootstrap, "txns", "find-hanging", "--topic", topic, "--max-transaction-timeout", "0"
        )
        == []
    )
    # The open transaction holds the LSO back: nothing at read_committed.
    held = cli_json(bootstrap, "verify", topic)["partitions"][0]
    assert (held["last_stable_offset"], held["high_watermark"]) == (base, base + 1)
    assert (
        cli(bootstrap, "consume", topic, "--from-beginning", "--isolation", "read_committed").stdout
        == ""
    )
    no_match = cli(
        bootstrap,
        "txns",
        "abort",
        "--topic",
        topic,
        "--partition",
        "0",
        "--start-offset",
        "99",
        expect=1,
    )
    assert "no open transaction starts at offset 99" in no_match.stderr
    usage = cli(bootstrap, "txns", "abort", "--topic", topic, "--partition", "0", expect=2)
    assert "--start-offset" in usage.stderr
    done = abort_at(bootstrap, topic, base)
    assert (done["producer_id"], done["producer_epoch"], done["result"]) == (pid, epoch, "ABORT")
    batches = [
        json.loads(x)["batch"]
        for x in cli(
            bootstrap, "consume", topic, "--from-beginning", "--show-batches", "--json"
        ).stdout.splitlines()
        if "batch" in x
    ]
    assert [b["marker"] for b in batches] == [None, "ABORT"]
    producers = cli_json(
        bootstrap, "txns", "describe-producers", "--topic", topic, "--partition", "0"
    )
    assert [p["current_txn_start_offset"] for p in producers if p["producer_id"] == pid] == [-1]
    # The LSO moved past the aborted records: a read_committed read returns none of them.
    moved = cli_json(bootstrap, "verify", topic)["partitions"][0]
    assert moved["last_stable_offset"] == moved["high_watermark"] == base + 2
    assert (
        cli(bootstrap, "consume", topic, "--from-beginning", "--isolation", "read_committed").stdout
        == ""
    )
    # By producer id/epoch/coordinator epoch, as for brokers before 3.0 (-1 becomes 0).
    base2, pid2, epoch2 = open_transaction(bootstrap, topic, topic_name("cli-hang-tid2"), b"second")
    cli(
        bootstrap,
        "txns",
        "abort",
        "--topic",
        topic,
        "--partition",
        "0",
        "--producer-id",
        str(pid2),
        "--producer-epoch",
        str(epoch2),
        "--coordinator-epoch",
        "-1",
    )
    producers = cli_json(
        bootstrap, "txns", "describe-producers", "--topic", topic, "--partition", "0"
    )
    assert all(p["current_txn_start_offset"] == -1 for p in producers)
    text = cli(
        bootstrap,
        "consume",
        topic,
        "--from-beginning",
        "--isolation",
        "read_committed",
        "--show-batches",
    )
    assert "marker ABORT" in text.stdout and "second" not in text.stdout and base2 > base


def test_groups_describe_lag_vs_lso_reset_and_delete(bootstrap: str) -> None:
    from confluent_kafka import Consumer

    topic = topic_name("cli-groups")
    group = topic_name("cli-group")
    cli(bootstrap, "topics", "create", topic, "--partitions", "1")
    cli(bootstrap, "produce", topic, "--partition", "0", stdin="a\nb\nc\n")
    open_transaction(bootstrap, topic, topic_name("cli-group-tid"))  # offset 3, never ended
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "client.id": "cli-test",
        }
    )
    try:
        consumer.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30  # joining the group first: slow on a loaded machine
        while got < 2:
            msg = consumer.poll(1.0)
            assert msg is not None or time.monotonic() < deadline, "no record within 30 s"
            got += 0 if msg is None or msg.error() else 1
        consumer.commit(asynchronous=False)
        d = cli_json(bootstrap, "groups", "describe", group)
        assert d["state"] == "Stable" and d["protocol"]
        (member,) = d["members"]
        assert member["client_id"] == "cli-test" and member["assignment"] == [f"{topic}-0"]
        (o,) = d["offsets"]
        assert (o["committed"], o["high_watermark"], o["last_stable_offset"]) == (2, 4, 3)
        assert (o["lag"], o["lag_lso"], o["member_id"]) == (2, 1, member["member_id"])
        text = cli(bootstrap, "groups", "describe", group).stdout
        assert "LAG(LSO)" in text and f"{topic}-0" in text
        refused = cli(
            bootstrap,
            "groups",
            "reset-offsets",
            group,
            "--topic",
            topic,
            "--to-earliest",
            "--execute",
            expect=1,
        )
        assert "Stable" in refused.stderr and "inactive" in refused.stderr
        assert {
            "group": group,
            "type": "classic",
            "state": "Stable",
            "protocol_type": "consumer",
        } in cli_json(bootstrap, "groups", "list")
    finally:
        consumer.close()
    dry = cli_json(bootstrap, "groups", "reset-offsets", group, "--topic", topic, "--to-earliest")
    assert dry["executed"] is False and dry["offsets"] == [
        {"topic": topic, "partition": 0, "current": 2, "new": 0}
    ]
    assert (
        cli_json(bootstrap, "groups", "describe", group)["offsets"][0]["committed"] == 2
    )  # dry run
    for flags, new in (
        (["--shift-by", "-1"], 1),
        (["--to-offset", "99"], 4),
        (["--to-latest"], 4),
        (["--to-datetime", "2000-01-01T00:00:00.000"], 0),
    ):
        done = cli_json(
            bootstrap,
            "groups",
            "reset-offsets",
            group,
            "--topic",
            f"{topic}:0",
            *flags,
            "--execute",
        )
        assert done["offsets"][0]["new"] == new, flags
        assert cli_json(bootstrap, "groups", "describe", group)["offsets"][0]["committed"] == new
    assert cli_json(bootstrap, "groups", "delete", group) == {"deleted": [group], "failed": []}
    gone = cli(bootstrap, "groups", "describe", group, expect=1)
    assert "GROUP_ID_NOT_FOUND" in gone.stderr


def test_groups_list_describe_and_reset_a_consumer_protocol_group(bootstrap: str) -> None:
    """A KIP-848 group (confluent-kafka group.protocol=consumer): listed with its type, described
    through ConsumerGroupDescribe (epochs, assignment, target), reset refused while it has
    members."""
    from confluent_kafka import Consumer

    topic = topic_name("cli-848")
    group = topic_name("cli-848-group")
    cli(bootstrap, "topics", "create", topic, "--partitions", "2")
    cli(bootstrap, "produce", topic, "--partition", "0", stdin="a\nb\n")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "client.id": "cli-848",
        }
    )
    try:
        consumer.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < 2:
            msg = consumer.poll(1.0)
            assert msg is not None or time.monotonic() < deadline, "no record within 30 s"
            got += 0 if msg is None or msg.error() else 1
        consumer.commit(asynchronous=False)
        listed = {g["group"]: g for g in cli_json(bootstrap, "groups", "list")}
        assert listed[group] == {
            "group": group,
            "type": "consumer",
            "state": "Stable",
            "protocol_type": "consumer",
        }
        d = cli_json(bootstrap, "groups", "describe", group)
        assert (d["type"], d["state"], d["protocol"]) == ("consumer", "Stable", "uniform")
        assert d["group_epoch"] == d["assignment_epoch"] >= 1
        (member,) = d["members"]
        assert member["client_id"] == "cli-848" and member["member_epoch"] == d["group_epoch"]
        assert member["assignment"] == member["target_assignment"] == [f"{topic}-0", f"{topic}-1"]
        offsets = {o["partition"]: o for o in d["offsets"]}
        assert (offsets[0]["committed"], offsets[0]["lag"]) == (2, 0)
        assert offsets[0]["member_id"] == member["member_id"]
        text = cli(bootstrap, "groups", "describe", group).stdout
        assert "consumer protocol" in text and "TARGET" in text
        refused = cli(
            bootstrap,
            "groups",
            "reset-offsets",
            group,
            "--all-topics",
            "--to-earliest",
            "--execute",
            expect=1,
        )
        assert "Stable with 1 member(s)" in refused.stderr
    finally:
        consumer.close()


def test_verify_a_clean_exactly_once_topic(bootstrap: str) -> None:
    topic = topic_name("cli-verify-clean")
    tid = topic_name("cli-verify-tid")
    cli(bootstrap, "topics", "create", topic, "--partitions", "2")
    cli(bootstrap, "produce", topic, "--key-separator", ":", stdin="a:1\nb:2\nc:3\n")
    cli(bootstrap, "produce", topic, "--partition", "0", stdin="more\n")
    cli(bootstrap, "produce", topic, "--partition", "0", "--transactional-id", tid, stdin="x\n")
    cli(
        bootstrap,
        "produce",
        topic,
        "--partition",
        "0",
        "--transactional-id",
        tid,
        "--abort",
        stdin="y\n",
    )
    got = cli_json(bootstrap, "verify", topic)
    assert got["clean"] is True and got["findings"] == []
    assert sum(p["committed_records"] for p in got["partitions"]) == 5
    assert cli(bootstrap, "verify", topic).stdout.rstrip().endswith(f"{topic}: clean")


def test_verify_finds_a_transaction_without_marker_and_the_lso_it_holds(bootstrap: str) -> None:
    topic = topic_name("cli-verify-open")
    cli(bootstrap, "topics", "create", topic, "--partitions", "1")
    cli(bootstrap, "produce", topic, stdin="before\n")
    base, pid, _ = open_transaction(bootstrap, topic, topic_name("cli-verify-open-tid"))
    # Within the default 15-minute bound an open transaction is not a finding.
    assert cli_json(bootstrap, "verify", topic)["clean"] is True
    proc = cli(bootstrap, "verify", topic, "--max-transaction-timeout", "0", "--json", expect=1)
    found = json.loads(proc.stdout)["findings"]
    assert [f["kind"] for f in found] == ["open_transaction", "stuck_lso"]
    assert (
        f"producer {pid} epoch 0: transaction from offset {base} has no marker"
        in found[0]["detail"]
    )
    text = cli(bootstrap, "verify", topic, "--max-transaction-timeout", "0", expect=1).stdout
    assert "open_transaction" in text and "stuck_lso" in text
    abort_at(bootstrap, topic, base)
    assert cli_json(bootstrap, "verify", topic, "--max-transaction-timeout", "0")["clean"] is True
