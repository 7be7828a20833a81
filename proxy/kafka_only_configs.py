"""Kafka 4.2's broker configs kafkad has no config of its own for: every other key of
``KafkaConfig.configDef`` (``AbstractKafkaConfig.CONFIG_DEF``, the union of ServerConfigs,
KRaftConfigs, SocketServerConfigs, ReplicationConfigs, GroupCoordinatorConfig, LogConfig's
server configs, CleanerConfig, ShareGroupConfig, ShareCoordinatorConfig, Transaction*Config,
QuorumConfig, MetricConfigs, QuotaConfig, BrokerSecurityConfigs, RemoteLogManagerConfig, ...).

name -> (ConfigDef type, default as ``ConfigDef.convertToString`` prints it, None for null or
no default[, Range low, high: ``atLeast``/``between``, None unbounded]). kafkad does not use
them: DescribeConfigs lists them (``INTERNAL`` ones only when set), a server.properties may set
them (checked, kept in the originals, shown STATIC), and those in Kafka's
``DynamicBrokerConfig.AllDynamicConfigs`` (``KAFKA_DYNAMIC``) are altered and stored as Kafka
stores them, changing nothing in kafkad.
"""

from __future__ import annotations

from collections.abc import Mapping

# ConfigDef types (DescribeConfigs' config_type codes, as proxy/broker_config_types.py's)
_B, _S, _I, _H, _L, _D, _LS, _C, _P = 1, 2, 3, 4, 5, 6, 7, 8, 9

KAFKA_ONLY_CONFIGS: Mapping[
    str, tuple[int, str | None] | tuple[int, str | None, float, float | None]
] = {
    "add.partitions.to.txn.retry.backoff.max.ms": (_I, "100", 0, None),
    "add.partitions.to.txn.retry.backoff.ms": (_I, "20", 1, None),
    "alter.config.policy.class.name": (_C, None),
    "alter.log.dirs.replication.quota.window.num": (_I, "11", 1, None),
    "alter.log.dirs.replication.quota.window.size.seconds": (_I, "1", 1, None),
    "auto.leader.rebalance.enable": (_B, "true"),
    "background.threads": (_I, "10", 1, None),
    "broker.heartbeat.interval.ms": (_I, "2000"),
    "broker.rack": (_S, None),
    "broker.session.timeout.ms": (_I, "9000"),
    "client.quota.callback.class": (_C, None),
    "config.providers": (_LS, ""),
    "controlled.shutdown.enable": (_B, "true"),
    "controller.performance.always.log.threshold.ms": (_L, "2000", 0, None),
    "controller.performance.sample.period.ms": (_L, "60000", 100, None),
    "controller.quorum.append.linger.ms": (_I, "25", 0, None),
    "controller.quorum.auto.join.enable": (_B, "false"),
    "controller.quorum.election.backoff.max.ms": (_I, "1000", 0, None),
    "controller.quorum.election.timeout.ms": (_I, "1000", 0, None),
    "controller.quorum.fetch.timeout.ms": (_I, "2000", 0, None),
    "controller.quorum.request.timeout.ms": (_I, "2000", 0, None),
    "controller.quorum.retry.backoff.ms": (_I, "20", 0, None),
    "controller.socket.timeout.ms": (_I, "30000"),
    "create.topic.policy.class.name": (_C, None),
    "delete.records.purgatory.purge.interval.requests": (_I, "1"),
    "early.start.listeners": (_LS, None),
    "fetch.max.bytes": (_I, "57671680", 1024, None),
    "fetch.purgatory.purge.interval.requests": (_I, "1000"),
    "group.coordinator.append.linger.ms": (_I, "-1", -1, None),
    "group.coordinator.threads": (_I, "4", 1, None),
    "group.share.assignors": (_LS, "simple"),
    "group.share.delivery.count.limit": (_I, "5", 2, 10),
    "group.share.enable": (_B, "false"),
    "group.share.heartbeat.interval.ms": (_I, "5000", 1, None),
    "group.share.initialize.retry.interval.ms": (_I, "30000", 1, None),
    "group.share.max.heartbeat.interval.ms": (_I, "15000", 1, None),
    "group.share.max.record.lock.duration.ms": (_I, "60000", 30000, 3600000),
    "group.share.max.session.timeout.ms": (_I, "60000", 1, None),
    "group.share.max.share.sessions": (_I, "2000", 1, None),
    "group.share.max.size": (_I, "200", 1, 1000),
    "group.share.min.heartbeat.interval.ms": (_I, "5000", 1, None),
    "group.share.min.record.lock.duration.ms": (_I, "15000", 1000, 30000),
    "group.share.min.session.timeout.ms": (_I, "45000", 1, None),
    "group.share.partition.max.record.locks": (_I, "2000", 100, 10000),
    "group.share.persister.class.name": (
        _S,
        "org.apache.kafka.server.share.persister.DefaultStatePersister",
    ),
    "group.share.record.lock.duration.ms": (_I, "30000", 1000, 3600000),
    "group.share.session.timeout.ms": (_I, "45000", 1, None),
    "group.streams.heartbeat.interval.ms": (_I, "5000", 1, None),
    "group.streams.initial.rebalance.delay.ms": (_I, "3000", 0, None),
    "group.streams.max.heartbeat.interval.ms": (_I, "15000", 1, None),
    "group.streams.max.session.timeout.ms": (_I, "60000", 1, None),
    "group.streams.max.size": (_I, "2147483647", 1, None),
    "group.streams.max.standby.replicas": (_I, "2", 0, None),
    "group.streams.min.heartbeat.interval.ms": (_I, "5000", 1, None),
    "group.streams.min.session.timeout.ms": (_I, "45000", 1, None),
    "group.streams.num.standby.replicas": (_I, "0", 0, None),
    "group.streams.session.timeout.ms": (_I, "45000", 1, None),
    "initial.broker.registration.timeout.ms": (_I, "60000"),
    "internal.metadata.delete.delay.millis": (_L, "60000"),
    "internal.metadata.log.segment.bytes": (_I, None),
    "internal.metadata.max.batch.size.in.bytes": (_I, "8388608"),
    "internal.metadata.max.fetch.size.in.bytes": (_I, "8388608"),
    "kafka.metrics.polling.interval.secs": (_I, "10", 1, None),
    "kafka.metrics.reporters": (_LS, ""),
    "leader.imbalance.check.interval.seconds": (_L, "300", 1, None),
    "log.cleaner.io.buffer.load.factor": (_D, "0.9"),
    "log.cleaner.io.buffer.size": (_I, "524288", 0, None),
    "log.cleaner.threads": (_I, "1", 0, None),
    "log.dir.failure.timeout.ms": (_L, "30000", 1, None),
    "log.flush.offset.checkpoint.interval.ms": (_I, "60000", 0, None),
    "log.flush.start.offset.checkpoint.interval.ms": (_I, "60000", 0, None),
    "log.initial.task.delay.ms": (_L, "30000", 0, None),
    "log.local.retention.bytes": (_L, "-2", -2, None),
    "log.local.retention.ms": (_L, "-2", -2, None),
    "log.message.timestamp.after.max.ms": (_L, "3600000", 0, None),
    "log.message.timestamp.before.max.ms": (_L, "9223372036854775807", 0, None),
    "log.preallocate": (_B, "false"),
    "log.roll.jitter.hours": (_I, "0", 0, None),
    "log.roll.jitter.ms": (_L, None),
    "max.request.partition.size.limit": (_I, "2000", 1, None),
    "metadata.log.dir": (_S, None),
    "metadata.log.max.record.bytes.between.snapshots": (_L, "20971520", 1, None),
    "metadata.log.max.snapshot.interval.ms": (_L, "3600000", 0, None),
    "metadata.log.segment.bytes": (_I, "1073741824", 8388608, None),
    "metadata.log.segment.ms": (_L, "604800000"),
    "metadata.max.idle.interval.ms": (_I, "500", 0, None),
    "metadata.max.retention.bytes": (_L, "104857600"),
    "metadata.max.retention.ms": (_L, "604800000"),
    "metric.reporters": (_LS, "org.apache.kafka.common.metrics.JmxReporter"),
    "metrics.num.samples": (_I, "2", 1, None),
    "metrics.recording.level": (_S, "INFO"),
    "metrics.sample.window.ms": (_L, "30000", 1, None),
    "num.io.threads": (_I, "8", 1, None),
    "num.network.threads": (_I, "3", 1, None),
    "num.recovery.threads.per.data.dir": (_I, "2", 1, None),
    "num.replica.alter.log.dirs.threads": (_I, None),
    "num.replica.fetchers": (_I, "1", 1, None),
    "offset.metadata.max.bytes": (_I, "4096"),
    "offsets.commit.timeout.ms": (_I, "5000", 1, None),
    "offsets.load.buffer.size": (_I, "5242880", 1, None),
    "offsets.topic.compression.codec": (_I, "0"),
    "offsets.topic.replication.factor": (_H, "3", 1, None),
    "principal.builder.class": (
        _C,
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
    ),
    "producer.purgatory.purge.interval.requests": (_I, "1000"),
    "queued.max.request.bytes": (_L, "-1"),
    "queued.max.requests": (_I, "500", 1, None),
    "remote.fetch.max.wait.ms": (_I, "500", 1, None),
    "remote.list.offsets.request.timeout.ms": (_L, "30000", 1, None),
    "remote.log.index.file.cache.total.size.bytes": (_L, "1073741824", 1, None),
    "remote.log.manager.copier.thread.pool.size": (_I, "10", 1, None),
    "remote.log.manager.copy.max.bytes.per.second": (_L, "9223372036854775807", 1, None),
    "remote.log.manager.copy.quota.window.num": (_I, "11", 1, None),
    "remote.log.manager.copy.quota.window.size.seconds": (_I, "1", 1, None),
    "remote.log.manager.expiration.thread.pool.size": (_I, "10", 1, None),
    "remote.log.manager.fetch.max.bytes.per.second": (_L, "9223372036854775807", 1, None),
    "remote.log.manager.fetch.quota.window.num": (_I, "11", 1, None),
    "remote.log.manager.fetch.quota.window.size.seconds": (_I, "1", 1, None),
    "remote.log.manager.follower.thread.pool.size": (_I, "2", 1, None),
    "remote.log.manager.task.interval.ms": (_L, "30000", 1, None),
    "remote.log.manager.task.retry.backoff.max.ms": (_L, "30000", 1, None),
    "remote.log.manager.task.retry.backoff.ms": (_L, "500", 1, None),
    "remote.log.manager.task.retry.jitter": (_D, "0.2", 0, 0.5),
    "remote.log.manager.thread.pool.size": (_I, "2", 1, None),
    "remote.log.metadata.custom.metadata.max.bytes": (_I, "128", 0, None),
    "remote.log.metadata.manager.class.name": (
        _S,
        "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager",
    ),
    "remote.log.metadata.manager.class.path": (_S, None),
    "remote.log.metadata.manager.impl.prefix": (_S, "rlmm.config."),
    "remote.log.metadata.manager.listener.name": (_S, None),
    "remote.log.reader.max.pending.tasks": (_I, "100", 1, None),
    "remote.log.reader.threads": (_I, "10", 1, None),
    "remote.log.storage.manager.class.name": (_S, None),
    "remote.log.storage.manager.class.path": (_S, None),
    "remote.log.storage.manager.impl.prefix": (_S, "rsm.config."),
    "remote.log.storage.system.enable": (_B, "false"),
    "replica.fetch.backoff.ms": (_I, "1000", 0, None),
    "replica.fetch.max.bytes": (_I, "1048576", 0, None),
    "replica.fetch.min.bytes": (_I, "1"),
    "replica.fetch.response.max.bytes": (_I, "10485760", 0, None),
    "replica.fetch.wait.max.ms": (_I, "500"),
    "replica.high.watermark.checkpoint.interval.ms": (_L, "5000"),
    "replica.lag.time.max.ms": (_L, "30000"),
    "replica.selector.class": (_S, None),
    "replica.socket.receive.buffer.bytes": (_I, "65536"),
    "replica.socket.timeout.ms": (_I, "30000"),
    "replication.quota.window.num": (_I, "11", 1, None),
    "replication.quota.window.size.seconds": (_I, "1", 1, None),
    "request.timeout.ms": (_I, "30000"),
    "sasl.client.callback.handler.class": (_C, None),
    "sasl.jaas.config": (_P, None),
    "sasl.kerberos.kinit.cmd": (_S, "/usr/bin/kinit"),
    "sasl.kerberos.min.time.before.relogin": (_L, "60000"),
    "sasl.kerberos.principal.to.local.rules": (_LS, "DEFAULT"),
    "sasl.kerberos.service.name": (_S, None),
    "sasl.kerberos.ticket.renew.jitter": (_D, "0.05"),
    "sasl.kerberos.ticket.renew.window.factor": (_D, "0.8"),
    "sasl.login.callback.handler.class": (_C, None),
    "sasl.login.class": (_C, None),
    "sasl.login.connect.timeout.ms": (_I, None),
    "sasl.login.read.timeout.ms": (_I, None),
    "sasl.login.refresh.buffer.seconds": (_H, "300"),
    "sasl.login.refresh.min.period.seconds": (_H, "60"),
    "sasl.login.refresh.window.factor": (_D, "0.8"),
    "sasl.login.refresh.window.jitter": (_D, "0.05"),
    "sasl.login.retry.backoff.max.ms": (_L, "10000"),
    "sasl.login.retry.backoff.ms": (_L, "100"),
    "sasl.mechanism.controller.protocol": (_S, "GSSAPI"),
    "sasl.mechanism.inter.broker.protocol": (_S, "GSSAPI"),
    "sasl.oauthbearer.assertion.algorithm": (_S, "RS256"),
    "sasl.oauthbearer.assertion.claim.aud": (_S, None),
    "sasl.oauthbearer.assertion.claim.exp.seconds": (_I, "300", 0, 86400),
    "sasl.oauthbearer.assertion.claim.iss": (_S, None),
    "sasl.oauthbearer.assertion.claim.jti.include": (_B, "false"),
    "sasl.oauthbearer.assertion.claim.nbf.seconds": (_I, "60", 0, 3600),
    "sasl.oauthbearer.assertion.claim.sub": (_S, None),
    "sasl.oauthbearer.assertion.file": (_S, None),
    "sasl.oauthbearer.assertion.private.key.file": (_S, None),
    "sasl.oauthbearer.assertion.private.key.passphrase": (_P, None),
    "sasl.oauthbearer.assertion.template.file": (_S, None),
    "sasl.oauthbearer.client.credentials.client.id": (_S, None),
    "sasl.oauthbearer.client.credentials.client.secret": (_P, None),
    "sasl.oauthbearer.jwt.retriever.class": (
        _C,
        "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever",
    ),
    "sasl.oauthbearer.jwt.validator.class": (
        _C,
        "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator",
    ),
    "sasl.oauthbearer.scope": (_S, None),
    "sasl.oauthbearer.token.endpoint.url": (_S, None),
    "sasl.server.callback.handler.class": (_C, None),
    "security.inter.broker.protocol": (_S, "PLAINTEXT"),
    "security.providers": (_S, None),
    "server.max.startup.time.ms": (_L, "9223372036854775807", 0, None),
    "share.coordinator.append.linger.ms": (_I, "-1", -1, None),
    "share.coordinator.cold.partition.snapshot.interval.ms": (_I, "300000", 1, None),
    "share.coordinator.load.buffer.size": (_I, "5242880", 1, None),
    "share.coordinator.snapshot.update.records.per.snapshot": (_I, "500", 0, None),
    "share.coordinator.state.topic.compression.codec": (_I, "0"),
    "share.coordinator.state.topic.min.isr": (_H, "2", 1, None),
    "share.coordinator.state.topic.num.partitions": (_I, "50", 1, None),
    "share.coordinator.state.topic.prune.interval.ms": (_I, "300000", 1, None),
    "share.coordinator.state.topic.replication.factor": (_H, "3", 1, None),
    "share.coordinator.state.topic.segment.bytes": (_I, "104857600", 1, None),
    "share.coordinator.threads": (_I, "1", 1, None),
    "share.coordinator.write.timeout.ms": (_I, "5000", 1, None),
    "share.fetch.purgatory.purge.interval.requests": (_I, "1000"),
    "socket.connection.setup.timeout.max.ms": (_L, "30000"),
    "socket.connection.setup.timeout.ms": (_L, "10000"),
    "socket.receive.buffer.bytes": (_I, "102400"),
    "socket.send.buffer.bytes": (_I, "102400"),
    "transaction.partition.verification.enable": (_B, "true"),
    "transaction.state.log.load.buffer.size": (_I, "5242880", 1, None),
    "transaction.state.log.min.isr": (_I, "2", 1, None),
    "transaction.state.log.replication.factor": (_H, "3", 1, None),
    "transaction.state.log.segment.bytes": (_I, "104857600", 1, None),
    "transaction.two.phase.commit.enable": (_B, "false"),
    "unclean.leader.election.enable": (_B, "false"),
    "unclean.leader.election.interval.ms": (_L, "300000", 1, None),
    "unstable.api.versions.enable": (_B, "false"),
    "unstable.feature.versions.enable": (_B, "false"),
}

# defineInternal: listed by DescribeConfigs only when the broker's config sets them
INTERNAL = frozenset(
    {
        "controller.performance.always.log.threshold.ms",
        "controller.performance.sample.period.ms",
        "group.share.enable",
        "group.share.initialize.retry.interval.ms",
        "group.share.persister.class.name",
        "internal.metadata.delete.delay.millis",
        "internal.metadata.log.segment.bytes",
        "internal.metadata.max.batch.size.in.bytes",
        "internal.metadata.max.fetch.size.in.bytes",
        "log.initial.task.delay.ms",
        "remote.log.manager.task.retry.backoff.max.ms",
        "remote.log.manager.task.retry.backoff.ms",
        "remote.log.manager.task.retry.jitter",
        "server.max.startup.time.ms",
        "share.coordinator.cold.partition.snapshot.interval.ms",
        "share.coordinator.state.topic.prune.interval.ms",
        "unclean.leader.election.interval.ms",
        "unstable.api.versions.enable",
        "unstable.feature.versions.enable",
    }
)

# Kafka's DynamicBrokerConfig.AllDynamicConfigs among these (LogCleaner's, DynamicLogConfig's,
# DynamicThreadPool's, metric.reporters, DynamicListenerConfig's num.network.threads,
# DynamicProducerStateManagerConfig's, DynamicRemoteLogConfig's, config.providers). Kafka's
# dynamic SASL configs and principal.builder.class are left out, as kafkad's unprefixed
# security configs are: a change is refused (proxy/dynamic_broker.py).
KAFKA_DYNAMIC = frozenset(
    {
        "log.cleaner.threads",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "log.roll.jitter.ms",
        "log.preallocate",
        "unclean.leader.election.enable",
        "log.message.timestamp.before.max.ms",
        "log.message.timestamp.after.max.ms",
        "log.local.retention.ms",
        "log.local.retention.bytes",
        "num.io.threads",
        "num.replica.fetchers",
        "num.recovery.threads.per.data.dir",
        "background.threads",
        "metric.reporters",
        "num.network.threads",
        "transaction.partition.verification.enable",
        "remote.log.index.file.cache.total.size.bytes",
        "remote.fetch.max.wait.ms",
        "remote.log.manager.copy.max.bytes.per.second",
        "remote.log.manager.fetch.max.bytes.per.second",
        "remote.list.offsets.request.timeout.ms",
        "remote.log.manager.copier.thread.pool.size",
        "remote.log.manager.expiration.thread.pool.size",
        "remote.log.manager.follower.thread.pool.size",
        "remote.log.reader.threads",
        "config.providers",
    }
)

_BITS = {_H: 16, _I: 32, _L: 64}

# CLASS configs naming a plugin Kafka loads and calls on every request of its kind (a topic
# policy, a quota callback): kafkad runs no Java plugin, so a class given is refused, as a Kafka
# without it on its classpath refuses it (ConfigDef: "Class X could not be found."), rather than
# kept and silently not enforced
PLUGIN_CLASSES = frozenset(
    {
        "alter.config.policy.class.name",
        "create.topic.policy.class.name",
        "client.quota.callback.class",
    }
)


def parse_value(name: str, value: str) -> object:
    """``value`` checked as Kafka's ConfigDef checks ``name``'s (type, Range), the reasons in
    proxy/config_ranges.py's words (``kafka_value_error`` turns them into Kafka's texts)."""
    kind, _, *bounds = KAFKA_ONLY_CONFIGS[name]
    low, high = (*bounds, None, None)[:2]
    v = value.strip("".join(map(chr, range(33))))  # String.trim
    number: float
    if kind in _BITS:
        try:
            number = int(v)
        except ValueError:
            raise ValueError("must be a whole number") from None
        if not -(2 ** (_BITS[kind] - 1)) <= number < 2 ** (_BITS[kind] - 1):
            raise ValueError("must be a whole number")
    elif kind == _D:
        try:
            number = float(v)
        except ValueError:
            raise ValueError("must be a number") from None
    elif kind == _B:
        if v.lower() not in ("true", "false"):
            raise ValueError("must be true or false")
        return v.lower() == "true"
    elif name in PLUGIN_CLASSES and v:
        raise ValueError(
            f"Class {v} could not be found (kafkad runs no Java plugin; leave it unset)"
        )
    else:
        return v
    if low is not None and (number < low or (high is not None and number > high)):
        if high is None:
            raise ValueError(f"must be at least {low}")
        raise ValueError(f"must be between {low} and {high}")
    return number
