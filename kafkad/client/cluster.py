"""The cluster as the tools see it: bootstrap, Metadata, partition leaders, coordinators.

``Client`` keeps one ``Connection`` per broker (node id), opened on first use from the
addresses Metadata advertises; the bootstrap connection is used only for Metadata and the
APIs any broker answers (ListGroups, ListTransactions are asked of every broker).
Retriable coordinator errors (loading, not available, not coordinator) are retried with a
fresh FindCoordinator until the client's timeout runs out.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kafkad.client.connection import Connection
from kafkad.client.errors import ClientError, KafkaError, check
from kafkad.client.security import Security

__all__ = ["API", "Client", "PartitionInfo", "TopicInfo"]

T = TypeVar("T")


class API:
    """api key -> (lowest, highest) version the client's request dicts are written for."""

    PRODUCE = (0, (3, 11))
    FETCH = (1, (4, 12))
    LIST_OFFSETS = (2, (2, 8))
    METADATA = (3, (9, 12))
    OFFSET_COMMIT = (8, (2, 8))
    OFFSET_FETCH = (9, (1, 7))
    FIND_COORDINATOR = (10, (1, 5))
    DESCRIBE_GROUPS = (15, (3, 5))
    LIST_GROUPS = (16, (3, 5))
    CREATE_TOPICS = (19, (5, 7))
    DELETE_TOPICS = (20, (4, 6))
    INIT_PRODUCER_ID = (22, (0, 4))
    ADD_PARTITIONS_TO_TXN = (24, (0, 3))
    END_TXN = (26, (0, 4))
    WRITE_TXN_MARKERS = (27, (1, 1))
    DESCRIBE_CONFIGS = (32, (1, 4))
    DELETE_GROUPS = (42, (0, 2))
    INCREMENTAL_ALTER_CONFIGS = (44, (0, 1))
    DESCRIBE_PRODUCERS = (61, (0, 0))
    DESCRIBE_TRANSACTIONS = (65, (0, 0))
    LIST_TRANSACTIONS = (66, (0, 2))
    CONSUMER_GROUP_DESCRIBE = (69, (0, 1))


GROUP, TRANSACTION = 0, 1


@dataclass
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    error_code: int


@dataclass
class TopicInfo:
    name: str
    topic_id: str
    error_code: int
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)


class Client:
    def __init__(self, bootstrap: str, timeout: float, security: Security | None = None) -> None:
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.security = security
        self.bootstrap = Connection(bootstrap, timeout, security=security)
        self.brokers: dict[int, str] = {}
        self._conns: dict[int, Connection] = {}
        self._topics: dict[str, TopicInfo] = {}

    def close(self) -> None:
        self.bootstrap.close()
        for c in self._conns.values():
            c.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests --------------------------------------------------------------------------

    def send(
        self, api: tuple[int, tuple[int, int]], data: dict[str, Any], node: int | None = None
    ) -> Any:
        conn = self.bootstrap if node is None else self.broker(node)
        return conn.request(api[0], api[1], data)

    def broker(self, node: int) -> Connection:
        conn = self._conns.get(node)
        if conn is None:
            if node not in self.brokers:
                self.metadata([])
            if node not in self.brokers:
                raise ClientError(f"the cluster does not know broker {node}")
            conn = self._conns[node] = Connection(
                self.brokers[node], self.timeout, security=self.security
            )
        return conn

    # -- metadata --------------------------------------------------------------------------

    def metadata(self, topics: Iterable[str] | None) -> dict[str, TopicInfo]:
        """Metadata for ``topics`` (None: every topic), refreshing the broker list."""
        names = None if topics is None else [{"name": t} for t in topics]
        resp = self.send(API.METADATA, {"topics": names, "allow_auto_topic_creation": False})
        self.brokers = {int(b.node_id): f"{b.host}:{b.port}" for b in resp.brokers}
        out: dict[str, TopicInfo] = {}
        for t in resp.topics:
            info = TopicInfo(str(t.name), str(getattr(t, "topic_id", "") or ""), int(t.error_code))
            for p in t.partitions:
                info.partitions[int(p.partition_index)] = PartitionInfo(
                    int(p.partition_index),
                    int(p.leader_id),
                    int(getattr(p, "leader_epoch", -1)),
                    [int(r) for r in p.replica_nodes],
                    [int(r) for r in p.isr_nodes],
                    int(p.error_code),
                )
            out[info.name] = info
        self._topics.update(out)
        return out

    def topic(self, name: str) -> TopicInfo:
        """A topic's metadata; KafkaError UNKNOWN_TOPIC_OR_PARTITION if it does not exist."""
        info = self.metadata([name]).get(name)
        if info is None:
            raise KafkaError(3, f"topic {name!r}")
        check(info.error_code, f"topic {name!r}")
        return info

    def partitions(self, topic: str, only: Iterable[int] | None = None) -> list[PartitionInfo]:
        info = self.topic(topic)
        wanted = sorted(info.partitions) if only is None else list(only)
        for p in wanted:
            if p not in info.partitions:
                raise ClientError(
                    f"topic {topic!r} has no partition {p} ({len(info.partitions)} partitions)"
                )
        return [info.partitions[p] for p in wanted]

    def leader(self, topic: str, partition: int) -> int:
        info = self._topics.get(topic) or self.topic(topic)
        p = info.partitions.get(partition)
        if p is None:
            info = self.topic(topic)
            p = info.partitions.get(partition)
        if p is None:
            raise ClientError(f"topic {topic!r} has no partition {partition}")
        if p.leader < 0:
            raise KafkaError(5, f"{topic}-{partition}")
        return p.leader

    # -- coordinators ----------------------------------------------------------------------

    def find_coordinator(self, key: str, key_type: int) -> int:
        def once() -> int:
            resp = self.send(
                API.FIND_COORDINATOR,
                {"key": key, "key_type": key_type, "coordinator_keys": [key]},
            )
            if hasattr(resp, "coordinators"):
                (c,) = resp.coordinators
            else:
                c = resp
            check(c.error_code, f"finding the coordinator of {key!r}", c.error_message)
            self.brokers[int(c.node_id)] = f"{c.host}:{c.port}"
            return int(c.node_id)

        return self.retry(once)

    def coordinated(self, key: str, key_type: int, call: Callable[[int], T]) -> T:
        """``call(coordinator node)``, again with a fresh coordinator on a retriable error."""
        return self.retry(lambda: call(self.find_coordinator(key, key_type)))

    def retry(self, fn: Callable[[], T]) -> T:
        while True:
            try:
                return fn()
            except KafkaError as exc:
                if not exc.retriable or time.monotonic() + 0.1 > self.deadline:
                    raise
                if exc.code in (5, 6):  # LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER
                    self._topics.clear()  # leader() asks Metadata again
            time.sleep(0.1)
