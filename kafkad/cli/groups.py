"""``kafkad groups list|describe|reset-offsets|delete``.

list: ListGroups (v5: each group's type, classic or consumer).

describe: DescribeGroups (members; each member's assignment decoded from the consumer
protocol); a group DescribeGroups does not know (Dead: Kafka describes classic groups only) is
asked for with ConsumerGroupDescribe, when the broker serves it: a consumer-protocol (KIP-848)
group, shown with its group and target assignment epochs and each member's epoch, assignment
and target assignment. Then OffsetFetch (committed offsets), and two ListOffsets per partition:
the high watermark (read_uncommitted) and the last stable offset (read_committed). ``lag`` is
HW - committed, ``lag_lso`` LSO - committed: what a read_committed consumer still has to
read (an open transaction holds the LSO back).

reset-offsets follows Kafka's ConsumerGroupCommand: it plans new offsets (``--to-earliest``,
``--to-latest``, ``--to-current``, ``--to-offset N``, ``--shift-by N``, ``--to-datetime``,
``--by-duration``), clamped into [log start, log end], for ``--topic T[:P,P]`` or
``--all-topics`` (every partition the group has an offset for); it prints the plan (a dry run,
also ``--dry-run``) unless ``--execute``; it is refused while the group has members (state
other than Empty or Dead).

Deviations from ConsumerGroupCommand: a refused reset exits 1 (Kafka prints the error and
exits 0); ``--from-file``, ``--all-groups`` and ``--export`` are not offered; a lag is never
shown below 0.
"""

from __future__ import annotations

import argparse
import datetime
import re
import struct
import time
from typing import Any

from kafkad.cli.options import UsageError, add_common
from kafkad.cli.output import emit, report_deletions
from kafkad.client.cluster import API, GROUP, Client
from kafkad.client.errors import ClientError, KafkaError, check
from kafkad.client.fetching import EARLIEST, LATEST, READ_COMMITTED, READ_UNCOMMITTED, list_offset


def register(nouns: Any) -> None:
    p = nouns.add_parser(
        "groups", help="consumer groups: list, describe (lag), reset offsets, delete"
    )
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    v = verbs.add_parser("list", help="every group")
    _done(v, list_groups)
    v = verbs.add_parser(
        "describe", help="members, assignment, committed offsets, lag (HW and LSO)"
    )
    v.add_argument("group")
    _done(v, describe)
    v = verbs.add_parser("reset-offsets", help="plan (default) or --execute new committed offsets")
    v.add_argument("group")
    scope = v.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="TOPIC[:P,P]")
    scope.add_argument(
        "--all-topics", action="store_true", help="every partition the group has an offset for"
    )
    to = v.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument(
        "--to-current", action="store_true", help="the committed offset (else the log end)"
    )
    to.add_argument("--to-offset", type=int, metavar="N")
    to.add_argument("--shift-by", type=int, metavar="N")
    to.add_argument(
        "--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss", help="UTC unless an offset is given"
    )
    to.add_argument(
        "--by-duration", metavar="PnDTnHnMnS", help="that long before now, e.g. PT1H or P1DT12H"
    )
    run = v.add_mutually_exclusive_group()
    run.add_argument("--execute", action="store_true", help="commit the plan (default: dry run)")
    run.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")
    _done(v, reset_offsets)
    v = verbs.add_parser("delete", help="delete empty groups")
    v.add_argument("group", nargs="+")
    _done(v, delete)


def _done(parser: argparse.ArgumentParser, run: Any) -> None:
    add_common(parser)
    parser.set_defaults(run=run)


def decode_assignment(data: bytes) -> list[tuple[str, int]]:
    """The consumer protocol's Assignment: version i16, [topic string, [partition i32]],
    user data (ignored). Empty bytes: no assignment."""
    if not data:
        return []
    pos = 2
    out: list[tuple[str, int]] = []
    (topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    for _ in range(max(topics, 0)):
        (size,) = struct.unpack_from(">h", data, pos)
        topic = data[pos + 2 : pos + 2 + size].decode()
        pos += 2 + size
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(max(count, 0)):
            out.append((topic, struct.unpack_from(">i", data, pos)[0]))
            pos += 4
    return out


def list_groups(args: argparse.Namespace, client: Client) -> int:
    client.metadata([])
    out = []
    for node in sorted(client.brokers):
        resp = client.send(API.LIST_GROUPS, {"states_filter": []}, node)
        check(int(resp.error_code), f"listing groups on broker {node}")
        out += [
            {
                "group": str(g.group_id),
                "type": str(getattr(g, "group_type", "") or "classic"),
                "state": str(getattr(g, "group_state", "")),
                "protocol_type": str(g.protocol_type),
            }
            for g in resp.groups
        ]
    out.sort(key=lambda g: g["group"])
    emit(
        args.json,
        out,
        ("GROUP", "TYPE", "STATE", "PROTOCOL TYPE"),
        [(g["group"], g["type"], g["state"], g["protocol_type"]) for g in out],
    )
    return 0


def _describe_group(client: Client, group: str) -> Any:
    def once(node: int) -> Any:
        resp = client.send(API.DESCRIBE_GROUPS, {"groups": [group]}, node)
        (g,) = resp.groups
        check(int(g.error_code), f"group {group!r}")
        return g

    return client.coordinated(group, GROUP, once)


def _describe_consumer_group(client: Client, group: str) -> Any | None:
    """ConsumerGroupDescribe of ``group``; None when it is not a consumer-protocol group (or
    the broker does not serve the API)."""

    def once(node: int) -> Any:
        conn = client.broker(node)
        key, (low, _) = API.CONSUMER_GROUP_DESCRIBE
        theirs = conn.versions.get(key)
        if theirs is None or theirs[1] < low:
            return None
        resp = client.send(API.CONSUMER_GROUP_DESCRIBE, {"group_ids": [group]}, node)
        (g,) = resp.groups
        if int(g.error_code) == 69:  # GROUP_ID_NOT_FOUND
            return None
        check(int(g.error_code), f"group {group!r}")
        return g

    return client.coordinated(group, GROUP, once)


def _described(assignment: Any) -> list[tuple[str, int]]:
    return sorted(
        (str(t.topic_name), int(p)) for t in assignment.topic_partitions for p in t.partitions
    )


def committed_offsets(client: Client, group: str) -> dict[tuple[str, int], int]:
    def once(node: int) -> dict[tuple[str, int], int]:
        resp = client.send(
            API.OFFSET_FETCH, {"group_id": group, "topics": None, "require_stable": False}, node
        )
        check(int(getattr(resp, "error_code", 0)), f"fetching offsets of group {group!r}")
        out = {}
        for t in resp.topics:
            for p in t.partitions:
                check(int(p.error_code), f"group {group!r} offset of {t.name}-{p.partition_index}")
                if int(p.committed_offset) >= 0:
                    out[(str(t.name), int(p.partition_index))] = int(p.committed_offset)
        return out

    return client.coordinated(group, GROUP, once)


def describe(args: argparse.Namespace, client: Client) -> int:
    g = _describe_group(client, args.group)
    cg = None
    if str(g.group_state) == "Dead":
        cg = _describe_consumer_group(client, args.group)
        if cg is None:
            raise KafkaError(69, f"group {args.group!r}")  # GROUP_ID_NOT_FOUND
    owner: dict[tuple[str, int], str] = {}
    members: list[dict[str, Any]] = []
    for m in cg.members if cg is not None else ():
        assigned = _described(m.assignment)
        for tp in assigned:
            owner[tp] = str(m.member_id)
        members.append(
            {
                "member_id": str(m.member_id),
                "client_id": str(m.client_id),
                "host": str(m.client_host),
                "assignment": [f"{t}-{p}" for t, p in assigned],
                "member_epoch": int(m.member_epoch),
                "target_assignment": [f"{t}-{p}" for t, p in _described(m.target_assignment)],
            }
        )
    for m in g.members if cg is None else ():
        assigned = (
            decode_assignment(bytes(m.member_assignment))
            if str(g.protocol_type) == "consumer"
            else []
        )
        for tp in assigned:
            owner[tp] = str(m.member_id)
        members.append(
            {
                "member_id": str(m.member_id),
                "client_id": str(m.client_id),
                "host": str(m.client_host),
                "assignment": [f"{t}-{p}" for t, p in assigned],
            }
        )
    committed = committed_offsets(client, args.group)
    offsets = []
    for topic, part in sorted(set(committed) | set(owner)):
        hw = list_offset(client, topic, part, LATEST, READ_UNCOMMITTED)
        lso = list_offset(client, topic, part, LATEST, READ_COMMITTED)
        c = committed.get((topic, part))
        offsets.append(
            {
                "topic": topic,
                "partition": part,
                "committed": c,
                "high_watermark": hw,
                "last_stable_offset": lso,
                "lag": None if c is None else max(hw - c, 0),
                "lag_lso": None if c is None else max(lso - c, 0),
                "member_id": owner.get((topic, part)),
            }
        )
    data: dict[str, Any] = {
        "group": args.group,
        "type": "classic" if cg is None else "consumer",
        "state": str(g.group_state if cg is None else cg.group_state),
        "protocol": str(g.protocol_data if cg is None else cg.assignor_name),
        "members": members,
        "offsets": offsets,
    }
    if cg is not None:
        data["group_epoch"] = int(cg.group_epoch)
        data["assignment_epoch"] = int(cg.assignment_epoch)
    if args.json:
        emit(True, data)
        return 0
    protocol = data["protocol"] or "-"
    if cg is not None:
        print(
            f"group {args.group}: consumer protocol, {data['state']}, {len(members)} member(s), "
            f"assignor {protocol}, group epoch {data['group_epoch']}, target assignment epoch "
            f"{data['assignment_epoch']}"
        )
        if members:
            emit(
                False,
                None,
                ("MEMBER", "CLIENT", "HOST", "EPOCH", "ASSIGNMENT", "TARGET"),
                [
                    (
                        m["member_id"],
                        m["client_id"],
                        m["host"],
                        m["member_epoch"],
                        ",".join(m["assignment"]),
                        ",".join(m["target_assignment"]),
                    )
                    for m in members
                ],
            )
    else:
        print(f"group {args.group}: {data['state']}, {len(members)} member(s), protocol {protocol}")
    if members and cg is None:
        emit(
            False,
            None,
            ("MEMBER", "CLIENT", "HOST", "ASSIGNMENT"),
            [
                (m["member_id"], m["client_id"], m["host"], ",".join(m["assignment"]))
                for m in members
            ],
        )
    keys = (
        "topic",
        "partition",
        "committed",
        "high_watermark",
        "last_stable_offset",
        "lag",
        "lag_lso",
        "member_id",
    )
    emit(
        False,
        None,
        ("TOPIC", "PARTITION", "COMMITTED", "HW", "LSO", "LAG", "LAG(LSO)", "MEMBER"),
        [[o[k] for k in keys] for o in offsets],
    )
    return 0


def parse_datetime_ms(text: str) -> int:
    """Kafka's reset --to-datetime format (ISO 8601; no zone means UTC here)."""
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError as exc:
        raise UsageError(f"--to-datetime {text!r}: not YYYY-MM-DDTHH:mm:SS.sss") from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return int(when.timestamp() * 1000)


_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)


def parse_duration_ms(text: str) -> int:
    """Java's ``Duration.parse`` form (``PnDTnHnMn.nS``), as ``--by-duration`` takes it."""
    m = _DURATION.fullmatch(text)
    if not m or not any(m.group(i) for i in range(2, 6)) or text.upper().endswith("T"):
        raise UsageError(f"--by-duration {text!r}: not a duration like PT1H, P1DT12H or PT30M")
    days, hours, minutes = (int(m.group(i) or 0) for i in (2, 3, 4))
    seconds = float(m.group(5) or 0)
    total = ((days * 24 + hours) * 60 + minutes) * 60_000 + round(seconds * 1000)
    return -total if m.group(1) == "-" else total


def plan_offset(
    mode: str,
    value: int | None,
    current: int | None,
    start: int,
    end: int,
    at_time: int | None,
    where: str = "the partition",
) -> int:
    """A partition's new offset, clamped into [start, end] as ConsumerGroupCommand does."""
    if mode == "to_earliest":
        target = start
    elif mode == "to_latest":
        target = end
    elif mode == "to_current":  # as resetToCurrent: the committed offset, else the log end
        target = end if current is None else current
    elif mode == "to_offset":
        assert value is not None
        target = value
    elif mode == "shift_by":
        assert value is not None
        if current is None:  # as ConsumerGroupCommand's resetByShiftBy
            raise ClientError(
                f"cannot shift the offset of {where} since there is no current committed offset"
            )
        target = current + value
    else:  # to_datetime: the first offset at or after the time, else the end
        target = end if at_time is None or at_time < 0 else at_time
    return min(max(target, start), end)


def _partitions(client: Client, specs: list[str]) -> list[tuple[str, int]]:
    out = []
    for spec in specs:
        topic, _, parts = spec.partition(":")
        info = client.topic(topic)
        wanted = sorted(info.partitions) if not parts else [int(p) for p in parts.split(",")]
        for p in wanted:
            if p not in info.partitions:
                raise UsageError(f"topic {topic!r} has no partition {p}")
            out.append((topic, p))
    return out


def reset_offsets(args: argparse.Namespace, client: Client) -> int:
    g = _describe_group(client, args.group)
    state, count = str(g.group_state), len(g.members)
    if state == "Dead" and (cg := _describe_consumer_group(client, args.group)) is not None:
        state, count = str(cg.group_state), len(cg.members)  # a consumer-protocol group
    if state not in ("Empty", "Dead"):
        raise ClientError(
            f"group {args.group!r} is {state} with {count} member(s): offsets can only be "
            "reset when it is inactive (stop its consumers first)"
        )
    mode, value = next(
        (m, v)
        for m, v in (
            ("to_earliest", None),
            ("to_latest", None),
            ("to_current", None),
            ("to_offset", args.to_offset),
            ("shift_by", args.shift_by),
            ("to_datetime", None),
            ("by_duration", None),
        )
        if (getattr(args, m) not in (None, False))
    )
    when = parse_datetime_ms(args.to_datetime) if args.to_datetime else None
    if args.by_duration:  # Kafka: now minus the duration, then as --to-datetime
        when = int(time.time() * 1000) - parse_duration_ms(args.by_duration)
        mode = "to_datetime"
    committed = committed_offsets(client, args.group)
    plan = []
    scope = sorted(committed) if args.all_topics else _partitions(client, args.topic)
    for topic, part in scope:
        start = list_offset(client, topic, part, EARLIEST)
        end = list_offset(client, topic, part, LATEST)
        at = list_offset(client, topic, part, when) if when is not None else None
        current = committed.get((topic, part))
        plan.append(
            {
                "topic": topic,
                "partition": part,
                "current": current,
                "new": plan_offset(mode, value, current, start, end, at, f"{topic}-{part}"),
            }
        )
    if args.execute:
        _commit(client, args.group, plan)
    emit(
        args.json,
        {"group": args.group, "executed": args.execute, "offsets": plan},
        ("TOPIC", "PARTITION", "CURRENT", "NEW"),
        [(p["topic"], p["partition"], p["current"], p["new"]) for p in plan],
    )
    if not args.execute and not args.json:
        print("(dry run: add --execute to commit these offsets)")
    return 0


def _commit(client: Client, group: str, plan: list[dict[str, Any]]) -> None:
    topics: dict[str, list[dict[str, Any]]] = {}
    for p in plan:
        topics.setdefault(p["topic"], []).append(
            {
                "partition_index": p["partition"],
                "committed_offset": p["new"],
                "committed_leader_epoch": -1,
                "committed_metadata": "",
            }
        )
    data = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "generation_id": -1,
        "member_id": "",
        "retention_time_ms": -1,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }

    def once(node: int) -> None:
        resp = client.send(API.OFFSET_COMMIT, data, node)
        for t in resp.topics:
            for p in t.partitions:
                check(
                    int(p.error_code),
                    f"committing group {group!r} offset of {t.name}-{p.partition_index}",
                )

    client.coordinated(group, GROUP, once)


def delete(args: argparse.Namespace, client: Client) -> int:
    failed: list[tuple[str, KafkaError]] = []
    deleted = []
    for group in args.group:

        def once(node: int, group: str = group) -> int:
            resp = client.send(API.DELETE_GROUPS, {"groups_names": [group]}, node)
            (r,) = resp.results
            code = int(r.error_code)
            if code in (14, 15, 16):  # retriable coordinator errors
                check(code, f"deleting group {group!r}")
            return code

        code = client.coordinated(group, GROUP, once)
        if code:
            failed.append((group, KafkaError(code, f"deleting group {group!r}")))
        else:
            deleted.append(group)
    return report_deletions(args.json, "group", deleted, failed)
