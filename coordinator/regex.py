"""Regular expressions in Kafka's dialect, RE2/J (``com.google.re2j.Pattern``), as Kafka compiles
a ConsumerGroupHeartbeat's SubscribedTopicRegex (KIP-848) and a ListTransactions v2
TransactionalIdPattern (KIP-1152).

kafkad matches with Python's ``re`` and refuses, as RE2/J does, what ``re`` would accept but
RE2 has no such thing for: back-references (``\\1``, ``(?P=name)``), look-around assertions,
conditionals, atomic groups and possessive repeats, a repeat count above 1000, and the flags
RE2 lacks (``(?x)``, ``(?a)``, ``(?L)``). What ``re`` cannot compile is refused too, a repeat
count beyond its own limit (OverflowError) or a nesting deeper than its parser recurses
(RecursionError) included.

Deviation: the other way round, syntax RE2/J accepts and ``re`` does not (``\\p{L}``, ``\\z``,
``(?<name>...)``) is refused; the refusal's text is ``re``'s or kafkad's, not RE2/J's.
"""

from __future__ import annotations

import functools
import re
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

MAX_REPEAT_COUNT = 1000  # RE2's limit on {n,m}
_UNSUPPORTED = {
    sre.GROUPREF: "back-references are not supported",
    sre.GROUPREF_IGNORE: "back-references are not supported",
    sre.GROUPREF_EXISTS: "conditionals are not supported",
    sre.ASSERT: "look-around assertions are not supported",
    sre.ASSERT_NOT: "look-around assertions are not supported",
    sre.ATOMIC_GROUP: "atomic groups are not supported",
    sre.POSSESSIVE_REPEAT: "possessive repeats are not supported",
}
_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)
_FLAGS = sre.SRE_FLAG_VERBOSE | sre.SRE_FLAG_ASCII | sre.SRE_FLAG_LOCALE


class RegexError(ValueError):
    """A pattern RE2/J would not compile; the text says why."""


@functools.lru_cache(maxsize=512)  # a member's regex is matched at each of its heartbeats
def compile_re2(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled, or RegexError (not cached: refused again each time)."""
    try:
        parsed = sre_parse.parse(pattern)
        compiled = re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        raise RegexError(str(exc)) from None
    if parsed.state.flags & _FLAGS:
        raise RegexError("this flag is not supported")
    stack: list[Any] = [parsed]
    while stack:  # no recursion: the tree is as deep as the pattern nests
        for op, av in stack.pop():
            if op in _UNSUPPORTED:
                raise RegexError(_UNSUPPORTED[op])
            if op in _REPEATS:
                low, high, sub = av
                if low > MAX_REPEAT_COUNT or (high != sre.MAXREPEAT and high > MAX_REPEAT_COUNT):
                    raise RegexError(f"repeat count above {MAX_REPEAT_COUNT}")
                stack.append(sub)
            elif op == sre.SUBPATTERN:
                _, add_flags, _, sub = av
                if add_flags & _FLAGS:
                    raise RegexError("this flag is not supported")
                stack.append(sub)
            elif op == sre.BRANCH:
                stack.extend(av[1])
    return compiled
