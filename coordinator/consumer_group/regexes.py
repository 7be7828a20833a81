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
* The resolutions are refreshed at a heartbeat more than ``REFRESH_MIN_INTERVAL_MS`` after
  the last refresh (Kafka's ``REGEX_BATCH_REFRESH_MIN_INTERVAL_MS``, 10 s) when the topics
  changed since, or when the last refresh is older than ``group.consumer.regex.refresh.
  interval.ms`` (10 minutes, at least 10 s; Kafka's batch refresh max interval): a topic
  created later is picked up by the first heartbeat after the 10 s, and a topic the member's
  principal was granted DESCRIBE on since (the topics unchanged) within the interval. A
  topic deleted leaves the subscription metadata at once (the
  resolution keeps its name until the refresh, as in Kafka).
* A regex no member uses any more is forgotten (its record tombstoned).

``version``: Kafka stores the offset of the metadata image the regex was resolved against.
kafkad has no metadata log, so it stores a 63-bit digest of the topic names and ids instead; it
is only compared for equality ("have the topics changed since"), as Kafka compares versions.

Syntax: Kafka compiles the regex with RE2/J and matches a topic name whole (``matches()``);
kafkad compiles it in the same dialect with RE2 (``coordinator/regex.py``, shared with
ListTransactions' TransactionalIdPattern) and matches it whole, internal topics excluded, in
time linear in the name. What RE2/J refuses is answered INVALID_REGULAR_EXPRESSION.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping

from coordinator.consumer_group.model import ConsumerGroup, ResolvedRegex, TopicInfo
from coordinator.regex import RegexError, compile_re2

REFRESH_MIN_INTERVAL_MS = 10_000
REFRESH_INTERVAL_MS = 600_000  # group.consumer.regex.refresh.interval.ms's default


def regex_error(regex: str) -> str | None:
    """The INVALID_REGULAR_EXPRESSION message for ``regex``, or None when it compiles."""
    try:
        compile_re2(regex)
    except RegexError as exc:
        return f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {exc}."
    return None


def matching(regex: str, topics: Iterable[str]) -> frozenset[str]:
    """The topic names ``regex`` fully matches (none if it does not compile)."""
    try:
        pattern = compile_re2(regex)
    except RegexError:
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
    refresh_interval_ms: int = REFRESH_INTERVAL_MS,
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
    # Kafka's maybeUpdateRegularExpressions: nothing within 10 s of the last refresh; after
    # that, when topics changed or the last refresh is older than the refresh interval
    due = now_ms > g.regex_refreshed_at + REFRESH_MIN_INTERVAL_MS and (
        g.regex_version != current or now_ms > g.regex_refreshed_at + refresh_interval_ms
    )
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
