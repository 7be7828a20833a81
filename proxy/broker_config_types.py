"""Kafka's ConfigDef type of each broker config kafkad has (DescribeConfigs' ``config_type``,
IncrementalAlterConfigs' list check) and a short documentation line (DescribeConfigs v3+).

A name Kafka's KafkaConfig does not define (kafkad's own ``kafkad.*`` and ``shutdown.grace.ms``,
the authorizer's ``super.users``/``allow.everyone.if.no.acl.found``, mechanism-prefixed JAAS
configs) has no type: Kafka's ConfigHelper describes such a config as UNKNOWN, sensitive (its
value never shown) and read-only. A listener-prefixed config (``listener.name.<l>.<config>``)
is described with its unprefixed config's type, as Kafka's ``KafkaConfig.configType``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from proxy.kafka_only_configs import KAFKA_ONLY_CONFIGS
from proxy.kafka_only_docs import DOCS

UNKNOWN, BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = range(10)

_B, _S, _I, _L, _D, _LS, _C, _P = BOOLEAN, STRING, INT, LONG, DOUBLE, LIST, CLASS, PASSWORD

# name -> (Kafka's type, documentation)
BROKER_CONFIG_INFO: Mapping[str, tuple[int, str]] = {
    "node.id": (_I, "The node ID associated with the roles this process is playing."),
    "broker.id": (_I, "The broker id for this server (node.id's value unless set)."),
    # LIST in Kafka 4.2 (KIP-1161: SocketServerConfigs' ValidList.anyNonDuplicateValues)
    "listeners": (_LS, "Listener List - Comma-separated list of URIs we will listen on."),
    "advertised.listeners": (_LS, "Listeners to publish for clients to use."),
    "listener.security.protocol.map": (_S, "Map between listener names and security protocols."),
    "auto.create.topics.enable": (_B, "Enable auto creation of topic on the server."),
    # Kafka's configs kafkad shows (``KAFKA_ONLY``) but has none of its own
    "process.roles": (_LS, "The roles that this process plays: 'broker', 'controller', or both."),
    "controller.listener.names": (_LS, "A comma-separated list of the controller listeners."),
    "controller.quorum.voters": (_LS, "The quorum's voters, as id@host:port."),
    "controller.quorum.bootstrap.servers": (_LS, "The controller quorum's bootstrap servers."),
    "inter.broker.listener.name": (_S, "The listener brokers use to talk to each other."),
    "log.dir": (_LS, "The directories where the log data is stored (supplemental to log.dirs)."),
    "log.dirs": (_LS, "The directories where the log data is stored; if unset, log.dir's."),
    "log.retention.hours": (_I, "The number of hours to keep a log file before deleting it."),
    "log.retention.minutes": (_I, "The number of minutes to keep a log file before deleting it."),
    "log.roll.hours": (_I, "The maximum time before a new log segment is rolled out (hours)."),
    "log.flush.scheduler.interval.ms": (
        _L,
        "The frequency in ms that the log flusher checks whether any log needs to be flushed.",
    ),
    "num.partitions": (_I, "The default number of log partitions per topic."),
    "default.replication.factor": (_I, "The replication factor for automatically created topics."),
    "delete.topic.enable": (_B, "Enables delete topic."),
    "group.initial.rebalance.delay.ms": (
        _I,
        "The time the group coordinator waits for more consumers to join a new group before "
        "performing the first rebalance.",
    ),
    "group.min.session.timeout.ms": (_I, "The minimum allowed session timeout (classic)."),
    "group.max.session.timeout.ms": (_I, "The maximum allowed session timeout (classic)."),
    "group.max.size": (_I, "The maximum number of consumers a single consumer group holds."),
    "group.coordinator.rebalance.protocols": (_LS, "The list of enabled rebalance protocols."),
    "group.consumer.heartbeat.interval.ms": (_I, "The heartbeat interval given to members."),
    "group.consumer.min.heartbeat.interval.ms": (_I, "The minimum heartbeat interval."),
    "group.consumer.max.heartbeat.interval.ms": (_I, "The maximum heartbeat interval."),
    "group.consumer.session.timeout.ms": (_I, "The timeout to detect client failures."),
    "group.consumer.min.session.timeout.ms": (_I, "The minimum allowed session timeout."),
    "group.consumer.max.session.timeout.ms": (_I, "The maximum allowed session timeout."),
    "group.consumer.assignors": (_LS, "The server side assignors; the first is the default."),
    "group.consumer.max.size": (_I, "The maximum number of consumers a consumer group holds."),
    "group.consumer.regex.refresh.interval.ms": (
        _I,
        "The interval at which the group coordinator will refresh the topics matching the "
        "group subscribed regexes. This is only applicable to consumer groups using the "
        "consumer group protocol.",
    ),
    "group.consumer.migration.policy": (
        _S,
        "The policy converting non-empty classic groups to consumer groups and back.",
    ),
    "offsets.topic.num.partitions": (_I, "The number of partitions for the offset commit topic."),
    "offsets.retention.minutes": (
        _I,
        "For subscribed consumers, committed offset of a specific partition will be expired "
        "and discarded after this period once the group is empty.",
    ),
    "offsets.retention.check.interval.ms": (_L, "Frequency at which to check for stale offsets."),
    "transaction.state.log.num.partitions": (
        _I,
        "The number of partitions for the transaction topic.",
    ),
    "transaction.max.timeout.ms": (_I, "The maximum allowed timeout for transactions."),
    "transactional.id.expiration.ms": (
        _I,
        "The time the transaction coordinator waits without receiving any transaction status "
        "updates for the current transaction before expiring its transactional id.",
    ),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (
        _I,
        "The interval at which to roll back transactions that have timed out.",
    ),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (
        _I,
        "The interval at which to remove transactions that have expired.",
    ),
    "max.incremental.fetch.session.cache.slots": (
        _I,
        "The maximum number of incremental fetch sessions that we will maintain.",
    ),
    "quota.window.num": (_I, "The number of samples to retain in memory for client quotas."),
    "quota.window.size.seconds": (_I, "The time span of each sample for client quotas."),
    "controller.quota.window.num": (
        _I,
        "The number of samples to retain in memory for controller mutation quotas",
    ),
    "controller.quota.window.size.seconds": (
        _I,
        "The time span of each sample for controller mutations quotas",
    ),
    "socket.request.max.bytes": (_I, "The maximum number of bytes in a socket request."),
    "socket.listen.backlog.size": (
        _I,
        "The maximum number of pending connections on the socket. In Linux, you may also need "
        "to configure <code>somaxconn</code> and <code>tcp_max_syn_backlog</code> kernel "
        "parameters accordingly to make the configuration takes effect.",
    ),
    "connections.max.idle.ms": (_L, "Idle connections timeout."),
    "max.connections": (
        _I,
        "The maximum number of connections we allow in the broker at any time.",
    ),
    "max.connections.per.ip": (
        _I,
        "The maximum number of connections we allow from each ip address.",
    ),
    "max.connections.per.ip.overrides": (
        _S,
        "A comma-separated list of per-ip or hostname overrides to the default maximum number "
        'of connections. An example value is "hostName:100,127.0.0.1:200"',
    ),
    "max.connection.creation.rate": (
        _I,
        "The maximum connection creation rate we allow in the broker at any time.",
    ),
    "message.max.bytes": (_I, "The largest record batch size allowed by Kafka."),
    "log.segment.bytes": (_I, "The maximum size of a single log file."),
    "log.roll.ms": (_L, "The maximum time before a new log segment is rolled out."),
    "log.retention.ms": (_L, "The number of milliseconds to keep a log file before deleting it."),
    "log.retention.bytes": (_L, "The maximum size of the log before deleting it."),
    "log.retention.check.interval.ms": (
        _L,
        "The frequency in milliseconds that the log cleaner checks whether any log is eligible "
        "for deletion.",
    ),
    "log.index.interval.bytes": (
        _I,
        "The interval with which we add an entry to the offset index.",
    ),
    "log.index.size.max.bytes": (_I, "The maximum size in bytes of the offset index."),
    "log.segment.delete.delay.ms": (
        _L,
        "The amount of time to wait before deleting a file from the filesystem.",
    ),
    "log.cleanup.policy": (_LS, "The default cleanup policy for segments beyond the retention."),
    "log.cleaner.enable": (_B, "Enable the log cleaner process to run on the server."),
    "log.cleaner.backoff.ms": (_L, "The amount of time to sleep when there are no logs to clean."),
    "log.cleaner.min.cleanable.ratio": (
        _D,
        "The minimum ratio of dirty log to total log for a log to be eligible for cleaning.",
    ),
    "log.cleaner.delete.retention.ms": (_L, "The amount of time to retain tombstone markers."),
    "log.cleaner.min.compaction.lag.ms": (
        _L,
        "The minimum time a message will remain uncompacted in the log.",
    ),
    "log.cleaner.max.compaction.lag.ms": (
        _L,
        "The maximum time a message will remain ineligible for compaction in the log.",
    ),
    "log.cleaner.io.max.bytes.per.second": (
        _D,
        "The log cleaner will be throttled so that the sum of its read and write I/O will be "
        "less than this value on average.",
    ),
    "log.cleaner.dedupe.buffer.size": (
        _L,
        "The total memory used for log deduplication across all cleaner threads.",
    ),
    "offsets.topic.segment.bytes": (_I, "The offsets topic segment bytes."),
    "log.flush.interval.messages": (
        _L,
        "The number of messages accumulated on a log partition before messages are flushed "
        "to disk.",
    ),
    "log.flush.interval.ms": (
        _L,
        "The maximum time in ms that a message in any topic is kept in memory before flushed "
        "to disk.",
    ),
    "log.message.timestamp.type": (
        _S,
        "Define whether the timestamp in the message is message create time or log append time.",
    ),
    "compression.type": (_S, "Specify the final compression type for a given topic."),
    "compression.gzip.level": (_I, "The compression level to use if compression.type is gzip."),
    "compression.lz4.level": (_I, "The compression level to use if compression.type is lz4."),
    "compression.zstd.level": (_I, "The compression level to use if compression.type is zstd."),
    "min.insync.replicas": (
        _I,
        "The minimum number of replicas that must acknowledge a write with acks=all.",
    ),
    "producer.id.expiration.ms": (
        _I,
        "The time in ms that a topic partition leader will wait before expiring producer IDs.",
    ),
    "producer.id.expiration.check.interval.ms": (
        _I,
        "The interval at which to remove producer IDs that have expired.",
    ),
    "telemetry.max.bytes": (_I, "The maximum size (after compression) of a telemetry push."),
    "ssl.protocol": (_S, "The SSL protocol used to generate the SSLContext."),
    "ssl.enabled.protocols": (_LS, "The list of protocols enabled for SSL connections."),
    "ssl.cipher.suites": (_LS, "A list of cipher suites."),
    "ssl.client.auth": (_S, "Configures the broker to request client authentication."),
    "ssl.keystore.type": (_S, "The file format of the key store file."),
    "ssl.keystore.location": (_S, "The location of the key store file."),
    "ssl.keystore.password": (_P, "The store password for the key store file."),
    "ssl.keystore.key": (_P, "Private key in the format specified by 'ssl.keystore.type'."),
    "ssl.keystore.certificate.chain": (_P, "Certificate chain in the keystore's format."),
    "ssl.key.password": (_P, "The password of the private key in the key store file."),
    "ssl.truststore.type": (_S, "The file format of the trust store file."),
    "ssl.truststore.location": (_S, "The location of the trust store file."),
    "ssl.truststore.password": (_P, "The password for the trust store file."),
    "ssl.truststore.certificates": (_P, "Trusted certificates in the truststore's format."),
    "ssl.endpoint.identification.algorithm": (
        _S,
        "The endpoint identification algorithm to validate server hostname using server "
        "certificate.",
    ),
    "ssl.principal.mapping.rules": (
        _S,
        "A list of rules for mapping from distinguished name of the client certificate to "
        "short name.",
    ),
    "ssl.provider": (_S, "The name of the security provider used for SSL connections."),
    "ssl.keymanager.algorithm": (_S, "The algorithm used by key manager factory."),
    "ssl.trustmanager.algorithm": (_S, "The algorithm used by trust manager factory."),
    "ssl.secure.random.implementation": (_S, "The SecureRandom PRNG implementation."),
    "ssl.engine.factory.class": (_C, "The class providing SSLEngine objects."),
    "ssl.allow.dn.changes": (
        _B,
        "Whether a dynamic keystore update may change the certificate's distinguished name.",
    ),
    "ssl.allow.san.changes": (
        _B,
        "Whether a dynamic keystore update may change the certificate's subject alternative names.",
    ),
    "sasl.enabled.mechanisms": (_LS, "The list of SASL mechanisms enabled in the server."),
    "sasl.oauthbearer.jwks.endpoint.url": (_S, "The URL of the OAuth/OIDC JWKS."),
    "sasl.oauthbearer.expected.audience": (_LS, "The expected audiences of the JWT."),
    "sasl.oauthbearer.expected.issuer": (_S, "The expected issuer of the JWT."),
    "sasl.oauthbearer.scope.claim.name": (_S, "The JWT claim naming the scope."),
    "sasl.oauthbearer.sub.claim.name": (_S, "The JWT claim naming the subject."),
    "sasl.oauthbearer.clock.skew.seconds": (_I, "The allowed clock skew (seconds)."),
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": (_L, "How often the JWKS is refreshed."),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": (_L, "JWKS retry initial backoff."),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": (_L, "JWKS retry maximum backoff."),
    "connections.max.reauth.ms": (
        _L,
        "The maximum session lifetime of a SASL-authenticated connection (0: unlimited).",
    ),
    "connection.failed.authentication.delay.ms": (
        _I,
        "Connection close delay on failed authentication.",
    ),
    "sasl.server.max.receive.size": (
        _I,
        "The maximum receive size allowed before and during initial SASL authentication.",
    ),
    "authorizer.class.name": (_S, "The fully qualified name of the authorizer class."),
    "delegation.token.secret.key": (_P, "Secret key to generate and verify delegation tokens."),
    "delegation.token.max.lifetime.ms": (_L, "The token has a maximum lifetime."),
    "delegation.token.expiry.time.ms": (_L, "The token validity time before renewal."),
    "delegation.token.expiry.check.interval.ms": (
        _L,
        "Scan interval to remove expired delegation tokens.",
    ),
}

# Kafka's thread pool sizes, which a server.properties may set (proxy/kafka_properties.py
# IGNORED: kafkad has no such pools) and which are dynamic in Kafka (DynamicThreadPool,
# DynamicListenerConfig's num.network.threads): a change is stored and changes nothing here.
THREAD_POOLS = frozenset(
    {
        "num.network.threads",
        "num.io.threads",
        "num.replica.fetchers",
        "num.recovery.threads.per.data.dir",
        "background.threads",
    }
)

# Kafka's PASSWORD configs among kafkad's: their values are never shown
PASSWORDS = frozenset(n for n, (kind, _) in BROKER_CONFIG_INFO.items() if kind == PASSWORD)


# Kafka configs DescribeConfigs lists though kafkad has no config of that name: broker.id
# (node.id's), the data dir (log.dirs), the roles, the hours/minutes forms a server.properties
# may give (kafkad keeps their ms form), the flush scheduler and inter.broker.listener.name
# (Kafka's default null). Kafka's other KRaft names here (controller.listener.names,
# controller.quorum.*) are listed only when the config file sets them: kafkad checks them but
# has no controller listener, and a Kafka node always sets the first and one of the others.
KAFKA_ONLY = frozenset(
    {
        "inter.broker.listener.name",
        "broker.id",
        "log.dir",
        "log.dirs",
        "process.roles",
        "log.retention.hours",
        "log.retention.minutes",
        "log.roll.hours",
        "log.flush.scheduler.interval.ms",
    }
)


# kafkad's configs whose default in Kafka's ConfigDef is null (kafkad's is ""): unset, Kafka's
# DescribeConfigs shows them with a null value, source DEFAULT_CONFIG and no synonym
# (DynamicBrokerConfig.staticDefaultConfigs leaves null defaults out).
NULL_DEFAULTS = frozenset(
    {
        "advertised.listeners",
        "delegation.token.secret.key",
        "sasl.oauthbearer.expected.issuer",
        "sasl.oauthbearer.jwks.endpoint.url",
        "ssl.engine.factory.class",
        "ssl.key.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.provider",
        "ssl.secure.random.implementation",
        "ssl.truststore.certificates",
        "ssl.truststore.location",
        "ssl.truststore.password",
    }
)


# Kafka's broker quota configs (QuotaConfig.brokerQuotaConfigs: in DynamicConfig.Broker, not in
# KafkaConfig): replication throttles kafkad, which has no replication, only stores. Each is a
# LONG of at least 0, so typed by DescribeConfigs (KafkaConfig.configType looks in both).
BROKER_QUOTA_RATES = frozenset(
    {
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    }
)


def exact_type(name: str) -> int:
    """Kafka's type of broker config ``name`` (``KafkaConfig.configKeys``: kafkad's configs and
    Kafka's others, proxy/kafka_only_configs.py); UNKNOWN for a name Kafka does not define, a
    listener-prefixed one included."""
    info = BROKER_CONFIG_INFO.get(name) or KAFKA_ONLY_CONFIGS.get(name)
    return UNKNOWN if info is None else info[0]


# Kafka's DynamicBrokerConfig.ListenerMechanismConfigs: listener.name.<l>.<mechanism>.<config>
_MECHANISM_CONFIGS = (
    "sasl.jaas.config",
    "sasl.login.callback.handler.class",
    "sasl.login.class",
    "sasl.server.callback.handler.class",
    "connections.max.reauth.ms",
)
# KafkaConfig's types of the mechanism configs kafkad has no unprefixed config for
_MECHANISM_TYPES = dict.fromkeys(_MECHANISM_CONFIGS[1:4], CLASS) | {"sasl.jaas.config": PASSWORD}


def listener_prefixed(name: str) -> tuple[str, str] | None:
    """``listener.name.<l>.<config>`` -> (l, config), else None: Kafka's ``ListenerConfigRegex``
    (DynamicBrokerConfig), whose ``[^.]*`` lets the listener name be empty (no listener is
    named so: such a config is kept but applies to none). The one parser of these names."""
    m = re.fullmatch(r"listener\.name\.([^.]*)\.(.*)", name, re.DOTALL)
    return None if m is None else (m[1], m[2])


def listener_base(name: str) -> str | None:
    """Kafka's ``brokerConfigSynonyms`` of a listener-prefixed config: its unprefixed name
    (``listener.name.ssl.ssl.keystore.location`` -> ``ssl.keystore.location``,
    ``listener.name.sasl_ssl.plain.sasl.jaas.config`` -> ``sasl.jaas.config``), else None."""
    if (parts := listener_prefixed(name)) is None:
        return None
    return next((c for c in _MECHANISM_CONFIGS if parts[1].endswith(c)), parts[1])


def config_type(name: str) -> int:
    """Kafka's ``KafkaConfig.configType`` (DescribeConfigs): a listener-prefixed config has its
    unprefixed config's type; UNKNOWN for a name Kafka does not define."""
    kind = exact_type(name)
    if kind == UNKNOWN and (base := listener_base(name)) is not None:
        return _MECHANISM_TYPES.get(base, exact_type(base))
    if kind == UNKNOWN and name in BROKER_QUOTA_RATES:  # DynamicConfig.Broker's: LONGs
        return LONG
    return kind


def sensitive(name: str) -> bool:
    """Kafka's ``KafkaConfig.maybeSensitive``: a PASSWORD, or a config of unknown type."""
    return config_type(name) in (UNKNOWN, PASSWORD)


def documentation(name: str) -> str | None:
    info = BROKER_CONFIG_INFO.get(name)
    return DOCS.get(name) if info is None else info[1]
