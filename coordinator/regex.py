"""Regular expressions in Kafka's dialect, RE2/J (``com.google.re2j.Pattern``, re2j 1.8), as
Kafka compiles a ConsumerGroupHeartbeat's SubscribedTopicRegex (KIP-848) and a ListTransactions
v2 TransactionalIdPattern (KIP-1152); the one place for the dialect.

kafkad compiles and matches with RE2 (google-re2, the C++ library RE2/J is a port of): matching
takes time linear in the text, as RE2/J's does, so no pattern makes the broker's one event loop
backtrack for ages (Python's ``re`` would, on ``(a+)+b`` against a long run of ``a``). RE2's
syntax Python lacks (``(?<name>``, ``\\z``, ``\\pL``, ``[[:alpha:]]``) is taken, as Kafka takes
it; parentheses nest as deep as one likes (neither RE2/J nor RE2 limits it).

Refused, as RE2/J refuses them: back-references (``\\1``, ``(?P=name)``; ``\\12`` is an octal
escape, as in RE2/J), ``\\C`` (any byte, RE2 takes it), look-arounds (``(?=``,
``(?!``, ``(?<=``, ``(?<!``), atomic groups ``(?>``, possessive quantifiers (``*+``, ``++``,
``?+``, ``}+``), conditionals ``(?(``, ``\\Z``, a repeat count over 1000 (however large: RE2
would read ``a{4294967296}`` as a literal), a capture name used twice (RE2 takes it) and every
syntax error RE2 finds. The first ones are checked on the text first (``_refusal``, which
skips ``\\Q...\\E`` literals as RE2/J does), RE2's errors after; both are answered in RE2/J's
words (``PatternSyntaxException``'s description: ``invalid escape sequence`` for ``\\1``,
``invalid or unsupported Perl syntax`` for ``(?=``, ``regexp/syntax: internal error`` for an
unmatched ``)``). Only when a pattern has several faults may the one named differ from
RE2/J's first.

Deviation: RE2 also refuses nested repeats whose counts multiply past 1000 (``(a{1000}){2}``),
which RE2/J 1.8 takes.
"""

from __future__ import annotations

import functools
import re

import re2

MAX_REPEAT_COUNT = 1000  # RE2/J's parser refuses a larger repeat count (ERR_INVALID_REPEAT_SIZE)
_REPEAT = re.compile(r"\{([0-9]+)(,([0-9]*))?\}")
_NAMED = re.compile(r"\(\?P?<([^>=!]*)>")

# what RE2/J refuses and Python's re accepts, found outside character classes by _refusal,
# with RE2/J's description of it: look-aheads, atomic groups, named back-references and
# conditionals are Perl syntax it lacks; it reads a look-behind as a bad named capture
_PERL = "invalid or unsupported Perl syntax"
_GROUP_OPENERS = {
    "(?=": _PERL,
    "(?!": _PERL,
    "(?<=": "invalid named capture",
    "(?<!": "invalid named capture",
    "(?>": _PERL,
    "(?P=": _PERL,
    "(?(": _PERL,
}
_ESCAPE = "invalid escape sequence"  # a back-reference, \Z, \C

# RE2's error texts that RE2/J (Go's regexp/syntax words) says otherwise
_RE2J_WORDS = {
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    # an unmatched ")": RE2/J's parseRightParen finds a stack underflow
    "unexpected )": "regexp/syntax: internal error",
    "missing (": "regexp/syntax: internal error",  # older RE2's words
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid named capture group": "invalid named capture",
}


class RegexError(ValueError):
    """A pattern RE2/J would not compile; the text says why, in RE2/J's words where RE2 found
    it."""


def _refusal(pattern: str) -> str | None:
    """What RE2/J refuses in ``pattern`` that RE2 or Python's ``re`` accepts, or None."""
    i, n, in_class, names = 0, len(pattern), False, set()
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if not in_class and nxt == "Q":  # \Q...\E: literals, whatever they are
                end = pattern.find("\\E", i + 2)
                i = n if end < 0 else end + 2
                continue
            # \1 to \7 followed by an octal digit is an octal escape (\12 is "\n"), as RE2/J's
            # parseEscape reads it; a lone digit is a back-reference
            octal = nxt in "1234567" and i + 2 < n and pattern[i + 2] in "01234567"
            if not in_class and nxt in "123456789" and not octal:  # a back-reference
                return _ESCAPE
            if not in_class and nxt == "Z":
                return _ESCAPE
            if not in_class and nxt == "C":  # RE2 takes it (any byte), RE2/J does not
                return _ESCAPE
            i += 2
            continue
        if in_class:
            if c == "[" and pattern.startswith("[:", i):  # a POSIX class, [:alpha:]
                close = pattern.find(":]", i + 2)
                i = i + 2 if close < 0 else close + 2
                continue
            if c == "]":
                in_class = False
            i += 1
            continue
        if c == "[":
            in_class = True
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":  # a leading ] is a literal
                i += 1
            continue
        for opener, description in _GROUP_OPENERS.items():
            if pattern.startswith(opener, i):
                return description
        if c == "(" and (named := _NAMED.match(pattern, i)) is not None:
            if named[1] in names:
                return "duplicate capture group name"
            names.add(named[1])
        if c in "*+?}" and i + 1 < n and pattern[i + 1] == "+":  # possessive
            return "invalid nested repetition operator"
        if c == "{" and (rep := _REPEAT.match(pattern, i)) is not None:
            low, high = int(rep[1]), rep[3]
            if low > MAX_REPEAT_COUNT or (high and int(high) > MAX_REPEAT_COUNT):
                return "invalid repeat count"
        i += 1
    return None


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # a client's bad pattern is its answer, not a broker log line
    return options


_OPTIONS = _options()


def _description(exc: re2.error) -> str:
    """RE2's error without the fragment it quotes ("invalid escape sequence: \\1"), in
    RE2/J's words, as its ``PatternSyntaxException.getDescription()`` gives them."""
    text = exc.args[0] if exc.args else ""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    code = str(text).split(": ", 1)[0] or "invalid regular expression"
    return _RE2J_WORDS.get(code, code)


@functools.lru_cache(maxsize=512)  # a member's regex is compiled at each of its heartbeats
def compile_re2(pattern: str) -> re2._Regexp:
    """``pattern`` compiled by RE2 (Perl syntax, as RE2/J's ``Pattern.compile``), or
    RegexError (not cached: refused again each time). Match a whole name with ``fullmatch``,
    as Kafka's ``Matcher.matches``."""
    message = _refusal(pattern)
    if message is not None:
        raise RegexError(message)
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        raise RegexError(_description(exc)) from None
