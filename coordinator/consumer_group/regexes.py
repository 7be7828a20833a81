"""Server-side regular-expression subscriptions (KIP-848): checking a regex, resolving it
against the topics, and when a group's resolutions are refreshed.

Theory of operation
-------------------
A member may subscribe with ``SubscribedTopicRegex`` instead of topic names. As Kafka 4.x does
(``GroupMetadataManager.maybeUpdateRegularExpressions``), the group keeps one resolution per
regex its members use: the topic names it matched, the metadata it was resolved against
(``version``) and when (``timestamp_ms``); these are stored in ``__consumer_offsets`` as
ConsumerGroupRegularExpression records (type 16, records.py) and replayed at load, and a member's
subscribed topics are its names plus its regex's *resolved* topics, not a fresh match.

* A regex no member used before is resolved when the heartbeat naming it arrives. Kafka
  resolves it on a background thread and bumps the group epoch when the result is written;
  resolving a regex over the topic names of one node is cheap, so here that work completes
  within the heartbeat, and the same records (the resolution, then the group epoch) are written
  before the answer.
* The resolutions are refreshed at a heartbeat when the topics changed since they were made
  and at least ``REFRESH_MIN_INTERVAL_MS`` passed since the last refresh (Kafka's
  ``REGEX_BATCH_REFRESH_MIN_INTERVAL_MS``, 10 s): a topic created later is picked up by the
  next heartbeat after that. A topic deleted leaves the subscription metadata at once (the
  resolution keeps its name until the refresh, as in Kafka).
* A regex no member uses any more is forgotten (its record tombstoned).

``version``: Kafka stores the offset of the metadata image the regex was resolved against.
kafkad has no metadata log, so it stores a 63-bit digest of the topic names and ids instead; it
is only compared for equality ("have the topics changed since"), as Kafka compares versions.

Syntax: Kafka compiles the regex with RE2/J and matches a topic name whole (``matches()``);
kafkad compiles it with RE2 (google-re2, the C++ library RE2/J is a port of) and matches it
whole, internal topics excluded. RE2 matches in time linear in the name, as RE2/J does: no
regex makes the broker's event loop backtrack for ages (Python's ``re`` would, on ``(a+)+b``
against a long run of ``a``). What RE2/J refuses is answered INVALID_REGULAR_EXPRESSION:
back-references (``\\1``, ``(?P=name)``), look-arounds (``(?=``, ``(?!``, ``(?<=``, ``(?<!``),
atomic groups ``(?>``, possessive quantifiers (``*+``, ``++``, ``?+``, ``}+``), conditionals
``(?(``, ``\\Z`` and repeat counts over 1000 (RE2/J's words for these are checked first, RE2's
error otherwise). RE2's syntax Python lacks (``(?<name>``, ``\\z``, ``\\pL``, ``[[:alpha:]]``)
is taken, as Kafka takes it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping

import re2

from coordinator.consumer_group.model import ConsumerGroup, ResolvedRegex, TopicInfo

REFRESH_MIN_INTERVAL_MS = 10_000
MAX_REPEAT = 1000  # RE2/J's parser refuses a larger repeat count (ERR_INVALID_REPEAT_SIZE)
_REPEAT = re.compile(r"\{([0-9]+)(,([0-9]*))?\}")

# RE2 refusals Python's re accepts, found outside character classes by _re2_refusal
_GROUP_OPENERS = {
    "(?=": "look-ahead",
    "(?!": "negative look-ahead",
    "(?<=": "look-behind",
    "(?<!": "negative look-behind",
    "(?>": "atomic group",
    "(?P=": "back-reference",
    "(?(": "conditional",
}


def _re2_refusal(regex: str) -> str | None:
    """What RE2/J would refuse in ``regex`` that Python's ``re`` accepts, or None."""
    i, n, in_class = 0, len(regex), False
    while i < n:
        c = regex[i]
        if c == "\\" and i + 1 < n:
            nxt = regex[i + 1]
            if not in_class and nxt in "123456789":
                return "back-references are not supported"
            if not in_class and nxt == "Z":
                return "\\Z is not supported"
            i += 2
            continue
        if in_class:
            if c == "[" and regex.startswith("[:", i):  # a POSIX class, [:alpha:]
                close = regex.find(":]", i + 2)
                i = i + 2 if close < 0 else close + 2
                continue
            if c == "]":
                in_class = False
            i += 1
            continue
        if c == "[":
            in_class = True
            i += 1
            if i < n and regex[i] == "^":
                i += 1
            if i < n and regex[i] == "]":  # a leading ] is a literal
                i += 1
            continue
        for opener, what in _GROUP_OPENERS.items():
            if regex.startswith(opener, i):
                return f"{what} is not supported"
        if c in "*+?}" and i + 1 < n and regex[i + 1] == "+":
            return "possessive quantifiers are not supported"
        if c == "{" and (rep := _REPEAT.match(regex, i)) is not None:
            low, high = int(rep[1]), rep[3]
            if low > MAX_REPEAT or (high and int(high) > MAX_REPEAT):
                return "invalid repeat count"
        i += 1
    return None


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # a member's bad regex is its answer, not a broker log line
    return options


_OPTIONS = _options()


def _compile(regex: str) -> re2._Regexp:
    """``regex`` compiled by RE2 (Perl syntax, as RE2/J's ``Pattern.compile``); raises
    ``re2.error``."""
    return re2.compile(regex, _OPTIONS)


# RE2's error texts that RE2/J (Go's regexp/syntax words) says otherwise
_RE2J_WORDS = {
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    "missing (": "unexpected )",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid named capture group": "invalid named capture",
}


def _description(exc: re2.error) -> str:
    """RE2's error without the fragment it quotes ("invalid escape sequence: \\1"), in
    RE2/J's words, as its ``PatternSyntaxException.getDescription()`` gives them."""
    text = exc.args[0] if exc.args else ""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    code = str(text).split(": ", 1)[0] or "invalid regular expression"
    return _RE2J_WORDS.get(code, code)


def regex_error(regex: str) -> str | None:
    """The INVALID_REGULAR_EXPRESSION message for ``regex``, or None when it compiles."""
    message = _re2_refusal(regex)
    if message is None:
        try:
            _compile(regex)
        except re2.error as exc:
            message = _description(exc)
    if message is None:
        return None
    return f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {message}."


def matching(regex: str, topics: Iterable[str]) -> frozenset[str]:
    """The topic names ``regex`` fully matches (none if it does not compile)."""
    try:
        pattern = _compile(regex)
    except re2.error:
        return frozenset()
    return frozenset(t for t in topics if pattern.fullmatch(t) is not None)


def version(topics: Mapping[str, TopicInfo]) -> int:
    """A digest of the topics (names and ids), standing for Kafka's metadata image version."""
    h = hashlib.blake2b(digest_size=8)
    for name in sorted(topics):
        h.update(name.encode() + b"\0" + topics[name].topic_id.bytes)
    return int.from_bytes(h.digest(), "big") >> 1


def used(g: ConsumerGroup) -> set[str]:
    return {m.subscribed_topic_regex for m in g.members.values() if m.subscribed_topic_regex}


def update(
    g: ConsumerGroup,
    topics: Mapping[str, TopicInfo],
    now_ms: int,
    wall_ms: int,
    describable: Callable[[str], bool] | None = None,
) -> bool:
    """Bring the group's resolutions up to date at a heartbeat: forget unused regexes, resolve
    new ones, refresh all when due (``now_ms`` schedules, ``wall_ms`` stamps the records).
    A resolution keeps only the topics ``describable`` allows (the heartbeating member's
    DESCRIBE, as Kafka resolves with the context of the member whose heartbeat refreshes).
    Returns whether any regex's topics changed (the caller then recomputes the subscription
    metadata and bumps the group epoch)."""
    wanted = used(g)
    for regex in [r for r in g.resolved_regexes if r not in wanted]:
        del g.resolved_regexes[regex]
    if not wanted:  # nothing to resolve: spare every heartbeat the O(topics) digest
        return False
    current = version(topics)
    due = g.regex_version != current and now_ms >= g.regex_refreshed_at + REFRESH_MIN_INTERVAL_MS
    if not (wanted - g.resolved_regexes.keys()) and not (due and g.resolved_regexes):
        return False
    # a batch, as Kafka's refresh: every regex of the group resolved against the same topics
    changed = False
    for regex in sorted(wanted):
        found = matching(regex, topics)
        if describable is not None:
            found = frozenset(t for t in found if describable(t))
        old = g.resolved_regexes.get(regex)
        if old is None or old.topics != found:
            g.resolved_regexes[regex] = ResolvedRegex(found, current, wall_ms)
            changed = True
    g.regex_version, g.regex_refreshed_at = current, now_ms
    return changed
