"""coordinator.regex: Kafka's RE2/J dialect, compiled and matched with RE2."""

from __future__ import annotations

import pytest

from coordinator.regex import RegexError, compile_re2


@pytest.mark.parametrize(
    "pattern",
    [
        "t(",
        "a{4294967296}",
        "a{1,99999999999999999999}",
        r"(a)\1",
        r"(?P<n>a)(?P=n)",
        "a(?=b)",
        "a(?!b)",
        "(?<=a)b",
        "(?<!a)b",
        "(a)?(?(1)b|c)",
        "(?>ab)",
        "a*+",
        "a{2,}+",
        "a{1001}",
        "a{0,1001}",
        "x|(y{2000})",
        "(?x) a",
        "(?a:a)",
        r"a\Z",
        "(?P<n>a)(?<n>b)",
    ],
)
def test_what_re2j_refuses_is_refused(pattern: str) -> None:
    with pytest.raises(RegexError):
        compile_re2(pattern)


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("app-.*", "app-1", True),
        ("app", "other-app", False),
        ("a{1000}", "a" * 1000, True),
        ("a{2,}", "aaa", True),
        ("(?i)APP|x", "app", True),
        ("(?P<n>a)+b", "aab", True),
        ("[a-c]+(?s:.)", "abc\n", True),
        ("(" * 50 + "a" + ")" * 50, "a", True),
        # RE2/J has no nesting limit (Python's parser recursed out of stack on this)
        ("(" * 5000 + "a" + ")" * 5000, "a", True),
        ("(?<n>a)(?P<m>b)", "ab", True),
        (r"\pL+\z", "abc", True),
        ("[[:alpha:]]+", "abc", True),
        ("(a+)+b", "a" * 100_000, False),  # linear time: no backtracking
    ],
)
def test_what_re2j_accepts_compiles(pattern: str, name: str, matches: bool) -> None:
    assert (compile_re2(pattern).fullmatch(name) is not None) is matches
