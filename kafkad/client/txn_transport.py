"""The transactional producer's view of the cluster over real sockets (``txn_producer.py`` takes
any object with these methods; its unit tests give it recorded replies instead).

One blocking ``Connection`` per broker, opened on first use and dropped on any connection
failure (the next request opens a new one, as a restarted broker needs). Leaders come from
Metadata, coordinators from FindCoordinator v4+ (``coordinator_keys``); both are cached until
the producer reports them stale.
"""

from __future__ import annotations

from typing import Any, Protocol

from kafkad.client.connection import Connection
from kafkad.client.errors import ClientError, KafkaError

__all__ = ["Disconnected", "SocketTransport", "Transport", "Unsupported"]

METADATA, FIND_COORDINATOR, API_VERSIONS = 3, 10, 18


class Disconnected(Exception):
    """The connection failed before an answer came: the request may or may not have been
    handled."""


class Unsupported(Exception):
    """The broker does not offer the API version the flow needs."""


class Transport(Protocol):
    def coordinator(self, key: str, key_type: int) -> int: ...
    def forget_coordinator(self, key: str, key_type: int) -> None: ...
    def leader(self, topic: str, partition: int) -> int: ...
    def forget_leaders(self) -> None: ...
    def send(self, node: int, api_key: int, version: int, data: dict[str, Any]) -> Any: ...


class SocketTransport:
    def __init__(self, bootstrap: str, timeout_s: float = 10.0, client_id: str = "kafkad-txn"):
        self.bootstrap, self.timeout_s, self.client_id = bootstrap, timeout_s, client_id
        self.brokers: dict[int, str] = {}
        self._conns: dict[int | None, Connection] = {}
        self._leaders: dict[tuple[str, int], int] = {}
        self._coordinators: dict[tuple[str, int], int] = {}

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def _conn(self, node: int | None) -> Connection:
        conn = self._conns.get(node)
        if conn is None:
            address = self.bootstrap if node is None else self.brokers[node]
            try:
                conn = Connection(address, self.timeout_s, client_id=self.client_id)
            except ClientError as exc:
                raise Disconnected(str(exc)) from exc
            self._conns[node] = conn
        return conn

    def max_version(self, api_key: int) -> int | None:
        """The highest version of ``api_key`` the bootstrap broker offers (None: not offered)."""
        theirs = self._conn(None).versions.get(api_key)
        return None if theirs is None else theirs[1]

    def transaction_version(self) -> int:
        """The finalized ``transaction.version`` of the bootstrap broker (0 when not finalized):
        Java 4.x's producer uses the TV2 flow when it is 2 or more, whatever API versions the
        broker offers (``TransactionManager.maybeUpdateTransactionV2Enabled``)."""
        data = {"client_software_name": "kafkad-txn", "client_software_version": "1"}
        resp = self.send(None, API_VERSIONS, 3, data)
        levels = {str(f.name): int(f.max_version_level) for f in resp.finalized_features}
        return levels.get("transaction.version", 0)

    def why_no_tv2(self) -> str | None:
        """Why the broker cannot serve the TV2 flow (None: it can)."""
        level = self.transaction_version()
        if level < 2:
            return f"transaction.version is finalized at {level}"
        wanted = {0: 12, 26: 5, 28: 5}  # Produce, EndTxn, TxnOffsetCommit
        missing = [f"{k} v{v}" for k, v in wanted.items() if (self.max_version(k) or 0) < v]
        return f"the broker does not offer API {', '.join(missing)}" if missing else None

    def send(self, node: int | None, api_key: int, version: int, data: dict[str, Any]) -> Any:
        conn = self._conn(node)
        low, high = conn.versions.get(api_key, (0, -1))
        if not low <= version <= high:
            raise Unsupported(f"API {api_key} v{version}: the broker offers {low}-{high}")
        try:
            return conn.request(api_key, (version, version), data)
        except KafkaError:
            raise
        except ClientError as exc:  # lost, timed out, or an answer that does not decode
            conn.close()
            self._conns.pop(node, None)
            raise Disconnected(str(exc)) from exc

    def leader(self, topic: str, partition: int) -> int:
        node = self._leaders.get((topic, partition))
        if node is not None:
            return node
        data = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
        resp = self.send(None, METADATA, 12, data)
        self.brokers.update({int(b.node_id): f"{b.host}:{b.port}" for b in resp.brokers})
        for t in resp.topics:
            for p in t.partitions:
                if int(p.leader_id) >= 0:
                    self._leaders[(str(t.name), int(p.partition_index))] = int(p.leader_id)
        node = self._leaders.get((topic, partition))
        if node is None:
            raise KafkaError(5, f"{topic}-{partition}")  # LEADER_NOT_AVAILABLE: retriable
        return node

    def forget_leaders(self) -> None:
        self._leaders.clear()

    def coordinator(self, key: str, key_type: int) -> int:
        node = self._coordinators.get((key, key_type))
        if node is not None:
            return node
        data = {"key_type": key_type, "coordinator_keys": [key]}
        (c,) = self.send(None, FIND_COORDINATOR, 4, data).coordinators
        if int(c.error_code):
            raise KafkaError(int(c.error_code), f"finding the coordinator of {key!r}")
        node = int(c.node_id)
        self.brokers[node] = f"{c.host}:{c.port}"
        self._coordinators[(key, key_type)] = node
        return node

    def forget_coordinator(self, key: str, key_type: int) -> None:
        self._coordinators.pop((key, key_type), None)
