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
        r"a\C",  # any byte: RE2 takes it, RE2/J's parser does not
        r"\8",
        r"(a)\1\Qx\E",
        r"\Qa\E(?=b)",
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
        # RE2/J's parseEscape: \1-\7 followed by an octal digit is octal, not a back-reference
        (r"a\12", "a\n", True),
        (r"\101\0", "A\0", True),
        # \Q...\E quotes: nothing inside is a back-reference, look-around or repeat count
        (r"\Q\1(?=a{2000}\E", "\\1(?=a{2000}", True),
        (r"x\Q(?>", "x(?>", True),  # unterminated: quoted to the end
    ],
)
def test_what_re2j_accepts_compiles(pattern: str, name: str, matches: bool) -> None:
    assert (compile_re2(pattern).fullmatch(name) is not None) is matches
