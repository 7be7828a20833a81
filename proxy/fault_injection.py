"""Fault injection: make chosen APIs fail, stall or lose their connection, on purpose.

Off by default. For kafkad's own tests and for users' compatibility runs ("does my client
survive NOT_COORDINATOR?"), set the broker config ``kafkad.fault.injection`` to a spec::

    seed=7; produce:error=not_leader_or_follower@0.3; fetch,list_offsets:delay=250@0.1; *:drop@0.01

A spec is items separated by ``;``. ``seed=N`` seeds the random draws (default 0), so a run
that sends the same requests in the same order sees the same faults. Every other item is a
rule ``APIS:ACTION[@PROBABILITY]`` (probability 0..1, default 1):

* ``APIS``: API names in snake case (``produce``, ``find_coordinator``) or numeric keys,
  separated by ``,``; ``*`` is every API except ApiVersions (name that one to include it).
  ``APIS[GLOB]`` narrows the rule to requests whose client id matches the shell pattern GLOB
  (``produce[billing-*]:drop``); a null client id is matched as the empty string.
* ``ACTION``:
  - ``error=NAME``: answer without running the handler, with error NAME (any ``ErrorCode``
    name, any case: ``NOT_COORDINATOR``, ``coordinator_load_in_progress``,
    ``CONCURRENT_TRANSACTIONS``, ``REQUEST_TIMED_OUT``...) on every item of the API's own
    response shape (``proxy.error_replies.error_reply``). Nothing is executed, so a retry
    never duplicates a write. An acks=0 Produce has no response: its connection is closed, as
    Kafka does for a failed acks=0 produce.
  - ``delay=MS``: wait MS milliseconds before handling the request (trio's clock).
  - ``drop``: close the connection without handling the request.
  - ``drop_after``: handle the request, then close the connection without answering (the
    write happened, the client never hears of it: the case idempotent producers exist for).

A ``partition broker=N for=MS [after=MS] [client=GLOB]`` item (``kafkad proxy`` only; the
broker ignores it) cuts matching clients off upstream broker N for MS milliseconds, starting
AFTER milliseconds (default 0) after the proxy started: the proxy closes their open
connections to N when the window opens, and while it is open closes any connection to N at
its next request (a new connection is accepted, then closed at its first request: the
client id is only known then). No draw is made, so partitions never shift request faults.

A ``crash=POINT[@PROBABILITY]`` item makes the broker process exit at once (``os._exit``
with ``CRASH_EXIT_CODE``, no cleanup, nothing flushed: a ``kill -9`` at a chosen moment) when
the transaction coordinator reaches POINT, for the crash tests of the transaction machinery:

* ``txn_after_prepare``: right after a PrepareCommit/PrepareAbort record is durable, before any
  marker (the outcome is decided, no partition knows it yet);
* ``txn_after_first_marker``: right after the first marker of a completion that has several
  partitions (some partitions have their marker, others not).

Crash draws come from their own generator (seeded from ``seed`` too), so adding a crash item
leaves the request faults' draws unchanged. A restarted broker with the same spec draws the
same sequence again: give each restart its own seed, or it may crash at the same spot forever.

Each rule that matches a request draws once from the seeded generator, in spec order. Delays
add up; the first ``error`` that fires wins; a firing ``drop`` beats everything else. The draws
are per broker, so with several connections the interleaving of their requests decides which
request sees which fault: deterministic for one connection, reproducible in distribution
otherwise.

Pure: ``parse_spec`` and ``FaultInjector.decide`` do no I/O and never await; the dispatcher
(``proxy/dispatch.py``) acts on the returned ``Fault``.
"""

from __future__ import annotations

import fnmatch
import random
from collections.abc import Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map

API_VERSIONS_KEY = 18
ACTIONS = ("error", "delay", "drop", "drop_after")
CRASH_POINTS = ("txn_after_prepare", "txn_after_first_marker")
CRASH_EXIT_CODE = 86


def _api_names() -> Mapping[str, int]:
    # kio's names are the schema names in snake case: "produce", "find_coordinator", ...
    return {name: int(key) for key, name in api_key_map.items()}


@dataclass(frozen=True, slots=True)
class Rule:
    api_keys: frozenset[int] | None  # None: every API but ApiVersions
    action: str  # one of ACTIONS
    error: ErrorCode | None = None
    delay_ms: int = 0
    probability: float = 1.0
    client: str | None = None  # a client id glob; None: every client

    def matches(self, api_key: int, client_id: str | None = None) -> bool:
        if self.client is not None and not fnmatch.fnmatchcase(client_id or "", self.client):
            return False
        if self.api_keys is None:
            return api_key != API_VERSIONS_KEY
        return api_key in self.api_keys


@dataclass(frozen=True, slots=True)
class PartitionRule:
    """Clients matching ``client`` cut off upstream broker ``broker`` during
    [after_ms, after_ms + for_ms) since the proxy started."""

    broker: int
    for_ms: int
    after_ms: int = 0
    client: str | None = None

    def active(self, node_id: int | None, client_id: str | None, elapsed_ms: float) -> bool:
        if node_id != self.broker or not self.after_ms <= elapsed_ms < self.after_ms + self.for_ms:
            return False
        return self.client is None or fnmatch.fnmatchcase(client_id or "", self.client)


@dataclass(frozen=True, slots=True)
class CrashRule:
    point: str  # one of CRASH_POINTS
    probability: float = 1.0


@dataclass(frozen=True, slots=True)
class FaultSpec:
    seed: int
    rules: tuple[Rule, ...]
    crashes: tuple[CrashRule, ...] = ()
    partitions: tuple[PartitionRule, ...] = ()


@dataclass(frozen=True, slots=True)
class Fault:
    """What to do with one request; ``Fault()`` is "nothing"."""

    error: ErrorCode | None = None
    delay_ms: int = 0
    drop: bool = False  # close before handling
    drop_after: bool = False  # handle, then close without answering

    @property
    def none(self) -> bool:
        return self == NO_FAULT


NO_FAULT = Fault()


def parse_spec(text: str) -> FaultSpec | None:
    """The spec of ``kafkad.fault.injection``; None for an empty one; ValueError if malformed."""
    seed, rules, crashes, partitions = 0, [], [], []
    names = _api_names()
    for raw in text.split(";"):
        item = raw.strip()
        if not item:
            continue
        if item.startswith("seed="):
            seed = int(item[5:])
            continue
        if item.startswith("crash="):
            crashes.append(_crash_rule(item))
            continue
        if item.split(None, 1)[0] == "partition":
            partitions.append(_partition_rule(item))
            continue
        apis, sep, rest = item.partition(":")
        if not sep:
            raise ValueError(f"fault rule {item!r}: expected APIS:ACTION[@PROBABILITY]")
        action_text, at, prob_text = rest.partition("@")
        probability = float(prob_text) if at else 1.0
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"fault rule {item!r}: probability must be within 0..1")
        rules.append(_rule(item, apis.strip(), action_text.strip(), probability, names))
    if not rules and not crashes and not partitions:
        return None
    return FaultSpec(seed, tuple(rules), tuple(crashes), tuple(partitions))


def _partition_rule(item: str) -> PartitionRule:
    fields: dict[str, str] = {}
    for word in item.split()[1:]:
        name, eq, value = word.partition("=")
        if not eq or name not in ("broker", "for", "after", "client") or name in fields:
            raise ValueError(
                f"fault rule {item!r}: expected broker=N for=MS [after=MS] [client=GLOB]"
            )
        fields[name] = value
    try:
        broker, for_ms = int(fields["broker"]), int(fields["for"])
        after_ms = int(fields.get("after", "0"))
    except (KeyError, ValueError):
        raise ValueError(
            f"fault rule {item!r}: broker=N and for=MS are required integers"
        ) from None
    if for_ms <= 0 or after_ms < 0:
        raise ValueError(f"fault rule {item!r}: for must be positive and after not negative")
    return PartitionRule(broker, for_ms, after_ms, fields.get("client"))


def _crash_rule(item: str) -> CrashRule:
    point, at, prob_text = item[len("crash=") :].partition("@")
    point = point.strip().lower()
    if point not in CRASH_POINTS:
        raise ValueError(f"fault rule {item!r}: crash point must be one of {CRASH_POINTS}")
    probability = float(prob_text) if at else 1.0
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"fault rule {item!r}: probability must be within 0..1")
    return CrashRule(point, probability)


def _rule(
    item: str, apis: str, action_text: str, probability: float, names: Mapping[str, int]
) -> Rule:
    client: str | None = None
    if apis.endswith("]") and "[" in apis:
        apis, _, glob = apis[:-1].partition("[")
        client, apis = glob, apis.strip()
    keys: frozenset[int] | None = None
    if apis != "*":
        found = set()
        for api in apis.split(","):
            api = api.strip().lower()
            if api.isdigit():
                found.add(int(api))
            elif api in names:
                found.add(names[api])
            else:
                raise ValueError(f"fault rule {item!r}: unknown API {api!r}")
        keys = frozenset(found)
    action, eq, arg = action_text.partition("=")
    if action == "error" and eq:
        try:
            code = ErrorCode[arg.strip().lower()]
        except KeyError:
            raise ValueError(f"fault rule {item!r}: unknown error {arg!r}") from None
        return Rule(keys, action, error=code, probability=probability, client=client)
    if action == "delay" and eq:
        delay = int(arg)
        if delay < 0:
            raise ValueError(f"fault rule {item!r}: negative delay")
        return Rule(keys, action, delay_ms=delay, probability=probability, client=client)
    if action in ("drop", "drop_after") and not eq:
        return Rule(keys, action, probability=probability, client=client)
    raise ValueError(
        f"fault rule {item!r}: action must be error=NAME, delay=MS, drop or drop_after"
    )


class FaultInjector:
    """A spec plus its seeded generator: one per broker."""

    def __init__(self, spec: FaultSpec) -> None:
        self.spec = spec
        self._rng = random.Random(spec.seed)
        self._crash_rng = random.Random(spec.seed + 1)
        self.injected = 0  # requests that got a fault (tests, logs)

    def crash_here(self, point: str) -> bool:
        """Whether the broker must exit now at crash point ``point`` (one draw per matching
        crash rule, in spec order)."""
        hit = False
        for rule in self.spec.crashes:
            if rule.point == point and self._crash_rng.random() < rule.probability:
                hit = True
        return hit

    def partitioned(self, node_id: int | None, client_id: str | None, elapsed_ms: float) -> bool:
        """Whether a ``partition`` rule cuts this client off broker ``node_id`` now."""
        return any(p.active(node_id, client_id, elapsed_ms) for p in self.spec.partitions)

    def decide(self, api_key: int, client_id: str | None = None) -> Fault:
        error: ErrorCode | None = None
        delay = 0
        drop = drop_after = False
        for rule in self.spec.rules:
            if not rule.matches(api_key, client_id):
                continue
            if self._rng.random() >= rule.probability:
                continue
            if rule.action == "error":
                error = error or rule.error
            elif rule.action == "delay":
                delay += rule.delay_ms
            elif rule.action == "drop":
                drop = True
            else:
                drop_after = True
        fault = Fault(error, delay, drop, drop_after)
        if fault != NO_FAULT:
            self.injected += 1
        return fault


def injector_from_config(text: str) -> FaultInjector | None:
    spec = parse_spec(text)
    return FaultInjector(spec) if spec is not None else None
