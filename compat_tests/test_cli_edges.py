"""Edge cases of the ``kafkad`` client CLI against a live broker (helpers from test_cli.py):
empty input, an existing topic, an offset without a partition."""

from __future__ import annotations

from compat_tests._support import topic_name
from compat_tests.test_cli import cli, cli_json


def test_a_transactional_produce_of_no_lines_ends_without_an_error(bootstrap: str) -> None:
    # Kafka's producer completes a transaction that added no partition locally (no EndTxn,
    # which a coordinator refuses with INVALID_TXN_STATE): empty input is not a failure.
    topic = topic_name("cli-txn-empty")
    tid = topic_name("cli-tid-empty")
    cli(bootstrap, "topics", "create", topic, "--partitions", "1")
    for flags, outcome in (([], "committed"), (["--abort"], "aborted")):
        done = cli_json(bootstrap, "produce", topic, "--transactional-id", tid, *flags)
        assert (done["transaction"], done["partitions"]) == (outcome, [])
    assert cli(bootstrap, "consume", topic, "--from-beginning", "--show-batches").stdout == ""


def test_create_if_not_exists_on_an_existing_topic_reports_it(bootstrap: str) -> None:
    # It printed the topic as CREATED with -1 partitions (the refusal's count).
    topic = topic_name("cli-exists")
    cli(bootstrap, "topics", "create", topic, "--partitions", "3")
    kept = cli_json(bootstrap, "topics", "create", topic, "--if-not-exists")
    assert kept == {"topic": topic, "partitions": 3, "created": False}
    text = cli(bootstrap, "topics", "create", topic, "--if-not-exists").stdout.splitlines()
    assert text[0].split() == ["TOPIC", "PARTITIONS", "OUTCOME"]
    assert text[1].split() == [topic, "3", "already", "exists"]


def test_consume_offset_needs_a_partition(bootstrap: str) -> None:
    # Without --partition the offset was applied to every partition: OFFSET_OUT_OF_RANGE on a
    # shorter one, exit 1.
    topic = topic_name("cli-offset")
    cli(bootstrap, "topics", "create", topic, "--partitions", "2")
    cli(bootstrap, "produce", topic, "--partition", "1", stdin="a\nb\n")
    bare = cli(bootstrap, "consume", topic, "--offset", "1", expect=2)
    assert bare.stderr == "kafkad: --offset needs --partition\n"
    assert cli(bootstrap, "consume", topic, "--partition", "1", "--offset", "1").stdout == "b\n"
