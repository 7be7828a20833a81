"""The scrape: every metric family, read from the broker's state and counters when scraped.

Nothing here runs on the request path. ``BrokerCollector.collect`` walks the topics, the
transaction cache, the groups and the counters of ``requests.py`` once per scrape, so the cost
grows with the number of partitions, transactional ids and groups, not with traffic.

Kafka names (JMX exporter rules, see the package docstring):

* ``kafka_server_brokertopicmetrics_{bytesin,bytesout,messagesin}_total`` with ``topic`` and
  without (the broker total, as Kafka's topic-less MBean);
* ``kafka_network_requestmetrics_requests_total{request,version}``,
  ``kafka_network_requestmetrics_errors_total{request,error}`` (NONE included, as Kafka counts),
  ``kafka_network_requestmetrics_totaltimems{request,quantile}`` with ``_count`` and ``_sum``;
* ``kafka_log_log_{logstartoffset,logendoffset,size,numlogsegments}{topic,partition}``;
* ``kafka_server_replicamanager_{partitioncount,produceridcount}``;
* ``kafka_server_socket_server_metrics_connection_count{listener}``,
  ``..._connection_creation_total{listener}`` and ``..._connection_close_total{listener}``
  (Kafka's socket-server-metrics MBeans, tagged ``listener`` and ``networkProcessor``; kafkad
  has no network threads, so one series per listener, no ``networkProcessor`` label; Kafka's
  ``-rate`` attributes are left out: ``rate()`` of the totals gives them).

kafkad's own: ``kafkad_request_duration_seconds`` (histogram per request),
``kafkad_partition_{high_watermark,last_stable_offset,lso_lag}``,
``kafkad_partition_producer_ids``, ``kafkad_transactions{state}``,
``kafkad_transaction_{commits,aborts,timeout_aborts}_total``,
``kafkad_transaction_marker_write_seconds`` (histogram),
``kafkad_transaction_oldest_open_age_seconds``,
``kafkad_groups{state}`` (classic groups), ``kafkad_consumer_groups{state}`` (KIP-848 groups by
their state: Empty, Assigning, Reconciling, Stable, Dead; Kafka's consumer-group-count),
``kafkad_group_members{group}`` (both kinds), ``kafkad_group_rebalances_total{group}`` (a classic
group's generation: each completed rebalance bumps it by one; a consumer group's group epoch,
bumped by each change of members, subscriptions or subscribed topics),
``kafkad_consumer_group_assignment_epoch{group}`` (the target assignment's epoch) and
``kafkad_consumer_group_unreconciled_members{group}`` (members not yet at the target),
``kafkad_consumer_group_lag{group,topic,partition}`` (high watermark - committed offset) and
``kafkad_consumer_group_lag_stable`` (LSO - committed: what a read_committed consumer has left),
``kafkad_log_cleaner_{passes,read_bytes,written_bytes}_total``, and the clients' own
``kafkad_client_*`` (``telemetry.py``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from coordinator.consumer_group.model import ConsumerGroupState
from coordinator.group.state import GroupState
from coordinator.txn.state import TxnState
from proxy.metrics.requests import LATENCY_BOUNDS, ApiStats

if TYPE_CHECKING:
    from proxy.broker import Broker

# Yammer histogram percentiles the JMX exporter turns into ``quantile`` labels
QUANTILES = (("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99),
             ("0.999", 0.999))  # fmt: skip
OPEN_TXN_STATES = frozenset(
    {
        TxnState.ONGOING,
        TxnState.PREPARE_COMMIT,
        TxnState.PREPARE_ABORT,
        TxnState.PREPARE_EPOCH_FENCE,
    }
)


def _buckets(buckets: list[int]) -> list[tuple[str, float]]:
    out, seen = [], 0
    for bound, n in zip((*LATENCY_BOUNDS, math.inf), buckets, strict=True):
        seen += n
        out.append(("+Inf" if bound == math.inf else repr(bound), float(seen)))
    return out


class BrokerCollector(Collector):
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        yield from self._requests()
        yield from self._topics()
        yield from self._partitions()
        yield from self._transactions()
        yield from self._groups()
        yield from self._cleaner()
        yield from self._fetch_sessions()
        yield from self._connections()
        telemetry = getattr(self.broker, "client_telemetry", None)
        if telemetry is not None:
            yield from telemetry.metric_families()

    # -- requests -----------------------------------------------------------------------------

    def _requests(self) -> Iterator[Metric]:
        apis = self.broker.metrics.requests.apis()
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Requests answered, per API and version (Kafka's RequestsPerSec)",
            labels=["request", "version"],
        )
        errors = CounterMetricFamily(
            "kafka_network_requestmetrics_errors",
            "Error codes in responses, per API (Kafka's ErrorsPerSec; NONE included)",
            labels=["request", "error"],
        )
        total_time = Metric(
            "kafka_network_requestmetrics_totaltimems",
            "Handler time per request in ms (Kafka's TotalTimeMs percentiles, since start)",
            "summary",
        )
        duration = HistogramMetricFamily(
            "kafkad_request_duration_seconds", "Handler time per request", labels=["request"]
        )
        for s in apis:
            self._one_api(s, requests, errors, total_time, duration)
        yield from (requests, errors, total_time, duration)

    @staticmethod
    def _one_api(
        s: ApiStats,
        requests: CounterMetricFamily,
        errors: CounterMetricFamily,
        total_time: Metric,
        duration: HistogramMetricFamily,
    ) -> None:
        for version, n in enumerate(s.by_version):
            if n:
                requests.add_metric([s.name, str(version)], n)
        for code, n in sorted(s.errors.items(), key=lambda kv: kv[0].value):
            errors.add_metric([s.name, code.name.upper()], n)
        count = s.count
        if not count:
            return
        name = total_time.name
        for label, q in QUANTILES:
            total_time.add_sample(name, {"request": s.name, "quantile": label}, s.quantile_ms(q))
        total_time.add_sample(name + "_count", {"request": s.name}, count)
        total_time.add_sample(name + "_sum", {"request": s.name}, s.sum_s * 1000)
        duration.add_metric([s.name], _buckets(s.buckets), s.sum_s)

    # -- topics and partitions ----------------------------------------------------------------

    def _topics(self) -> Iterator[Metric]:
        stats = self.broker.metrics.topics
        stats.forget(lambda name: self.broker.topics.get(name) is not None)
        families = []
        for i, (short, doc) in enumerate(
            (
                ("bytesin", "Bytes appended by Produce (Kafka's BytesInPerSec)"),
                ("messagesin", "Records appended by Produce (Kafka's MessagesInPerSec)"),
                ("bytesout", "Record bytes sent by Fetch (Kafka's BytesOutPerSec)"),
            )
        ):
            fam = CounterMetricFamily(
                f"kafka_server_brokertopicmetrics_{short}", doc, labels=["topic"]
            )
            total = stats.deleted[i]
            for topic, counts in sorted(stats.by_topic.items()):
                fam.add_metric([topic], counts[i])
                total += counts[i]
            fam.samples.append(Sample(fam.name + "_total", {}, total))
            families.append(fam)
        yield from families

    def _partitions(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        g = {
            key: GaugeMetricFamily(name, doc, labels=labels)
            for key, name, doc in (
                ("start", "kafka_log_log_logstartoffset", "Log start offset"),
                ("end", "kafka_log_log_logendoffset", "Log end offset"),
                ("size", "kafka_log_log_size", "Bytes in the log's segments"),
                ("segments", "kafka_log_log_numlogsegments", "Segments in the log"),
                ("hw", "kafkad_partition_high_watermark", "High watermark"),
                ("lso", "kafkad_partition_last_stable_offset", "Last stable offset"),
                ("lag", "kafkad_partition_lso_lag", "High watermark - last stable offset"),
                ("pids", "kafkad_partition_producer_ids", "Producer ids with state"),
            )
        }
        count = producer_ids = 0
        for topic in self.broker.topics:
            for p in topic.partitions:
                if p.deleted:
                    continue
                count += 1
                key = [topic.name, str(p.tp.partition)]
                infos = p.log.segment_infos()
                hw, lso = p.high_watermark, p.last_stable_offset
                n_pids = len(p.producers)
                producer_ids += n_pids
                for k, v in (
                    ("start", p.log_start_offset),
                    ("end", hw),
                    ("size", sum(i.size for i in infos)),
                    ("segments", len(infos)),
                    ("hw", hw),
                    ("lso", lso),
                    ("lag", hw - lso),
                    ("pids", n_pids),
                ):
                    g[k].add_metric(key, v)
        yield from g.values()
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_partitioncount", "Partitions on this broker", value=count
        )
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_produceridcount",
            "Producer ids with state, over every partition",
            value=producer_ids,
        )

    # -- transactions ---------------------------------------------------------------------------

    def _transactions(self) -> Iterator[Metric]:
        txns = self.broker.txns
        by_state = dict.fromkeys(TxnState, 0)
        now, oldest = self.broker.now_ms(), 0
        for meta in txns.cache.values():
            by_state[meta.state] += 1
            if meta.state in OPEN_TXN_STATES and meta.txn_start_timestamp >= 0:
                oldest = max(oldest, now - meta.txn_start_timestamp)
        states = GaugeMetricFamily(
            "kafkad_transactions", "Transactional ids by state", labels=["state"]
        )
        for state, n in by_state.items():
            states.add_metric([state.kafka_name], n)
        yield states
        yield GaugeMetricFamily(
            "kafkad_transaction_oldest_open_age_seconds",
            "Age of the oldest open transaction (0: none)",
            value=oldest / 1000,
        )
        c = txns.counters
        for name, doc, value in (
            ("commits", "Transactions committed (CompleteCommit durable)", c.commits),
            ("aborts", "Transactions aborted (CompleteAbort durable)", c.aborts),
            ("timeout_aborts", "Transactions aborted by the coordinator past their timeout",
             c.timeout_aborts),
        ):  # fmt: skip
            yield CounterMetricFamily(f"kafkad_transaction_{name}", doc, value=value)
        markers = self.broker.metrics.markers
        hist = HistogramMetricFamily(
            "kafkad_transaction_marker_write_seconds",
            "Time to write one COMMIT/ABORT marker to a partition",
        )
        hist.add_metric([], _buckets(markers.buckets), markers.sum_s)
        yield hist

    # -- groups -----------------------------------------------------------------------------

    def _groups(self) -> Iterator[Metric]:
        groups = self.broker.groups
        by_state = dict.fromkeys(GroupState, 0)
        members = GaugeMetricFamily("kafkad_group_members", "Members per group", labels=["group"])
        rebalances = CounterMetricFamily(
            "kafkad_group_rebalances",
            "Completed rebalances of the group (its generation id)",
            labels=["group"],
        )
        for gid, group in sorted(groups.groups.items()):
            by_state[group.state] += 1
            members.add_metric([gid], len(group.members))
            rebalances.add_metric([gid], group.generation)
        states = GaugeMetricFamily("kafkad_groups", "Classic groups by state", labels=["state"])
        for state, n in by_state.items():
            states.add_metric([state.value], n)
        yield from self._consumer_groups(members, rebalances)
        lag_labels = ["group", "topic", "partition"]
        lag = GaugeMetricFamily(
            "kafkad_consumer_group_lag",
            "High watermark - committed offset, per group and partition",
            labels=lag_labels,
        )
        lag_stable = GaugeMetricFamily(
            "kafkad_consumer_group_lag_stable",
            "Last stable offset - committed offset (the lag of a read_committed consumer)",
            labels=lag_labels,
        )
        topics = self.broker.topics
        for gid, offsets in sorted(groups.offsets.committed.items()):
            for tp, om in sorted(offsets.items()):
                p = topics.partition(tp.topic, tp.partition)
                if p is None or p.deleted or om.offset < 0:
                    continue
                key = [gid, tp.topic, str(tp.partition)]
                lag.add_metric(key, max(0, p.high_watermark - om.offset))
                lag_stable.add_metric(key, max(0, p.last_stable_offset - om.offset))
        yield from (states, members, rebalances, lag, lag_stable)

    def _consumer_groups(
        self, members: GaugeMetricFamily, rebalances: CounterMetricFamily
    ) -> Iterator[Metric]:
        """KIP-848 groups: members and group epoch into the shared families, the rest here."""
        by_state = dict.fromkeys(ConsumerGroupState, 0)
        target = GaugeMetricFamily(
            "kafkad_consumer_group_assignment_epoch",
            "The epoch of a consumer-protocol group's target assignment",
            labels=["group"],
        )
        behind = GaugeMetricFamily(
            "kafkad_consumer_group_unreconciled_members",
            "Members of a consumer-protocol group not yet reconciled to its target assignment",
            labels=["group"],
        )
        for gid, g in sorted(self.broker.groups.consumer_groups.items()):
            by_state[g.state] += 1
            if g.dead:
                continue
            members.add_metric([gid], len(g.members))
            rebalances.add_metric([gid], g.group_epoch)
            target.add_metric([gid], g.assignment_epoch)
            behind.add_metric(
                [gid],
                sum(not m.is_reconciled_to(g.assignment_epoch) for m in g.members.values()),
            )
        states = GaugeMetricFamily(
            "kafkad_consumer_groups",
            "Consumer-protocol (KIP-848) groups by state",
            labels=["state"],
        )
        for state, n in by_state.items():
            states.add_metric([state.value], n)
        yield from (states, target, behind)

    def _cleaner(self) -> Iterator[Metric]:
        c = self.broker.metrics.cleaner
        for name, doc, value in (
            ("passes", "Log-cleaner passes", c.passes),
            ("read_bytes", "Bytes the cleaner read", c.bytes_read),
            ("written_bytes", "Bytes the cleaner wrote", c.bytes_written),
        ):
            yield CounterMetricFamily(f"kafkad_log_cleaner_{name}", doc, value=value)

    def _fetch_sessions(self) -> Iterator[Metric]:
        """Kafka's FetchSessionCache metrics, and how many fetches were incremental."""
        cache = getattr(self.broker, "fetch_sessions", None)
        if cache is None:
            return
        prefix = "kafka_server_fetchsessioncache_"
        yield GaugeMetricFamily(
            prefix + "numincrementalfetchsessions", "Fetch sessions cached", value=len(cache)
        )
        yield GaugeMetricFamily(
            prefix + "numincrementalfetchpartitionscached",
            "Partitions cached in fetch sessions",
            value=cache.cached_partitions,
        )
        yield CounterMetricFamily(
            prefix + "incrementalfetchsessionevictions",
            "Fetch sessions evicted to make room for new ones",
            value=cache.evictions,
        )
        yield CounterMetricFamily(
            "kafkad_fetch_incremental_requests",
            "Fetch requests answered from a fetch session (incremental, KIP-227)",
            value=cache.incremental_fetches,
        )

    def _connections(self) -> Iterator[Metric]:
        """Kafka's socket-server-metrics per listener: the connections served now (counted once
        admitted by the connection quotas, as Kafka counts them once a processor registers
        them: one closed at once for its IP's limit or throttled is in neither), served since
        the listener started, and closed since."""
        quotas = getattr(self.broker, "connection_quotas", None)
        if quotas is None:
            return
        prefix = "kafka_server_socket_server_metrics_connection_"
        count = GaugeMetricFamily(
            prefix + "count", "Connections open on the listener", labels=["listener"]
        )
        created = CounterMetricFamily(
            prefix + "creation", "Connections the listener has served", labels=["listener"]
        )
        closed = CounterMetricFamily(
            prefix + "close", "Connections of the listener closed", labels=["listener"]
        )
        for name, limit in quotas.listeners.items():
            count.add_metric([name], limit.count)
            created.add_metric([name], limit.created)
            closed.add_metric([name], limit.closed)
        yield from (count, created, closed)
