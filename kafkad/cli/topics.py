"""``kafkad topics list|create|describe|delete|configs get|set|delete``."""

from __future__ import annotations

import argparse
from typing import Any

from kafkad.cli.options import UsageError, add_common, key_value
from kafkad.cli.output import emit, report_deletions
from kafkad.client.cluster import API, Client
from kafkad.client.errors import KafkaError, check

TOPIC_RESOURCE = 2
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations
_SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}


def register(nouns: Any) -> None:
    p = nouns.add_parser("topics", help="list, create, describe, delete topics; their configs")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    v = verbs.add_parser("list", help="every topic")
    v.add_argument("--internal", action="store_true", help="include internal topics")
    _common(v, list_topics)
    v = verbs.add_parser("create", help="create a topic")
    v.add_argument("topic")
    v.add_argument("--partitions", type=int, default=-1, help="default: the broker's")
    v.add_argument("--replication-factor", type=int, default=-1, help="default: the broker's")
    v.add_argument("--config", action="append", type=key_value, default=[], metavar="NAME=VALUE")
    v.add_argument("--if-not-exists", action="store_true")
    _common(v, create)
    v = verbs.add_parser("describe", help="partitions, leaders, replicas")
    v.add_argument("topic", nargs="+")
    _common(v, describe)
    v = verbs.add_parser("delete", help="delete topics")
    v.add_argument("topic", nargs="+")
    _common(v, delete)
    c = verbs.add_parser("configs", help="a topic's configs")
    cverbs = c.add_subparsers(dest="config_verb", metavar="VERB")
    v = cverbs.add_parser("get", help="configs and where each comes from")
    v.add_argument("topic")
    v.add_argument("name", nargs="*", help="only these configs")
    _common(v, configs_get)
    v = cverbs.add_parser("set", help="set configs on the topic")
    v.add_argument("topic")
    v.add_argument("config", nargs="+", type=key_value, metavar="NAME=VALUE")
    _common(v, configs_set)
    v = cverbs.add_parser("delete", help="drop topic overrides (back to the default)")
    v.add_argument("topic")
    v.add_argument("name", nargs="+")
    _common(v, configs_delete)


def _common(parser: argparse.ArgumentParser, run: Any) -> None:
    add_common(parser)
    parser.set_defaults(run=run)


def list_topics(args: argparse.Namespace, client: Client) -> int:
    resp = client.send(API.METADATA, {"topics": None, "allow_auto_topic_creation": False})
    rows = sorted(
        (str(t.name), len(t.partitions))
        for t in resp.topics
        if args.internal or not getattr(t, "is_internal", False)
    )
    emit(args.json, [{"topic": n, "partitions": p} for n, p in rows], ("TOPIC", "PARTITIONS"), rows)
    return 0


def create(args: argparse.Namespace, client: Client) -> int:
    topic = {
        "name": args.topic,
        "num_partitions": args.partitions,
        "replication_factor": args.replication_factor,
        "configs": [{"name": k, "value": v} for k, v in args.config],
    }
    resp = client.send(API.CREATE_TOPICS, {"topics": [topic], "timeout": int(args.timeout * 1000)})
    (result,) = resp.topics
    code = int(result.error_code)
    created = True
    if code == 36 and args.if_not_exists:  # TOPIC_ALREADY_EXISTS
        code, created = 0, False
    check(code, f"creating topic {args.topic!r}", getattr(result, "error_message", None))
    if created:
        parts = int(getattr(result, "num_partitions", args.partitions))
    else:  # the refusal carries no partition count (-1): the existing topic's, from Metadata
        parts = len(client.topic(args.topic).partitions)
    emit(
        args.json,
        {"topic": args.topic, "partitions": parts, "created": created},
        ("TOPIC", "PARTITIONS", "OUTCOME"),
        [(args.topic, parts, "created" if created else "already exists")],
    )
    return 0


def describe(args: argparse.Namespace, client: Client) -> int:
    out: list[dict[str, Any]] = []
    for name in args.topic:
        info = client.topic(name)
        for p in sorted(info.partitions.values(), key=lambda p: p.partition):
            out.append(
                {
                    "topic": name,
                    "topic_id": info.topic_id,
                    "partition": p.partition,
                    "leader": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "replicas": p.replicas,
                    "isr": p.isr,
                }
            )
    rows = [
        (
            d["topic"],
            d["partition"],
            d["leader"],
            ",".join(map(str, d["replicas"])),
            ",".join(map(str, d["isr"])),
        )
        for d in out
    ]
    emit(args.json, out, ("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"), rows)
    return 0


def delete(args: argparse.Namespace, client: Client) -> int:
    resp = client.send(
        API.DELETE_TOPICS,
        {
            "topic_names": list(args.topic),
            "topics": [{"name": t} for t in args.topic],
            "timeout": int(args.timeout * 1000),
        },
    )
    # each topic deleted or not on its own: every outcome is reported, not the first failure
    outcome = {str(r.name): r for r in resp.responses}
    deleted = [t for t in args.topic if t in outcome and not outcome[t].error_code]
    failed = [
        (
            t,
            KafkaError(
                int(outcome[t].error_code),
                f"deleting topic {t!r}",
                getattr(outcome[t], "error_message", None),
            ),
        )
        for t in args.topic
        if t in outcome and outcome[t].error_code
    ]
    return report_deletions(args.json, "topic", deleted, failed)


def configs_get(args: argparse.Namespace, client: Client) -> int:
    out = topic_configs(client, args.topic, args.name or None)
    rows = [(c["name"], "(sensitive)" if c["sensitive"] else c["value"], c["source"]) for c in out]
    emit(args.json, out, ("NAME", "VALUE", "SOURCE"), rows)
    return 0


def topic_configs(client: Client, topic: str, names: list[str] | None) -> list[dict[str, Any]]:
    """DescribeConfigs of one topic (``names`` None: all), sorted by name."""
    resource = {
        "resource_type": TOPIC_RESOURCE,
        "resource_name": topic,
        "configuration_keys": names,
    }
    resp = client.send(
        API.DESCRIBE_CONFIGS, {"resources": [resource]}, node=_any_leader(client, topic)
    )
    (result,) = resp.results
    check(int(result.error_code), f"topic {topic!r}", result.error_message)
    return [
        {
            "name": str(c.name),
            "value": None if c.is_sensitive else c.value,
            "source": _SOURCES.get(int(c.config_source), "UNKNOWN"),
            "read_only": bool(c.read_only),
            "sensitive": bool(c.is_sensitive),
        }
        for c in sorted(result.configs, key=lambda c: str(c.name))
    ]


def configs_set(args: argparse.Namespace, client: Client) -> int:
    return _alter(args, client, [(k, SET, v) for k, v in args.config])


def configs_delete(args: argparse.Namespace, client: Client) -> int:
    return _alter(args, client, [(k, DELETE, None) for k in args.name])


def _alter(args: argparse.Namespace, client: Client, ops: list[tuple[str, int, str | None]]) -> int:
    names = [k for k, _, _ in ops]
    if len(set(names)) != len(names):
        raise UsageError("a config is named twice")
    resource = {
        "resource_type": TOPIC_RESOURCE,
        "resource_name": args.topic,
        "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops],
    }
    resp = client.send(
        API.INCREMENTAL_ALTER_CONFIGS,
        {"resources": [resource]},
        node=_any_leader(client, args.topic),
    )
    (result,) = resp.responses
    check(int(result.error_code), f"altering configs of topic {args.topic!r}", result.error_message)
    out = [
        {"name": k, "operation": "SET" if op == SET else "DELETE", "value": v} for k, op, v in ops
    ]
    emit(
        args.json,
        out,
        ("NAME", "OPERATION", "VALUE"),
        [(d["name"], d["operation"], d["value"]) for d in out],
    )
    return 0


def _any_leader(client: Client, topic: str) -> int | None:
    """Topic configs may be asked of any broker; checking the topic first gives a clear
    'unknown topic' instead of the broker's config error."""
    client.topic(topic)
    return None
