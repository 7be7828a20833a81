"""The server-side assignors, ``uniform`` and ``range`` (``group.consumer.assignors``).

Each takes the members' subscriptions (member id -> subscribed topic names), the subscribed
topics' metadata and the current target assignment, and returns the next target assignment.

``uniform`` (Kafka's UniformAssignor): every subscribed partition is assigned, each member
gets a balanced share of the partitions of the topics it subscribes to, and a partition stays
with its current target owner whenever balance allows. Kafka reaches this with two builders
(homogeneous, heterogeneous subscriptions), and so do we: quotas for homogeneous groups (linear
in partitions), and for heterogeneous ones a sticky pass plus moves from the most to the least
loaded eligible member (quadratic: meant for small groups). The balance and stickiness
properties are Kafka's; the exact partitions chosen to move may differ.

``range`` (Kafka's RangeAssignor): per topic, the members subscribed to it, in Kafka's order
(members with an instance id first, by instance id, then the others by member id), get
contiguous ranges, the first ``partitions % members`` one partition more. Kafka's
range is also sticky towards the current assignment when the member count is unchanged; here
it is recomputed, which is the same result when members neither join nor leave.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from coordinator.consumer_group.model import Assignment, TopicInfo

# Kafka's built-in assignor classes and the names they answer to (group.consumer.assignors takes
# either: GroupCoordinatorConfig.consumerGroupAssignors)
ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def assignor_names(value: str) -> tuple[str, ...]:
    """``group.consumer.assignors``' assignors by name, a class name as the name it answers to."""
    return tuple(ASSIGNOR_CLASSES.get(n, n) for n in value.split(","))


Subscriptions = Mapping[str, frozenset[str]]
InstanceIds = Mapping[str, str | None]  # member id -> instance id (static members)
Assignor = Callable[
    [Subscriptions, Mapping[str, TopicInfo], Mapping[str, Assignment], InstanceIds],
    dict[str, Assignment],
]


def _freeze(raw: dict[str, dict[uuid.UUID, set[int]]]) -> dict[str, Assignment]:
    return {m: {t: frozenset(ps) for t, ps in a.items() if ps} for m, a in raw.items()}


def _homogeneous(
    subs: Subscriptions, topics: Mapping[str, TopicInfo], current: Mapping[str, Assignment]
) -> dict[str, Assignment]:
    """Every member subscribes to the same topics (Kafka's UniformHomogeneousAssignmentBuilder):
    quotas first (``partitions // members``, one more for the first ``partitions % members``,
    given to the members that already hold the most, so fewest partitions move), then each
    member keeps what it has up to its quota and the rest go to members under quota."""
    members = sorted(subs)
    names = next(iter(subs.values()))
    valid = {topics[n].topic_id: topics[n].partitions for n in names if n in topics}
    everything = [(t, p) for t in sorted(valid, key=str) for p in range(valid[t])]
    kept: dict[str, list[tuple[uuid.UUID, int]]] = {}
    seen: set[tuple[uuid.UUID, int]] = set()
    for m in members:
        mine = []
        for t, parts in sorted(current.get(m, {}).items(), key=lambda kv: str(kv[0])):
            for p in sorted(parts):
                if p < valid.get(t, 0) and (t, p) not in seen:
                    seen.add((t, p))
                    mine.append((t, p))
        kept[m] = mine
    share, extra = divmod(len(everything), len(members))
    by_holding = sorted(members, key=lambda m: (-len(kept[m]), m))
    quota = {m: share + (1 if i < extra else 0) for i, m in enumerate(by_holding)}
    owner: dict[tuple[uuid.UUID, int], str] = {}
    for m in members:
        for tp in kept[m][: quota[m]]:
            owner[tp] = m
    load = {m: min(len(kept[m]), quota[m]) for m in members}
    short = [m for m in by_holding if load[m] < quota[m]]
    i = 0
    for tp in everything:
        if tp in owner:
            continue
        while load[short[i]] >= quota[short[i]]:
            i += 1
        owner[tp] = short[i]
        load[short[i]] += 1
    raw: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for (topic_id, p), m in owner.items():
        raw[m].setdefault(topic_id, set()).add(p)
    return _freeze(raw)


def uniform(
    subs: Subscriptions,
    topics: Mapping[str, TopicInfo],
    current: Mapping[str, Assignment],
    instance_ids: InstanceIds | None = None,
) -> dict[str, Assignment]:
    if subs and len(set(subs.values())) == 1:
        return _homogeneous(subs, topics, current)
    members = sorted(subs)
    eligible: dict[uuid.UUID, list[str]] = {}
    for name, info in topics.items():
        eligible[info.topic_id] = [m for m in members if name in subs[m]]
    owner: dict[tuple[uuid.UUID, int], str] = {}
    load = dict.fromkeys(members, 0)
    # sticky: keep what the current target gave, for partitions that still exist and topics the
    # member still subscribes to
    parts_of = {info.topic_id: info.partitions for info in topics.values()}
    for m in members:
        for topic_id, parts in sorted(current.get(m, {}).items()):
            if m not in eligible.get(topic_id, ()):
                continue
            for p in sorted(parts):
                if p < parts_of[topic_id] and (topic_id, p) not in owner:
                    owner[(topic_id, p)] = m
                    load[m] += 1
    # the rest to the least loaded eligible member
    for name in sorted(topics):
        info = topics[name]
        who = eligible[info.topic_id]
        if not who:
            continue
        for p in range(info.partitions):
            if (info.topic_id, p) not in owner:
                m = min(who, key=lambda x: (load[x], x))
                owner[(info.topic_id, p)] = m
                load[m] += 1
    # balance: move partitions from the most loaded member to a less loaded eligible one
    moved = True
    while moved:
        moved = False
        for tp in sorted(owner, key=lambda tp: (-load[owner[tp]], str(tp[0]), -tp[1])):
            a = owner[tp]
            b = min(eligible[tp[0]], key=lambda x: (load[x], x))
            if load[b] < load[a] - 1:
                owner[tp] = b
                load[a] -= 1
                load[b] += 1
                moved = True
                break
    raw: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for (topic_id, p), m in owner.items():
        raw[m].setdefault(topic_id, set()).add(p)
    return _freeze(raw)


def _range_order(member_id: str, instance_ids: InstanceIds) -> tuple[int, str]:
    """Kafka's RangeAssignor.sortMemberIds."""
    instance_id = instance_ids.get(member_id)
    return (1, member_id) if instance_id is None else (0, instance_id)


def range_assignor(
    subs: Subscriptions,
    topics: Mapping[str, TopicInfo],
    current: Mapping[str, Assignment],
    instance_ids: InstanceIds | None = None,
) -> dict[str, Assignment]:
    ids = instance_ids or {}
    order = sorted(subs, key=lambda m: _range_order(m, ids))
    raw: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in subs}
    for name, info in topics.items():
        who = [m for m in order if name in subs[m]]
        if not who:
            continue
        share, extra = divmod(info.partitions, len(who))
        start = 0
        for i, m in enumerate(who):
            n = share + (1 if i < extra else 0)
            if n:
                raw[m][info.topic_id] = set(range(start, start + n))
            start += n
    return _freeze(raw)


ASSIGNORS: Mapping[str, Assignor] = {"uniform": uniform, "range": range_assignor}
