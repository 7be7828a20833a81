"""``kafkad txns list|describe|describe-producers|find-hanging|abort|forceTerminateTransaction``:
Kafka's ``TransactionsCommand`` (tools/.../TransactionsCommand.java) over the protocol, with its
options, columns and logic.

find-hanging: DescribeProducers on the partitions gives each producer's open transaction
(its start offset) and last timestamp; open transactions older than
``--max-transaction-timeout`` minutes are candidates. ListTransactions filtered on their
producer ids maps them to transactional ids, DescribeTransactions gives the coordinator's
view: a candidate is hanging when no transactional id owns its producer id, the coordinator
does not know the id, or the coordinator's transaction does not include the partition.

abort: WriteTxnMarkers (ABORT) to the partition's leader with the producer's id, epoch and
coordinator epoch, as Kafka's ``AbortTransactionSpec``; ``--start-offset`` looks them up
with DescribeProducers (the producer whose open transaction starts there); a coordinator
epoch below 0 becomes 0, as in Kafka.

forceTerminateTransaction (Kafka 4.1, KIP-939; alias ``force-terminate``): Admin's
``forceTerminateTransaction``, i.e. ``fenceProducers``: InitProducerId for the transactional id
with no producer id or epoch (the transaction timeout is the command's ``--timeout``, as
FenceProducersHandler uses the request timeout), so the coordinator bumps the epoch, fencing
the live producer and aborting its open transaction. CONCURRENT_TRANSACTIONS (the abort still
being completed) and coordinator moves are retried.

``--broker-id`` (describe-producers, find-hanging) asks that broker instead of each partition's
leader, as Kafka's ``DescribeProducersOptions.brokerId``; find-hanging needs ``--topic`` or
``--broker-id``, and with the broker alone searches every partition it holds a replica of.

Deviation: find-hanging exits 1 when it lists a hanging transaction (Kafka's tool exits 0 either
way), so a script can test for one.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from typing import Any

from kafkad.cli.options import UsageError, add_common
from kafkad.cli.output import emit
from kafkad.client.cluster import API, TRANSACTION, Client
from kafkad.client.errors import ClientError, KafkaError, check
from kafkad.client.txn_state import TxnState, parse_describe_transactions_v0

TRANSACTIONAL_ID_NOT_FOUND = 105


def register(nouns: Any) -> None:
    p = nouns.add_parser("txns", help="transactions: list, describe, find hanging ones, abort")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    v = verbs.add_parser("list", help="transactional ids known to the coordinators")
    v.add_argument("--duration-filter", type=int, metavar="MS", help="open longer than this")
    v.add_argument(
        "--transactional-id-pattern",
        metavar="REGEX",
        help="only ids this regular expression matches whole (KIP-1152)",
    )
    _done(v, list_txns)
    v = verbs.add_parser("describe", help="one transactional id's state")
    v.add_argument("--transactional-id", required=True)
    _done(v, describe)
    v = verbs.add_parser("describe-producers", help="a partition's active producers")
    v.add_argument("--broker-id", type=int, help="ask this replica (default: the leader)")
    v.add_argument("--topic", required=True)
    v.add_argument("--partition", type=int, required=True)
    _done(v, describe_producers)
    v = verbs.add_parser("find-hanging", help="open transactions the coordinator lost track of")
    v.add_argument("--broker-id", type=int, help="search the partitions this broker holds")
    v.add_argument("--topic", help="search this topic (required with --partition)")
    v.add_argument("--partition", type=int)
    v.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES")
    _done(v, find_hanging)
    v = verbs.add_parser("abort", help="write an ABORT marker for an open transaction")
    v.add_argument("--topic", required=True)
    v.add_argument("--partition", type=int, required=True)
    v.add_argument("--start-offset", type=int)
    v.add_argument("--producer-id", type=int)
    v.add_argument("--producer-epoch", type=int)
    v.add_argument("--coordinator-epoch", type=int)
    _done(v, abort)
    v = verbs.add_parser(
        "forceTerminateTransaction",
        aliases=["force-terminate"],
        help="fence a transactional id's producer, aborting its open transaction",
    )
    v.add_argument(
        "--transactionalId", "--transactional-id", dest="transactional_id", required=True
    )
    _done(v, force_terminate)


def _done(parser: argparse.ArgumentParser, run: Any) -> None:
    add_common(parser)
    parser.set_defaults(run=run)


def list_transactions(
    client: Client,
    producer_ids: list[int] | None = None,
    duration_ms: int = -1,
    id_pattern: str | None = None,
) -> list[dict[str, Any]]:
    """ListTransactions from every broker (each answers for the coordinators it hosts)."""
    client.metadata([])
    out = []
    for node in sorted(client.brokers):
        key, (low, high) = API.LIST_TRANSACTIONS
        # an older version lacks the filter and would list every transaction (Kafka's admin
        # client refuses the same way, with UnsupportedVersionException)
        filtered = duration_ms >= 0 or bool(id_pattern)
        version = client.broker(node).version_for(key, low, high) if filtered else high
        if duration_ms >= 0 and version < 1:
            raise ClientError(
                f"broker {node} does not support --duration-filter (ListTransactions v1, "
                "Kafka 3.8 or later)"
            )
        if id_pattern and version < 2:
            raise ClientError(
                f"broker {node} does not support --transactional-id-pattern (ListTransactions "
                "v2, Kafka 4.1 or later)"
            )
        data = {
            "state_filters": [],
            "producer_id_filters": producer_ids or [],
            "duration_filter": duration_ms,
            "transactional_id_pattern": id_pattern or None,
        }
        resp = client.send(API.LIST_TRANSACTIONS, data, node)
        check(int(resp.error_code), f"listing transactions on broker {node}")
        for t in resp.transaction_states:
            out.append(
                {
                    "transactional_id": str(t.transactional_id),
                    "coordinator": node,
                    "producer_id": int(t.producer_id),
                    "state": str(t.transaction_state),
                }
            )
    return out


def describe_transaction(client: Client, tid: str) -> tuple[int, TxnState] | None:
    """(coordinator, state), or None if the coordinator does not know ``tid``."""

    def once(node: int) -> tuple[int, TxnState] | None:
        body = client.broker(node).request_raw(
            *API.DESCRIBE_TRANSACTIONS, {"transactional_ids": [tid]}
        )
        (state,) = parse_describe_transactions_v0(body)
        if state.error_code == TRANSACTIONAL_ID_NOT_FOUND:
            return None
        check(state.error_code, f"describing transactional id {tid!r}")
        return node, state

    return client.coordinated(tid, TRANSACTION, once)


def describe_producers_of(
    client: Client, topic: str, partition: int, broker: int | None = None
) -> list[dict[str, Any]]:
    """DescribeProducers of one partition, asked of its leader or of ``broker``."""

    def once() -> list[dict[str, Any]]:
        data = {"topics": [{"name": topic, "partition_indexes": [partition]}]}
        node = client.leader(topic, partition) if broker is None else broker
        resp = client.send(API.DESCRIBE_PRODUCERS, data, node)
        (p,) = resp.topics[0].partitions
        check(int(p.error_code), f"describing producers of {topic}-{partition}", p.error_message)
        return [
            {
                "producer_id": int(s.producer_id),
                "producer_epoch": int(s.producer_epoch),
                "coordinator_epoch": int(s.coordinator_epoch),
                "last_sequence": int(s.last_sequence),
                "last_timestamp": int(s.last_timestamp),
                "current_txn_start_offset": int(s.current_txn_start_offset),
            }
            for s in p.active_producers
        ]

    return client.retry(once)


def list_txns(args: argparse.Namespace, client: Client) -> int:
    out = list_transactions(
        client,
        None,
        -1 if args.duration_filter is None else args.duration_filter,
        args.transactional_id_pattern,
    )
    keys = ("transactional_id", "coordinator", "producer_id", "state")
    rows = [[t[k] for k in keys] for t in out]
    emit(args.json, out, ("TransactionalId", "Coordinator", "ProducerId", "TransactionState"), rows)
    return 0


def describe(args: argparse.Namespace, client: Client) -> int:
    found = describe_transaction(client, args.transactional_id)
    if found is None:
        raise KafkaError(TRANSACTIONAL_ID_NOT_FOUND, f"transactional id {args.transactional_id!r}")
    node, s = found
    start_ms = None if s.start_time_ms < 0 else s.start_time_ms
    d = {
        "coordinator": node,
        "transactional_id": args.transactional_id,
        "producer_id": int(s.producer_id),
        "producer_epoch": int(s.producer_epoch),
        "state": s.state,
        "timeout_ms": s.timeout_ms,
        "start_time_ms": start_ms,
        "duration_ms": None if start_ms is None else int(time.time() * 1000) - start_ms,
        "partitions": [f"{t}-{p}" for t, p in s.partitions],
    }
    headers = (
        "CoordinatorId",
        "TransactionalId",
        "ProducerId",
        "ProducerEpoch",
        "TransactionState",
        "TransactionTimeoutMs",
        "CurrentTransactionStartTimeMs",
        "TransactionDurationMs",
        "TopicPartitions",
    )
    row = [*list(d.values())[:8], ",".join(d["partitions"])]
    emit(args.json, d, headers, [["None" if c is None else c for c in row]])
    return 0


_PRODUCER_HEADERS = (
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
)


def describe_producers(args: argparse.Namespace, client: Client) -> int:
    out = describe_producers_of(client, args.topic, args.partition, args.broker_id)
    rows = [
        [
            s["producer_id"],
            s["producer_epoch"],
            s["coordinator_epoch"],
            s["last_sequence"],
            s["last_timestamp"],
            s["current_txn_start_offset"] if s["current_txn_start_offset"] >= 0 else "None",
        ]
        for s in out
    ]
    emit(args.json, out, _PRODUCER_HEADERS, rows)
    return 0


def hanging_transactions(
    candidates: dict[int, list[dict[str, Any]]],
    owners: dict[int, str],
    known: dict[str, set[tuple[str, int]] | None],
) -> list[dict[str, Any]]:
    """Kafka's ``filterHangingTransactions``: open transactions (by producer id) whose producer
    id no transactional id owns (``owners``), whose transactional id the coordinator does not
    know (``known[tid]`` None), or whose partition is not in the coordinator's transaction."""
    hanging: list[dict[str, Any]] = []
    for pid, opens in candidates.items():
        tid = owners.get(pid)
        parts = None if tid is None else known.get(tid)
        if parts is None:
            hanging.extend(opens)
        else:
            hanging.extend(o for o in opens if (o["topic"], o["partition"]) not in parts)
    return hanging


def partitions_to_search(
    client: Client, topic: str | None, partition: int | None, broker: int | None
) -> list[tuple[str, int]]:
    """Kafka's ``collectTopicPartitionsToSearch``: the one partition asked for, else the topic's
    (or, without a topic, every topic's) partitions, those with a replica on ``broker`` when
    one is given."""
    if topic is None and broker is None:
        raise UsageError(
            "the `find-hanging` command requires either --topic or --broker-id to limit the "
            "scope of the search"
        )
    if topic is None and partition is not None:
        raise UsageError("the --partition argument requires --topic to be provided")
    if broker is not None:
        client.broker(broker)  # an unknown broker id is an error, not an empty search
    if topic is not None:
        info = client.topic(topic)
        if partition is not None:
            if partition not in info.partitions:
                raise UsageError(f"topic {topic!r} has no partition {partition}")
            return [(topic, partition)]
        infos = [info]
    else:
        every = client.metadata(None)
        infos = [every[name] for name in sorted(every) if not every[name].error_code]
    return [
        (info.name, p.partition)
        for info in infos
        for p in sorted(info.partitions.values(), key=lambda p: p.partition)
        if broker is None or broker in p.replicas
    ]


def find_hanging(args: argparse.Namespace, client: Client) -> int:
    parts = partitions_to_search(client, args.topic, args.partition, args.broker_id)
    max_ms = args.max_transaction_timeout * 60_000
    now = int(time.time() * 1000)
    candidates: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for topic, part in parts:
        for s in describe_producers_of(client, topic, part, args.broker_id):
            if s["current_txn_start_offset"] >= 0 and now - s["last_timestamp"] > max_ms:
                candidates[s["producer_id"]].append({"topic": topic, "partition": part, **s})
    owners: dict[int, str] = {}
    known: dict[str, set[tuple[str, int]] | None] = {}
    if candidates:
        owners = {
            t["producer_id"]: t["transactional_id"]
            for t in list_transactions(client, sorted(candidates))
        }
        for tid in set(owners.values()):
            found = describe_transaction(client, tid)
            known[tid] = None if found is None else set(found[1].partitions)
    hanging = hanging_transactions(candidates, owners, known)
    for h in hanging:
        h["duration_min"] = (now - h["last_timestamp"]) // 60_000
    keys = (
        "topic",
        "partition",
        "producer_id",
        "producer_epoch",
        "coordinator_epoch",
        "current_txn_start_offset",
        "last_timestamp",
        "duration_min",
    )
    headers = (
        "Topic",
        "Partition",
        "ProducerId",
        "ProducerEpoch",
        "CoordinatorEpoch",
        "StartOffset",
        "LastTimestamp",
        "Duration(min)",
    )
    emit(args.json, hanging, headers, [[h[k] for k in keys] for h in hanging])
    return 1 if hanging else 0


def abort(args: argparse.Namespace, client: Client) -> int:
    if args.start_offset is None and args.producer_id is None:
        raise UsageError(
            "the transaction to abort must be identified either with --start-offset or with "
            "--producer-id, --producer-epoch and --coordinator-epoch"
        )
    if args.start_offset is not None:
        states = describe_producers_of(client, args.topic, args.partition)
        match = [s for s in states if s["current_txn_start_offset"] == args.start_offset]
        if not match:
            raise ClientError(
                f"no open transaction starts at offset {args.start_offset} "
                f"on {args.topic}-{args.partition}"
            )
        pid, epoch, coord_epoch = (
            match[0]["producer_id"],
            match[0]["producer_epoch"],
            match[0]["coordinator_epoch"],
        )
    else:
        if args.producer_epoch is None or args.coordinator_epoch is None:
            raise UsageError("--producer-id needs --producer-epoch and --coordinator-epoch")
        pid, epoch, coord_epoch = args.producer_id, args.producer_epoch, args.coordinator_epoch
    coord_epoch = max(coord_epoch, 0)  # as Kafka: never below any leader epoch
    marker = {
        "producer_id": pid,
        "producer_epoch": epoch,
        "transaction_result": False,
        "topics": [{"name": args.topic, "partition_indexes": [args.partition]}],
        "coordinator_epoch": coord_epoch,
    }

    def once() -> None:
        resp = client.send(
            API.WRITE_TXN_MARKERS, {"markers": [marker]}, client.leader(args.topic, args.partition)
        )
        for m in resp.markers:
            for t in m.topics:
                for p in t.partitions:
                    check(
                        int(p.error_code),
                        f"aborting producer {pid}'s transaction on {args.topic}-{args.partition}",
                    )

    client.retry(once)
    d = {
        "topic": args.topic,
        "partition": args.partition,
        "producer_id": pid,
        "producer_epoch": epoch,
        "coordinator_epoch": coord_epoch,
        "result": "ABORT",
    }
    emit(
        args.json,
        d,
        ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "Marker"),
        [list(d.values())],
    )
    return 0


def force_terminate(args: argparse.Namespace, client: Client) -> int:
    tid = args.transactional_id
    data = {
        "transactional_id": tid,
        "transaction_timeout": int(args.timeout * 1000),
        "producer_id": -1,
        "producer_epoch": -1,
    }

    def once(node: int) -> Any:
        resp = client.send(API.INIT_PRODUCER_ID, data, node)
        check(int(resp.error_code), f"force terminating transactional id {tid!r}")
        return resp

    resp = client.coordinated(tid, TRANSACTION, once)
    d = {
        "transactional_id": tid,
        "producer_id": int(resp.producer_id),
        "producer_epoch": int(resp.producer_epoch),
    }
    emit(args.json, d, ("TransactionalId", "ProducerId", "ProducerEpoch"), [list(d.values())])
    return 0
