"""The CLI's pure parts: tables, option parsing, line splitting, the partitioner hash."""

from __future__ import annotations

import argparse

import pytest

from kafkad.cli import build_parser
from kafkad.cli.options import DEFAULT_BOOTSTRAP, bootstrap_default, key_value
from kafkad.cli.output import table
from kafkad.cli.produce import parse_lines
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
