"""The broker's shared state: configuration, the store, the topics, and the clock.

One ``Broker`` per process. Handlers reach it through ``RequestContext.broker``; background
work (retention, the log cleaner, producer-id expiration) runs in the server's nursery and is
started by ``proxy/server.py``. ``close`` takes the producer-state snapshots of a clean shutdown.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import trio
from kio.schema.errors import ErrorCode

from coordinator.consumer_group.model import TopicInfo
from coordinator.group.offsets_log import OFFSETS_TOPIC
from coordinator.group.runtime import GroupCoordinator
from coordinator.producer_ids import ProducerIdManager
from coordinator.txn.feature import FEATURE_NAME as TXN_FEATURE
from coordinator.txn.runtime import TxnConfig, TxnCoordinator
from proxy.acl.model import Authorizer
from proxy.acl.settings import authorizer_from_values
from proxy.acl.store import AclStore
from proxy.broker_config_defs import BROKER_CONFIGS
from proxy.config import BrokerConfig
from proxy.delegation.store import TokenStore
from proxy.delegation.tokens import Token, TokenSettings, sweep
from proxy.dynamic_broker import DynamicBrokerConfigs
from proxy.fault_injection import CRASH_EXIT_CODE, injector_from_config
from proxy.features import FeatureStore
from proxy.fetch_session import FetchSessionCache
from proxy.listeners import Listener
from proxy.metrics.requests import BrokerMetrics
from proxy.metrics.telemetry import ClientTelemetry
from proxy.quotas.enforce import Throttles
from proxy.quotas.store import QuotaStore
from proxy.sasl.scram_store import ScramStore
from storage.api import NEVER, StorageError, Store, TopicPartition
from storage.cleaner.runner import LogCleaner
from storage.topics import TopicManager

if TYPE_CHECKING:
    from proxy.connection_quotas import ConnectionQuotas

log = logging.getLogger("kafkad.broker")


def _new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def data_path(data_dir: str) -> Path | None:
    """The directory behind a store URL, or None for memory://."""
    if data_dir.startswith("memory://"):
        return None
    if data_dir.startswith("file://"):
        return Path(data_dir[len("file://") :])
    return Path(data_dir)


def log_dir_name(data_dir: str) -> str:
    """The one log dir as DescribeLogDirs and AlterReplicaLogDirs name it: the data dir's
    absolute path (``memory://`` as is: it has none)."""
    path = data_path(data_dir)
    return data_dir if path is None else str(path.absolute())


def load_cluster_id(data_dir: str, node_id: int) -> str:
    """Kafka keeps cluster.id in meta.properties in the log dir; so do we."""
    path = data_path(data_dir)
    if path is None:
        return _new_cluster_id()
    path.mkdir(parents=True, exist_ok=True)
    meta = path / "meta.properties"
    if meta.exists():
        for line in meta.read_text().splitlines():
            if line.startswith("cluster.id="):
                return line.split("=", 1)[1].strip()
    cluster_id = _new_cluster_id()
    tmp = meta.with_suffix(".tmp")
    tmp.write_text(f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n")
    tmp.replace(meta)
    return cluster_id


class Broker:
    def __init__(self, config: BrokerConfig, store: Store) -> None:
        self.config = config
        self.store = store
        self.node_id: int = config.get("node.id")
        self.cluster_id = load_cluster_id(config.data_dir, self.node_id)
        self.topics = TopicManager(store, config.log_config(), config.values or {})
        # dynamic broker configs (proxy/dynamic_broker.py): applied into config.values
        assert isinstance(config.values, dict)
        self.dynamic = DynamicBrokerConfigs(
            store,
            self.node_id,
            config.values,
            {n: parser for n, (parser, _) in BROKER_CONFIGS.items()},
            {n: default for n, (_, default) in BROKER_CONFIGS.items()},
            config.originals,
        )
        self.dynamic.listeners.append(self._dynamic_changed)
        # Listener name -> the address advertised on it; a port-0 listener without an
        # advertised entry gets its bound port once the server binds it (``bind_port``).
        # ``endpoints``: the client listeners now (``listeners_now``: added/removed at runtime)
        self.endpoints: tuple[Listener, ...] = ()
        self.advertised: dict[str, tuple[str, int]] = {}
        self.first_listener = ""
        self.listeners_now(config.endpoints(), {})
        self.shutting_down = trio.Event()
        # incremental fetch sessions (KIP-227): Kafka's FetchSessionCache
        self.fetch_sessions = FetchSessionCache(
            config.get("max.incremental.fetch.session.cache.slots")
        )
        self.cleaner = LogCleaner(
            dedupe_buffer_size=config.get("log.cleaner.dedupe.buffer.size"),
            io_max_bytes_per_second=config.get("log.cleaner.io.max.bytes.per.second"),
        )
        self.groups = GroupCoordinator(self.topics, config.values or {}, self.now_ms)
        self.groups.topic_view = self.consumer_topics  # what KIP-848 groups subscribe to
        self.producer_ids = ProducerIdManager(store)
        self.scram = ScramStore(store)  # SCRAM credentials (proxy/sasl/scram_store.py)
        self.quotas = QuotaStore(store)  # client quotas (proxy/quotas/store.py)
        # the server's, once it serves (proxy/connection_quotas.py; /metrics reads its counts)
        self.connection_quotas: ConnectionQuotas | None = None
        # their byte-rate enforcement (proxy/quotas/enforce.py), following the store
        self.throttles = Throttles(
            config.get("quota.window.num"),
            config.get("quota.window.size.seconds"),
            config.get("controller.quota.window.num"),
            config.get("controller.quota.window.size.seconds"),
        )
        self.quotas.listeners.append(self.throttles.update)
        # delegation tokens (proxy/delegation/), on wall-clock time as Kafka's
        self.tokens = TokenStore(store, TokenSettings.from_values(config.values or {}), self.now_ms)
        # ACLs (proxy/acl/): None unless authorizer.class.name is set, as in Kafka. The
        # bindings are kept in self.acls (durable); the standard authorizer follows its changes.
        self.acls = AclStore(store)
        standard = authorizer_from_values(config.values or {})
        if standard is not None:
            self.acls.listeners.append(standard.set_acls)
        self.authorizer: Authorizer | None = standard
        # kafkad.fault.injection: the dispatcher's request faults and the crash points
        self.faults = injector_from_config((config.values or {}).get("kafkad.fault.injection", ""))
        # finalized features (proxy/features.py): transaction.version decides the
        # coordinator's own fences
        self.features = FeatureStore(store, config.features)
        self.txns = TxnCoordinator(
            self.topics,
            TxnConfig.from_values(config.values or {}),
            self.producer_ids,
            write_marker=self.write_txn_marker,
            now_ms=self.now_ms,
            crash_point=self.crash_point,
            write_may_wait=self.txn_write_may_wait,
        )
        self.features.listeners.append(self._features_changed)
        # KIP-890 part 1: (transactional id, producer id, epoch, tp) -> NONE if tp is in that
        # producer's ongoing transaction. None would mean no transaction coordinator: Produce
        # then refuses transactional batches and TxnOffsetCommit answers COORDINATOR_NOT_AVAILABLE.
        self.txn_verifier: Callable[[str, int, int, TopicPartition], ErrorCode] | None = (
            self.txns.verify_partition
        )
        # counters of the request path and background work (/metrics: proxy/metrics/)
        self.metrics = BrokerMetrics()
        self.client_telemetry = ClientTelemetry.from_values(config.values or {}, self.now_ms)

    def _features_changed(self, levels: Mapping[str, int]) -> None:
        level = levels.get(TXN_FEATURE, 0)
        self.txns.config = dataclasses.replace(self.txns.config, transaction_version=level)

    def consumer_topics(self) -> dict[str, TopicInfo]:
        """The topics consumer groups can subscribe to (internal ones left out)."""
        return {
            t.name: TopicInfo(t.name, t.topic_id, len(t.partitions))
            for t in self.topics
            if not t.internal
        }

    def listeners_now(self, endpoints: tuple[Listener, ...], ports: Mapping[str, int]) -> None:
        """The client listeners are now ``endpoints`` (``ports``: each bound one's port)."""
        self.endpoints = endpoints
        self.dynamic.listener_names = tuple(e.name for e in endpoints)  # connection quotas
        self.advertised = {
            e.name: (e.advertised_host, e.advertised_port or ports.get(e.name) or e.port)
            for e in endpoints
        }
        self.first_listener = endpoints[0].name

    def bound(self, name: str, port: int) -> None:
        """Listener ``name`` is bound to ``port``: advertise it if nothing else was given."""
        listener = next(x for x in self.endpoints if x.name == name)
        if listener.advertised_port is None:
            self.advertised[name] = (listener.advertised_host, port)

    def advertised_address(self, listener: str) -> tuple[str, int]:
        """The address advertised on ``listener`` (Kafka answers Metadata with the request's
        listener name); an unknown name (an in-process test) gets the first listener's."""
        return self.advertised.get(listener) or self.advertised[self.first_listener]

    def crash_point(self, point: str) -> None:
        """Exit the process at once if the fault-injection spec says so (a kill -9 at a chosen
        moment: no cleanup, no snapshots, nothing flushed)."""
        if self.faults is not None and self.faults.crash_here(point):
            log.critical("fault injection: crashing at %s", point)
            os._exit(CRASH_EXIT_CODE)

    def txn_write_may_wait(self, topic: str) -> bool:
        """Whether a marker (or a coordinator record) written to ``topic`` may wait for
        anything but this process's own disk writes: an fsync (the topic's effective
        ``flush.messages`` is finite: the append waits for its group commit, and a lock holder
        may too), the group coordinator (``__consumer_offsets``). A topic that does not exist
        answers at once. The transaction coordinator completes a transaction in the EndTxn
        request itself only when none may."""
        if topic == OFFSETS_TOPIC:
            return True
        found = self.topics.get(topic)
        return found is not None and found.int_setting("flush.messages") < NEVER

    async def write_txn_marker(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        *,
        transaction_version: int = 0,
    ) -> ErrorCode:
        """The transaction coordinator's one call per partition when completing a transaction
        (spec §4.10): write the COMMIT/ABORT marker; on a ``__consumer_offsets`` partition the
        group coordinator then materialises or drops the producer's pending offsets (§5.5).
        ``transaction_version`` 2 (a WriteTxnMarkers v2 marker saying so): the marker's epoch
        must exceed the producer's."""
        partition = self.topics.partition(tp.topic, tp.partition)
        if partition is None or partition.deleted:
            return ErrorCode.unknown_topic_or_partition
        started = time.perf_counter()
        try:
            if tp.topic == OFFSETS_TOPIC:
                written = await self.groups.write_txn_marker(
                    partition,
                    producer_id,
                    producer_epoch,
                    commit,
                    coordinator_epoch,
                    transaction_version=transaction_version,
                )
            else:
                written = await partition.write_marker(
                    producer_id,
                    producer_epoch,
                    commit,
                    coordinator_epoch,
                    self.now_ms(),
                    transaction_version=transaction_version,
                )
        except StorageError as exc:
            log.error("marker on %s failed: %s", tp, exc)
            return ErrorCode.kafka_storage_error
        self.metrics.markers.observe(time.perf_counter() - started)
        return written if isinstance(written, ErrorCode) else ErrorCode.none

    def begin_shutdown(self) -> None:
        """Wake every long-polling fetch so it answers with what it has."""
        self.shutting_down.set()
        self.groups.begin_shutdown()
        for topic in self.topics:
            for p in topic.partitions:
                p.wake_waiters()

    async def start(self) -> None:
        await self.features.load()
        await self.producer_ids.load()
        await self.scram.load()
        await self.tokens.load()
        await self.acls.load()
        await self.quotas.load()
        await self.dynamic.load()  # before the topics open: their log defaults
        await self.topics.load()

    def _dynamic_changed(self) -> None:
        """Dynamic broker configs changed: the topics' log defaults and the cleaner's limits
        follow at once (the rest read ``config.values`` when they use it)."""
        self.topics.set_log_defaults(self.config.log_config())
        self.cleaner.configure(
            self.config.get("log.cleaner.dedupe.buffer.size"),
            self.config.get("log.cleaner.io.max.bytes.per.second"),
        )

    async def close(self) -> None:
        """Clean shutdown, after the last request: snapshot every partition's producer state
        so the next start need not replay the log tail."""
        await self.topics.take_snapshots()

    @staticmethod
    def now_ms() -> int:
        return time.time_ns() // 1_000_000

    async def retention_loop(self) -> None:
        interval = self.config.get("log.retention.check.interval.ms") / 1000
        while True:
            await trio.sleep(interval)
            deleted = await self.topics.apply_retention(self.now_ms())
            if deleted:
                log.info("retention deleted %d segment(s)", deleted)

    async def cleaner_loop(self) -> None:
        """The log cleaner (``storage/cleaner/runner.py``): every ``log.cleaner.backoff.ms``,
        one pass over each compacted partition worth cleaning. A pass that fails with a
        storage error is logged and retried at the next round."""
        while True:  # the interval read each round: a dynamic config
            await trio.sleep(self.config.get("log.cleaner.backoff.ms") / 1000)
            for p, plan in self.cleaner.plans(self.topics, self.now_ms()):
                if p.deleted:
                    continue
                try:
                    r = await self.cleaner.clean_partition(p, plan, self.now_ms())
                except StorageError as exc:
                    log.error("cleaning %s failed: %s", p.tp, exc)
                    continue
                self.metrics.cleaner.observe(r.bytes_read, r.bytes_written)
                log.info(
                    "cleaned %s: %d -> %d segment(s), %d bytes read, %d written",
                    r.tp,
                    r.segments_before,
                    r.segments_after,
                    r.bytes_read,
                    r.bytes_written,
                )

    async def token_expiry_loop(self) -> None:
        """Kafka's controller sweep: every delegation.token.expiry.check.interval.ms, the
        tokens past their expiry or max lifetime are removed (only while the feature is on)."""
        settings = self.tokens.settings
        if not settings.enabled:
            return
        while True:
            await trio.sleep(settings.check_interval_ms / 1000)
            expired = await self.tokens.change(self._sweep_tokens)
            if expired:
                log.info("delegation tokens expired and removed: %d", len(expired))

    def _sweep_tokens(self, tokens: dict[str, Token]) -> tuple[None, list[str], list[str]]:
        """The sweep's decision, on the tokens as the changes under way left them."""
        expired = sweep(list(tokens.values()), self.tokens.now_ms())
        return None, expired, expired

    async def producer_expiration_loop(self) -> None:
        interval = self.config.get("producer.id.expiration.check.interval.ms") / 1000
        while True:
            await trio.sleep(interval)
            removed = self.topics.remove_expired_producers(
                self.now_ms(), self.config.get("producer.id.expiration.ms")
            )
            if removed:
                log.info("expired %d idle producer state entr(ies)", removed)
