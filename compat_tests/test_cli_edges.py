"""Edge cases of the ``kafkad`` client CLI against a live broker (helpers from test_cli.py):
empty input, an existing topic, an offset without a partition."""

from __future__ import annotations

import json

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


def test_reset_offsets_all_topics_to_current_by_duration_and_dry_run(bootstrap: str) -> None:
    """The rest of ConsumerGroupCommand's reset options: --all-topics (every partition the group
    has an offset for), --to-current, --by-duration, --dry-run (the default, said explicitly)."""
    topic, other = topic_name("cli-reset"), topic_name("cli-reset-other")
    group = topic_name("cli-reset-group")
    for t in (topic, other):
        cli(bootstrap, "topics", "create", t, "--partitions", "2")
        cli(bootstrap, "produce", t, "--partition", "0", stdin="a\nb\nc\n")
    # no member ever joined: offsets set with --execute make the group (Empty)
    reset = ("groups", "reset-offsets", group)
    cli_json(bootstrap, *reset, "--topic", f"{topic}:0", "--to-offset", "2", "--execute")
    # --all-topics: the one partition with an offset, not the other topic or partition
    dry = cli_json(bootstrap, *reset, "--all-topics", "--to-earliest", "--dry-run")
    assert dry["executed"] is False
    assert dry["offsets"] == [{"topic": topic, "partition": 0, "current": 2, "new": 0}]
    assert cli_json(bootstrap, "groups", "describe", group)["offsets"][0]["committed"] == 2
    # --to-current keeps a committed offset and takes the log end where there is none
    cur = cli_json(bootstrap, *reset, "--topic", topic, "--topic", other, "--to-current")
    assert [(o["topic"], o["partition"], o["new"]) for o in cur["offsets"]] == [
        (topic, 0, 2),
        (topic, 1, 0),
        (other, 0, 3),
        (other, 1, 0),
    ]
    # --by-duration: records written just now are younger than an hour: the first of them
    back = cli_json(bootstrap, *reset, "--all-topics", "--by-duration", "PT1H", "--execute")
    assert back["executed"] is True and back["offsets"][0]["new"] == 0
    assert cli_json(bootstrap, "groups", "describe", group)["offsets"][0]["committed"] == 0
    both = cli(bootstrap, *reset, "--all-topics", "--to-latest", "--dry-run", "--execute", expect=2)
    assert "not allowed with argument" in both.stderr
    bad = cli(bootstrap, *reset, "--all-topics", "--by-duration", "1h", expect=2)
    assert "not a duration like PT1H" in bad.stderr


def test_deleting_several_topics_and_groups_reports_each_outcome(bootstrap: str) -> None:
    a, b, missing = topic_name("cli-del-a"), topic_name("cli-del-b"), topic_name("cli-del-none")
    for t in (a, b):
        cli(bootstrap, "topics", "create", t)
    proc = cli(bootstrap, "topics", "delete", a, missing, b, "--json", expect=1)
    out = json.loads(proc.stdout)
    assert out["deleted"] == [a, b]
    assert [(f["topic"], f["error_code"]) for f in out["failed"]] == [(missing, 3)]
    assert len(proc.stderr.splitlines()) == 1 and missing in proc.stderr
    listed = cli(bootstrap, "topics", "list").stdout.split()
    assert a not in listed and b not in listed
    group = topic_name("cli-del-group")
    cli(bootstrap, "topics", "create", a)
    cli(bootstrap, "groups", "reset-offsets", group, "--topic", a, "--to-earliest", "--execute")
    text = cli(bootstrap, "groups", "delete", group, "no-such-group-x", expect=1)
    assert text.stdout.split()[:4] == ["GROUP", "OUTCOME", group, "deleted"]
    assert "no-such-group-x" in text.stdout and "GROUP_ID_NOT_FOUND" in text.stderr
