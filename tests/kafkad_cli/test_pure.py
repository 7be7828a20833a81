"""The CLI's pure parts: tables, option parsing, line splitting, the partitioner hash."""

from __future__ import annotations

import argparse

import pytest

from kafkad.cli import NOUNS, build_parser
from kafkad.cli.options import DEFAULT_BOOTSTRAP, bootstrap_default, key_value
from kafkad.cli.output import table
from kafkad.cli.produce import BATCH_BYTES, parse_lines, split_batches
from kafkad.client.errors import ClientError
from kafkad.client.producing import murmur2, murmur2_partition


def test_table_pads_columns_and_prints_none_as_dash() -> None:
    assert table(("A", "LONGER"), [("xyz", None), (1, 22)]).splitlines() == [
        "A    LONGER",
        "xyz  -",
        "1    22",
    ]


def test_bootstrap_default_reads_the_environment_then_falls_back() -> None:
    assert bootstrap_default({}) == DEFAULT_BOOTSTRAP == "127.0.0.1:9092"
    assert bootstrap_default({"KAFKAD_BOOTSTRAP_SERVER": "h:1"}) == "h:1"


def test_key_value_keeps_equals_in_the_value_and_refuses_no_name() -> None:
    assert key_value("a=b=c") == ("a", "b=c")
    assert key_value("a=") == ("a", "")
    for bad in ("a", "=b"):
        with pytest.raises(argparse.ArgumentTypeError):
            key_value(bad)


def test_parse_lines_splits_at_the_first_separator_and_keeps_headers() -> None:
    msgs = parse_lines(["k:v:w\n", "plain\r\n"], ":", [("h", "1")])
    assert [(m.key, m.value, m.headers) for m in msgs] == [
        (b"k", b"v:w", [("h", b"1")]),
        (None, b"plain", [("h", b"1")]),
    ]


def test_murmur2_matches_kafkas_utils() -> None:
    # Values from Kafka's UtilsTest.testMurmur2.
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107
    assert 0 <= murmur2_partition(b"21", 7) < 7


def test_produce_parses_commit_by_default_and_abort_when_asked() -> None:
    parser = build_parser()
    assert parser.parse_args(["produce", "t"]).abort is False
    assert parser.parse_args(["produce", "t", "--transactional-id", "x", "--abort"]).abort is True
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["produce", "t", "--commit", "--abort"])
    assert exc.value.code == 2


def test_hanging_transactions_follow_kafkas_filter() -> None:
    from kafkad.cli.txns import hanging_transactions

    def open_txn(topic: str, partition: int) -> dict[str, object]:
        return {"topic": topic, "partition": partition}

    candidates = {
        1: [open_txn("t", 0)],  # no transactional id owns producer 1
        2: [open_txn("t", 0)],  # its id is unknown to the coordinator
        3: [open_txn("t", 0), open_txn("t", 1)],  # the coordinator's txn has only t-0
    }
    owners = {2: "gone", 3: "live"}
    known: dict[str, set[tuple[str, int]] | None] = {"gone": None, "live": {("t", 0)}}
    got = hanging_transactions(candidates, owners, known)
    assert got == [open_txn("t", 0), open_txn("t", 0), open_txn("t", 1)]
    assert hanging_transactions({3: [open_txn("t", 0)]}, owners, known) == []


def test_describe_transactions_v0_is_read_by_hand_with_a_negative_start_time() -> None:
    from kafkad.client.txn_state import parse_describe_transactions_v0

    # throttle, 1 state: error, "tx1", "Empty", timeout, start -1, pid 7, epoch 2,
    # 1 topic "t" with partitions [0, 2], then the tagged-field sections
    body = bytes.fromhex(
        "00000000 02 0000 04747831 06456d707479 0000ea60 ffffffffffffffff"
        " 0000000000000007 0002 02 0274 03 00000000 00000002 00 00 00"
    )
    (s,) = parse_describe_transactions_v0(body)
    assert (s.transactional_id, s.state, s.start_time_ms, s.producer_id, s.producer_epoch) == (
        "tx1",
        "Empty",
        -1,
        7,
        2,
    )
    assert s.partitions == [("t", 0), ("t", 2)]


def test_consumer_assignment_decodes_and_reset_plans_clamp() -> None:
    import struct

    from kafkad.cli.groups import decode_assignment, parse_datetime_ms, plan_offset

    data = struct.pack(">hih1siii", 0, 1, 1, b"t", 2, 0, 3) + struct.pack(">i", -1)
    assert decode_assignment(data) == [("t", 0), ("t", 3)]
    assert decode_assignment(b"") == []
    assert plan_offset("to_earliest", None, 5, 2, 9, None) == 2
    assert plan_offset("to_latest", None, 5, 2, 9, None) == 9
    assert plan_offset("to_offset", 100, 5, 2, 9, None) == 9
    assert plan_offset("shift_by", -10, 5, 2, 9, None) == 2
    with pytest.raises(ClientError, match="t-0 since there is no current committed offset"):
        plan_offset("shift_by", 1, None, 2, 9, None, "t-0")  # Kafka refuses, no guess
    assert plan_offset("to_datetime", None, 5, 2, 9, -1) == 9
    assert plan_offset("to_datetime", None, 5, 2, 9, 4) == 4
    assert parse_datetime_ms("1970-01-01T00:00:01.500") == 1500
    assert parse_datetime_ms("1970-01-01T01:00:00+01:00") == 0


def test_proxy_cli_hands_client_nouns_to_kafkad_cli(capsys: pytest.CaptureFixture[str]) -> None:
    from proxy.cli import CLIENT_NOUNS, main

    assert set(CLIENT_NOUNS) == set(NOUNS)
    assert main(["topics"]) == 2
    assert "needs a verb" in capsys.readouterr().err
    assert main(["topics", "list", "--bootstrap-server", "127.0.0.1:1", "--timeout", "2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kafkad: cannot reach a broker at 127.0.0.1:1") and "Traceback" not in err


def test_an_api_the_broker_lacks_is_named_in_the_error() -> None:
    from kafkad.client.connection import Connection
    from kafkad.client.errors import ClientError

    conn = Connection.__new__(Connection)
    conn.address, conn.versions = "b:1", {61: (0, 0)}
    assert conn.version_for(61, 0, 0) == 0
    with pytest.raises(ClientError, match=r"does not support DescribeTransactions \(API 65\)"):
        conn.version_for(65, 0, 0)
    conn.versions[65] = (1, 2)
    with pytest.raises(ClientError, match="UNSUPPORTED_VERSION: it offers versions 1-2"):
        conn.version_for(65, 0, 0)


def test_split_batches_keeps_order_and_cuts_at_the_byte_budget() -> None:
    msgs = parse_lines([f"{i}:{'v' * 1000}" for i in range(100)], ":", [])
    runs = split_batches(msgs)
    assert [m for r in runs for m in r] == msgs
    assert len(runs) > 1
    assert all(sum(len(m.value or b"") for m in r) <= BATCH_BYTES for r in runs)
    huge = parse_lines(["a" * (BATCH_BYTES * 2), "b", "c"], None, [])
    assert [len(r) for r in split_batches(huge)] == [1, 2]
    assert split_batches([]) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["consume", "t", "--offset", "-5"],  # printed nothing and exited 0
        ["topics", "list", "--timeout", "0"],  # "cannot reach a broker: Operation now in progress"
        ["topics", "list", "--timeout", "-1"],  # "unexpected ValueError"
        ["topics", "list", "--timeout", "inf"],
    ],
)
def test_negative_offsets_and_non_positive_timeouts_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)
    assert exit_.value.code == 2


def test_kafkads_top_level_help_lists_the_client_nouns() -> None:
    from proxy.cli import build_parser as broker_parser

    usage = broker_parser().format_help()
    assert all(f"kafkad {noun} --help" in usage for noun in NOUNS)


class _OneBroker:
    """Metadata of node 1 holding t (partitions 0, 1) and node 2 holding u's partition 0."""

    def __init__(self) -> None:
        from kafkad.client.cluster import PartitionInfo, TopicInfo

        def topic(name: str, nodes: dict[int, int]) -> TopicInfo:
            info = TopicInfo(name, "", 0)
            for p, node in nodes.items():
                info.partitions[p] = PartitionInfo(p, node, 0, [node], [node], 0)
            return info

        self.topics = {"t": topic("t", {0: 1, 1: 1}), "u": topic("u", {0: 2})}

    def broker(self, node: int) -> None:
        if node not in (1, 2):
            raise ClientError(f"the cluster does not know broker {node}")

    def topic(self, name: str) -> object:
        return self.topics[name]

    def metadata(self, topics: object) -> dict[str, object]:
        return dict(self.topics)


def test_find_hanging_searches_what_kafkas_tool_searches() -> None:
    from typing import Any, cast

    from kafkad.cli.options import UsageError
    from kafkad.cli.txns import partitions_to_search

    c = cast(Any, _OneBroker())
    assert partitions_to_search(c, "t", None, None) == [("t", 0), ("t", 1)]
    assert partitions_to_search(c, "t", 1, None) == [("t", 1)]
    # --broker-id alone: every topic's partitions with a replica there
    assert partitions_to_search(c, None, None, 1) == [("t", 0), ("t", 1)]
    assert partitions_to_search(c, None, None, 2) == [("u", 0)]
    assert partitions_to_search(c, "t", None, 2) == []
    with pytest.raises(UsageError, match="requires either --topic or --broker-id"):
        partitions_to_search(c, None, None, None)
    with pytest.raises(UsageError, match="--partition argument requires --topic"):
        partitions_to_search(c, None, 0, 1)
    with pytest.raises(ClientError, match="does not know broker 9"):
        partitions_to_search(c, None, None, 9)
    args = build_parser().parse_args(["txns", "find-hanging", "--broker-id", "1"])
    assert (args.broker_id, args.topic) == (1, None)
    args = build_parser().parse_args(
        ["txns", "describe-producers", "--broker-id", "2", "--topic", "t", "--partition", "0"]
    )
    assert args.broker_id == 2


def test_reset_offsets_takes_the_rest_of_kafkas_scenarios_and_scopes() -> None:
    from kafkad.cli.groups import parse_duration_ms, plan_offset
    from kafkad.cli.options import UsageError

    # --to-current: the committed offset, else the log end (ConsumerGroupCommand's resetToCurrent)
    assert plan_offset("to_current", None, 5, 2, 9, None) == 5
    assert plan_offset("to_current", None, None, 2, 9, None) == 9
    # --by-duration in Java's Duration.parse form
    assert parse_duration_ms("PT1H") == 3_600_000
    assert parse_duration_ms("P1DT12H30M") == (36 * 60 + 30) * 60_000
    assert parse_duration_ms("PT0.5S") == 500
    for bad in ("P", "PT", "1H", "P1H", "PT1X"):
        with pytest.raises(UsageError, match="not a duration"):
            parse_duration_ms(bad)
    parse = build_parser().parse_args
    args = parse(["groups", "reset-offsets", "g", "--all-topics", "--to-current", "--dry-run"])
    assert (args.all_topics, args.topic, args.to_current, args.dry_run) == (True, None, True, True)
    args = parse(["groups", "reset-offsets", "g", "--topic", "t", "--by-duration", "PT1H"])
    assert args.by_duration == "PT1H" and not args.execute
    for argv in (
        ["--topic", "t", "--all-topics", "--to-latest"],  # one scope
        ["--to-latest"],  # a scope is required
        ["--topic", "t", "--to-latest", "--dry-run", "--execute"],  # one of the two
    ):
        with pytest.raises(SystemExit) as exited:
            parse(["groups", "reset-offsets", "g", *argv])
        assert exited.value.code == 2


def test_a_delete_of_several_names_reports_each(capsys: pytest.CaptureFixture[str]) -> None:
    # `topics delete a nope b` used to print only the first failure, hiding that a and b went
    import json

    from kafkad.cli.output import report_deletions
    from kafkad.client.errors import KafkaError

    assert report_deletions(False, "topic", ["a"], []) == 0
    assert capsys.readouterr().out.split() == ["TOPIC", "OUTCOME", "a", "deleted"]
    failed = [
        ("x", KafkaError(3, "deleting topic 'x'", "No such topic.")),
        ("y", KafkaError(3, "deleting topic 'y'")),
    ]
    with pytest.raises(ClientError) as info:
        report_deletions(True, "topic", ["a", "b"], failed)
    data = json.loads(capsys.readouterr().out)
    assert data["deleted"] == ["a", "b"]
    assert [(f["topic"], f["error_code"]) for f in data["failed"]] == [("x", 3), ("y", 3)]
    assert str(info.value) == (
        "deleting topic 'x': UNKNOWN_TOPIC_OR_PARTITION (no such topic or partition): "
        "No such topic; deleting topic 'y': UNKNOWN_TOPIC_OR_PARTITION (no such topic or partition)"
    )


@pytest.mark.parametrize(
    ("argv", "code", "line"),
    [
        (
            ["topics", "describe", "secret"],
            29,
            "kafkad: topic 'secret': TOPIC_AUTHORIZATION_FAILED (not authorized to access the "
            "topic)",
        ),
        (
            ["groups", "describe", "g"],
            30,
            "kafkad: group 'g': GROUP_AUTHORIZATION_FAILED (not authorized to access the group)",
        ),
        (
            ["txns", "list"],
            31,
            "kafkad: listing transactions on broker 1: CLUSTER_AUTHORIZATION_FAILED (not "
            "authorized for this cluster action)",
        ),
    ],
)
def test_an_authorization_failure_is_one_plain_line(
    argv: list[str],
    code: int,
    line: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What a broker with ACLs answers (no live one here yet: kafkad has no authorizer) reaches
    the user as one line naming what was refused, with exit status 1 and no traceback."""
    import kafkad.cli
    from kafkad.client.errors import KafkaError

    class Refusing:
        brokers = {1: "b:1"}

        def __init__(self, *a: object) -> None:
            pass

        def __enter__(self) -> Refusing:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def topic(self, name: str) -> None:
            raise KafkaError(code, f"topic {name!r}")

        def coordinated(self, key: str, key_type: int, call: object) -> None:
            raise KafkaError(code, f"group {key!r}")

        def metadata(self, topics: object) -> dict[str, object]:
            return {}

        def send(self, api: object, data: object, node: int | None = None) -> object:
            from types import SimpleNamespace

            return SimpleNamespace(error_code=code, transaction_states=[])

    monkeypatch.setattr(kafkad.cli, "Client", Refusing)
    assert kafkad.cli.main([*argv, "--bootstrap-server", "b:1"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [line]


def test_force_terminate_takes_kafkas_and_kafkads_spellings() -> None:
    parse = build_parser().parse_args
    for argv in (
        ["txns", "forceTerminateTransaction", "--transactionalId", "t"],
        ["txns", "force-terminate", "--transactional-id", "t"],
    ):
        assert parse(argv).transactional_id == "t"
    with pytest.raises(SystemExit):
        parse(["txns", "forceTerminateTransaction"])  # the id is required


def test_a_duration_filter_is_refused_where_list_transactions_v0_would_drop_it() -> None:
    from types import SimpleNamespace
    from typing import Any, cast

    from kafkad.cli.txns import list_transactions

    sent: list[object] = []

    class OldBroker:  # ListTransactions v0 only, as Kafka 3.0-3.7
        brokers = {1: "b:1"}

        def metadata(self, topics: object) -> dict[str, object]:
            return {}

        def broker(self, node: int) -> object:
            return SimpleNamespace(version_for=lambda key, low, high: 0)

        def send(self, api: object, data: object, node: int | None = None) -> object:
            sent.append(data)
            return SimpleNamespace(error_code=0, transaction_states=[])

    old = cast(Any, OldBroker())
    with pytest.raises(ClientError, match="does not support --duration-filter"):
        list_transactions(old, None, 60_000)
    assert sent == []
    assert list_transactions(old) == [] and len(sent) == 1  # no filter: fine at v0


def test_an_id_pattern_is_refused_where_list_transactions_v1_would_drop_it() -> None:
    from types import SimpleNamespace
    from typing import Any, cast

    from kafkad.cli.txns import list_transactions

    sent: list[Any] = []

    class Broker:  # ListTransactions up to v1, as Kafka 3.8-4.0
        brokers = {1: "b:1"}

        def metadata(self, topics: object) -> dict[str, object]:
            return {}

        def broker(self, node: int) -> object:
            return SimpleNamespace(version_for=lambda key, low, high: 1)

        def send(self, api: object, data: object, node: int | None = None) -> object:
            sent.append(data)
            return SimpleNamespace(error_code=0, transaction_states=[])

    old = cast(Any, Broker())
    with pytest.raises(ClientError, match="does not support --transactional-id-pattern"):
        list_transactions(old, None, -1, "app-.*")
    assert sent == []
    assert list_transactions(old, None, -1, "") == []  # an empty pattern is no filter
    assert sent[0]["transactional_id_pattern"] is None
