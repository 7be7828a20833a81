"""The documentation DescribeConfigs (v3+) gives for Kafka 4.2's broker configs kafkad has no
use for (proxy/kafka_only_configs.py): the first sentence of each config's ConfigDef
documentation, HTML tags dropped. ``_TEXT``: a config's name, then its sentence on indented
lines (joined with single spaces)."""

from __future__ import annotations

from collections.abc import Mapping

_TEXT = """
add.partitions.to.txn.retry.backoff.max.ms
  The maximum allowed timeout for adding partitions to transactions on the server side.
add.partitions.to.txn.retry.backoff.ms
  The server-side retry backoff when the server attemptsto add the partition to the transaction
alter.config.policy.class.name
  The alter configs policy class that should be used for validation.
alter.log.dirs.replication.quota.window.num
  The number of samples to retain in memory for alter log dirs replication quotas
alter.log.dirs.replication.quota.window.size.seconds
  The time span of each sample for alter log dirs replication quotas
auto.leader.rebalance.enable
  Enables auto leader balancing.
background.threads
  The number of threads to use for various background processing tasks
broker.heartbeat.interval.ms
  The length of time in milliseconds between broker heartbeats.
broker.rack
  Rack of the broker.
broker.session.timeout.ms
  The length of time in milliseconds that a broker lease lasts if no heartbeats are made.
client.quota.callback.class
  The fully qualified name of a class that implements the ClientQuotaCallback interface, which
  is used to determine quota limits applied to client requests.
controlled.shutdown.enable
  Enable controlled shutdown of the server.
controller.performance.always.log.threshold.ms
  We will log an error message about controller events that take longer than this threshold.
controller.performance.sample.period.ms
  The number of milliseconds between periodic controller event performance log messages.
controller.quorum.append.linger.ms
  The duration in milliseconds that the leader will wait for writes to accumulate before
  flushing them to disk.
controller.quorum.auto.join.enable
  Controls whether a KRaft controller should automatically join the cluster metadata partition
  for its cluster id.
controller.quorum.election.backoff.max.ms
  Maximum time in milliseconds before starting new elections.
controller.quorum.election.timeout.ms
  Maximum time in milliseconds to wait without being able to fetch from the leader before
  triggering a new election
controller.quorum.fetch.timeout.ms
  Maximum time without a successful fetch from the current leader before becoming a candidate
  and triggering an election for voters; Maximum time a leader can go without receiving valid
  fetch or fetchSnapshot request from a majority of the quorum before resigning.
controller.socket.timeout.ms
  The socket timeout for controller-to-broker channels.
create.topic.policy.class.name
  The create topic policy class that should be used for validation.
delete.records.purgatory.purge.interval.requests
  The purge interval (in number of requests) of the delete records request purgatory
early.start.listeners
  A comma-separated list of listener names which may be started before the authorizer has
  finished initialization.
fetch.max.bytes
  The maximum number of bytes we will return for a fetch request.
fetch.purgatory.purge.interval.requests
  The purge interval (in number of requests) of the fetch request purgatory
group.coordinator.append.linger.ms
  The duration in milliseconds that the coordinator will wait for writes to accumulate before
  flushing them to disk.
group.coordinator.threads
  The number of threads used by the group coordinator.
group.share.delivery.count.limit
  The maximum number of delivery attempts for a record delivered to a share group.
group.share.enable
  Enable share groups on the broker.
group.share.heartbeat.interval.ms
  The heartbeat interval given to the members of a share group.
group.share.initialize.retry.interval.ms
  Time elapsed before retrying initialize share group state request.
group.share.max.heartbeat.interval.ms
  The maximum heartbeat interval for share group members.
group.share.max.record.lock.duration.ms
  The record acquisition lock maximum duration in milliseconds for share groups.
group.share.max.session.timeout.ms
  The maximum allowed session timeout for share group members.
group.share.max.share.sessions
  The maximum number of share sessions per broker.
group.share.max.size
  The maximum number of members that a single share group can accommodate.
group.share.min.heartbeat.interval.ms
  The minimum heartbeat interval for share group members.
group.share.min.record.lock.duration.ms
  The record acquisition lock minimum duration in milliseconds for share groups.
group.share.min.session.timeout.ms
  The minimum allowed session timeout for share group members.
group.share.partition.max.record.locks
  Share-group record lock limit per share-partition.
group.share.persister.class.name
  The fully qualified name of a class which implements the
  org.apache.kafka.server.share.Persister interface.
group.share.record.lock.duration.ms
  The record acquisition lock duration in milliseconds for share groups.
group.share.session.timeout.ms
  The timeout to detect client failures when using the share group protocol.
group.streams.heartbeat.interval.ms
  The heartbeat interval given to the members.
group.streams.initial.rebalance.delay.ms
  The amount of time the group coordinator will wait for more streams clients to join a new
  group before performing the first rebalance.
group.streams.max.heartbeat.interval.ms
  The maximum allowed value for the group-level configuration of streams.heartbeat.interval.ms
group.streams.max.session.timeout.ms
  The maximum allowed value for the group-level configuration of streams.session.timeout.ms
group.streams.max.size
  The maximum number of streams clients that a single streams group can accommodate.
group.streams.max.standby.replicas
  The maximum allowed value for the group-level configuration of streams.num.standby.replicas
group.streams.min.heartbeat.interval.ms
  The minimum allowed value for the group-level configuration of streams.heartbeat.interval.ms
group.streams.min.session.timeout.ms
  The minimum allowed value for the group-level configuration of streams.session.timeout.ms
group.streams.num.standby.replicas
  The number of standby replicas for each task.
group.streams.session.timeout.ms
  The timeout to detect client failures when using the streams group protocol.
initial.broker.registration.timeout.ms
  When initially registering with the controller quorum, the number of milliseconds to wait
  before declaring failure and exiting the broker process.
internal.metadata.delete.delay.millis
  The amount of time to wait before deleting a file from the filesystem, only for testing.
internal.metadata.log.segment.bytes
  The maximum size of a single metadata log file, only for testing.
internal.metadata.max.batch.size.in.bytes
  The largest record batch size allowed in the metadata log, only for testing.
internal.metadata.max.fetch.size.in.bytes
  The maximum number of bytes to read when fetching from the metadata log, only for testing.
kafka.metrics.polling.interval.secs
  The metrics polling interval (in seconds) which can be used in kafka.metrics.reporters
  implementations.
kafka.metrics.reporters
  A list of classes to use as Yammer metrics custom reporters.
leader.imbalance.check.interval.seconds
  The frequency with which the partition rebalance check is triggered by the controller
log.cleaner.io.buffer.load.factor
  Log cleaner dedupe buffer load factor.
log.cleaner.io.buffer.size
  The total memory used for log cleaner I/O buffers across all cleaner threads
log.cleaner.threads
  The number of background threads to use for log cleaning
log.dir.failure.timeout.ms
  If the broker is unable to successfully communicate to the controller that some log directory
  has failed for longer than this time, the broker will fail and shut down.
log.flush.offset.checkpoint.interval.ms
  The frequency with which we update the persistent record of the last flush which acts as the
  log recovery point.
log.flush.start.offset.checkpoint.interval.ms
  The frequency with which we update the persistent record of log start offset
log.initial.task.delay.ms
  The initial task delay in millisecond when initializing tasks in LogManager.
log.local.retention.bytes
  The maximum size of local log segments that can grow for a partition before it gets eligible
  for deletion.
log.local.retention.ms
  The number of milliseconds to keep the local log segments before it gets eligible for
  deletion.
log.message.timestamp.after.max.ms
  This configuration sets the allowable timestamp difference between the message timestamp and
  the broker's timestamp.
log.message.timestamp.before.max.ms
  This configuration sets the allowable timestamp difference between the broker's timestamp and
  the message timestamp.
log.preallocate
  Should pre allocate file when create new segment?
log.roll.jitter.hours
  The maximum jitter to subtract from logRollTimeMillis (in hours), secondary to
  log.roll.jitter.ms property
log.roll.jitter.ms
  The maximum jitter to subtract from logRollTimeMillis (in milliseconds).
max.request.partition.size.limit
  The maximum number of partitions can be served in one request.
metadata.log.dir
  This configuration determines where we put the metadata log.
metadata.log.segment.bytes
  The maximum size of a single metadata log file.
metadata.log.segment.ms
  The maximum time before a new metadata log file is rolled out (in milliseconds).
metadata.max.retention.bytes
  The maximum combined size of the metadata log and snapshots before deleting old snapshots and
  log files.
metadata.max.retention.ms
  The number of milliseconds to keep a metadata log file or snapshot before deleting it.
metric.reporters
  A list of classes to use as metrics reporters.
metrics.num.samples
  The number of samples maintained to compute metrics.
metrics.recording.level
  The highest recording level for metrics.
metrics.sample.window.ms
  The window of time a metrics sample is computed over.
num.io.threads
  The number of threads that the server uses for processing requests, which may include disk I/O
num.network.threads
  The number of threads that the server uses for receiving requests from the network and sending
  responses to the network.
num.recovery.threads.per.data.dir
  The number of threads per data directory to be used for log recovery at startup and flushing
  at shutdown
num.replica.alter.log.dirs.threads
  The number of threads that can move replicas between log directories, which may include disk
  I/O.
num.replica.fetchers
  Number of fetcher threads used to replicate records from each source broker.
offset.metadata.max.bytes
  The maximum size for a metadata entry associated with an offset commit.
offsets.commit.timeout.ms
  Offset commit will be delayed until all replicas for the offsets topic receive the commit or
  this timeout is reached.
offsets.load.buffer.size
  Batch size for reading from the offsets segments when loading group metadata into the cache
  (soft-limit, overridden if records are too large).
offsets.topic.compression.codec
  Compression codec for the offsets topic - compression may be used to achieve "atomic" commits.
offsets.topic.replication.factor
  The replication factor for the offsets topic (set higher to ensure availability).
principal.builder.class
  The fully qualified name of a class that implements the KafkaPrincipalBuilder interface, which
  is used to build the KafkaPrincipal object used during authorization.
producer.purgatory.purge.interval.requests
  The purge interval (in number of requests) of the producer request purgatory
queued.max.request.bytes
  The number of queued bytes allowed before no more requests are read
queued.max.requests
  The number of queued requests allowed for data-plane, before blocking the network threads
remote.fetch.max.wait.ms
  The maximum amount of time the server will wait before answering the fetch request containing
  remote fetch partitions.
remote.list.offsets.request.timeout.ms
  The maximum amount of time the server will wait for the remote list offsets request to
  complete.
remote.log.index.file.cache.total.size.bytes
  The total size of the space allocated to store index files fetched from remote storage in the
  local storage.
remote.log.manager.copier.thread.pool.size
  Size of the thread pool used in scheduling tasks to copy segments.
remote.log.manager.copy.max.bytes.per.second
  The maximum number of bytes that can be copied from local storage to remote storage per
  second.
remote.log.manager.copy.quota.window.num
  The number of samples to retain in memory for remote copy quota management.
remote.log.manager.copy.quota.window.size.seconds
  The time span of each sample for remote copy quota management.
remote.log.manager.expiration.thread.pool.size
  Size of the thread pool used in scheduling tasks to clean up the expired remote log segments.
remote.log.manager.fetch.max.bytes.per.second
  The maximum number of bytes that can be fetched from remote storage to local storage per
  second.
remote.log.manager.fetch.quota.window.num
  The number of samples to retain in memory for remote fetch quota management.
remote.log.manager.fetch.quota.window.size.seconds
  The time span of each sample for remote fetch quota management.
remote.log.manager.follower.thread.pool.size
  Size of the thread pool used in scheduling follower tasks to read the highest-uploaded
  remote-offset for follower partitions.
remote.log.manager.task.interval.ms
  Interval at which remote log manager runs the scheduled tasks like copy segments, and clean up
  remote log segments.
remote.log.manager.task.retry.backoff.max.ms
  The maximum amount of time in milliseconds to wait when the request is retried again.
remote.log.manager.task.retry.backoff.ms
  The initial amount of wait in milliseconds before the request is retried again.
remote.log.manager.task.retry.jitter
  The value used in defining the range for computing random jitter factor.
remote.log.manager.thread.pool.size
  Size of the thread pool used in scheduling follower tasks to read the highest-uploaded
  remote-offset for follower partitions.
remote.log.metadata.custom.metadata.max.bytes
  The maximum size of custom metadata in bytes that the broker should accept from a remote
  storage plugin.
remote.log.metadata.manager.class.name
  Fully qualified class name of RemoteLogMetadataManager implementation.
remote.log.metadata.manager.class.path
  Class path of the RemoteLogMetadataManager implementation.
remote.log.metadata.manager.impl.prefix
  Prefix used for properties to be passed to RemoteLogMetadataManager implementation.
remote.log.metadata.manager.listener.name
  Listener name of the local broker to which it should get connected if needed by
  RemoteLogMetadataManager implementation.
remote.log.reader.max.pending.tasks
  Maximum remote log reader thread pool task queue size.
remote.log.reader.threads
  Size of the thread pool that is allocated for handling remote log reads.
remote.log.storage.manager.class.name
  Fully qualified class name of RemoteStorageManager implementation.
remote.log.storage.manager.class.path
  Class path of the RemoteStorageManager implementation.
remote.log.storage.manager.impl.prefix
  Prefix used for properties to be passed to RemoteStorageManager implementation.
remote.log.storage.system.enable
  Whether to enable tiered storage functionality in a broker or not.
replica.fetch.backoff.ms
  The amount of time to sleep when fetch partition error occurs.
replica.fetch.max.bytes
  The number of bytes of messages to attempt to fetch for each partition.
replica.fetch.min.bytes
  Minimum bytes expected for each fetch response.
replica.fetch.response.max.bytes
  Maximum bytes expected for the entire fetch response.
replica.fetch.wait.max.ms
  The maximum wait time for each fetcher request issued by follower replicas.
replica.high.watermark.checkpoint.interval.ms
  The frequency with which the high watermark is saved out to disk
replica.lag.time.max.ms
  If a follower hasn't sent any fetch requests or hasn't consumed up to the leader's log end
  offset for at least this time, the leader will remove the follower from ISR
replica.selector.class
  The fully qualified class name that implements ReplicaSelector.
replica.socket.receive.buffer.bytes
  The socket receive buffer for network requests to the leader for replicating data
replica.socket.timeout.ms
  The socket timeout for network requests.
replication.quota.window.num
  The number of samples to retain in memory for replication quotas
replication.quota.window.size.seconds
  The time span of each sample for replication quotas
request.timeout.ms
  The configuration controls the maximum amount of time the client will wait for the response of
  a request.
sasl.client.callback.handler.class
  The fully qualified name of a SASL client callback handler class that implements the
  AuthenticateCallbackHandler interface.
sasl.jaas.config
  JAAS login context parameters for SASL connections in the format used by JAAS configuration
  files.
sasl.kerberos.kinit.cmd
  Kerberos kinit command path.
sasl.kerberos.min.time.before.relogin
  Login thread sleep time between refresh attempts.
sasl.kerberos.principal.to.local.rules
  A list of rules for mapping from principal names to short names (typically operating system
  usernames).
sasl.kerberos.service.name
  The Kerberos principal name that Kafka runs as.
sasl.kerberos.ticket.renew.jitter
  Percentage of random jitter added to the renewal time.
sasl.kerberos.ticket.renew.window.factor
  Login thread will sleep until the specified window factor of time from last refresh to
  ticket's expiry has been reached, at which time it will try to renew the ticket.
sasl.login.callback.handler.class
  The fully qualified name of a SASL login callback handler class that implements the
  AuthenticateCallbackHandler interface.
sasl.login.class
  The fully qualified name of a class that implements the Login interface.
sasl.login.connect.timeout.ms
  The (optional) value in milliseconds for the external authentication provider connection
  timeout.
sasl.login.read.timeout.ms
  The (optional) value in milliseconds for the external authentication provider read timeout.
sasl.login.refresh.buffer.seconds
  The amount of buffer time before credential expiration to maintain when refreshing a
  credential, in seconds.
sasl.login.refresh.min.period.seconds
  The desired minimum time for the login refresh thread to wait before refreshing a credential,
  in seconds.
sasl.login.refresh.window.factor
  Login refresh thread will sleep until the specified window factor relative to the credential's
  lifetime has been reached, at which time it will try to refresh the credential.
sasl.login.refresh.window.jitter
  The maximum amount of random jitter relative to the credential's lifetime that is added to the
  login refresh thread's sleep time.
sasl.login.retry.backoff.max.ms
  The (optional) value in milliseconds for the maximum wait between login attempts to the
  external authentication provider.
sasl.login.retry.backoff.ms
  The (optional) value in milliseconds for the initial wait between login attempts to the
  external authentication provider.
sasl.mechanism.controller.protocol
  SASL mechanism used for communication with controllers.
sasl.mechanism.inter.broker.protocol
  SASL mechanism used for inter-broker communication.
sasl.oauthbearer.assertion.algorithm
  The algorithm the Apache Kafka client should use to sign the assertion sent to the identity
  provider.
sasl.oauthbearer.assertion.claim.aud
  The JWT aud (Audience) claim which will be included in the client JWT assertion created
  locally.
sasl.oauthbearer.assertion.claim.exp.seconds
  The number of seconds in the future for which the JWT is valid.
sasl.oauthbearer.assertion.claim.iss
  The value to be used as the iss (Issuer) claim which will be included in the client JWT
  assertion created locally.
sasl.oauthbearer.assertion.claim.jti.include
  Flag that determines if the JWT assertion should generate a unique ID for the JWT and include
  it in the jti (JWT ID) claim.
sasl.oauthbearer.assertion.claim.nbf.seconds
  The number of seconds in the past from which the JWT is valid.
sasl.oauthbearer.assertion.claim.sub
  The value to be used as the sub (Subject) claim which will be included in the client JWT
  assertion created locally.
sasl.oauthbearer.assertion.file
  File that contains a pre-generated JWT assertion.
sasl.oauthbearer.assertion.private.key.file
  File that contains a private key in the standard PEM format which is used to sign the JWT
  assertion sent to the identity provider.
sasl.oauthbearer.assertion.private.key.passphrase
  The optional passphrase to decrypt the private key file specified by
  sasl.oauthbearer.assertion.private.key.file.
sasl.oauthbearer.assertion.template.file
  This optional configuration specifies the file containing the JWT headers and/or payload
  claims to be used when creating the JWT assertion.
sasl.oauthbearer.client.credentials.client.id
  The ID (defined in/by the OAuth identity provider) to identify the client requesting the
  token.
sasl.oauthbearer.client.credentials.client.secret
  The secret (defined by either the user or preassigned, depending on the identity provider) of
  the client requesting the token.
sasl.oauthbearer.jwt.retriever.class
  The fully-qualified class name of a JwtRetriever implementation used to request tokens from
  the identity provider.
sasl.oauthbearer.jwt.validator.class
  The fully-qualified class name of a JwtValidator implementation used to validate the JWT from
  the identity provider.
sasl.oauthbearer.scope
  This is the level of access a client application is granted to a resource or API which is
  included in the token request.
sasl.oauthbearer.token.endpoint.url
  The URL for the OAuth/OIDC identity provider.
sasl.server.callback.handler.class
  The fully qualified name of a SASL server callback handler class that implements the
  AuthenticateCallbackHandler interface.
security.inter.broker.protocol
  Security protocol used to communicate between brokers.
security.providers
  A list of configurable creator classes each returning a provider implementing security
  algorithms.
server.max.startup.time.ms
  The maximum number of milliseconds we will wait for the server to come up.
share.coordinator.append.linger.ms
  The duration in milliseconds that the share coordinator will wait for writes to accumulate
  before flushing them to disk.
share.coordinator.cold.partition.snapshot.interval.ms
  The duration in milliseconds that the share coordinator will wait between force snapshotting
  share partitions which are not being updated.
share.coordinator.load.buffer.size
  Batch size for reading from the share-group state topic when loading state information into
  the cache (soft-limit, overridden if records are too large).
share.coordinator.snapshot.update.records.per.snapshot
  The number of update records the share coordinator writes between snapshot records.
share.coordinator.state.topic.compression.codec
  Compression codec for the share-group state topic.
share.coordinator.state.topic.min.isr
  Overridden min.insync.replicas for the share-group state topic.
share.coordinator.state.topic.num.partitions
  The number of partitions for the share-group state topic (should not change after deployment).
share.coordinator.state.topic.prune.interval.ms
  The duration in milliseconds that the share coordinator will wait between pruning eligible
  records in share-group state topic.
share.coordinator.state.topic.replication.factor
  Replication factor for the share-group state topic.
share.coordinator.state.topic.segment.bytes
  The log segment size for the share-group state topic.
share.coordinator.threads
  The number of threads used by the share coordinator.
share.coordinator.write.timeout.ms
  The duration in milliseconds that the share coordinator will wait for all replicas of the
  share-group state topic to receive a write.
share.fetch.purgatory.purge.interval.requests
  The purge interval (in number of requests) of the share fetch request purgatory
socket.connection.setup.timeout.max.ms
  The maximum amount of time the client will wait for the socket connection to be established.
socket.connection.setup.timeout.ms
  The amount of time the client will wait for the socket connection to be established.
socket.receive.buffer.bytes
  The SO_RCVBUF buffer of the socket server sockets.
socket.send.buffer.bytes
  The SO_SNDBUF buffer of the socket server sockets.
transaction.partition.verification.enable
  Enable verification that checks that the partition has been added to the transaction before
  writing transactional records to the partition
transaction.state.log.load.buffer.size
  Batch size for reading from the transaction log segments when loading producer ids and
  transactions into the cache (soft-limit, overridden if records are too large).
transaction.state.log.min.isr
  The minimum number of replicas that must acknowledge a write to transaction topic in order to
  be considered successful.
transaction.state.log.replication.factor
  The replication factor for the transaction topic (set higher to ensure availability).
transaction.state.log.segment.bytes
  The transaction topic segment bytes should be kept relatively small in order to facilitate
  faster log compaction and cache loads
transaction.two.phase.commit.enable
  Allow participation in Two-Phase Commit (2PC) transactions with an external transaction
  coordinator
unclean.leader.election.enable
  Indicates whether to enable replicas not in the ISR set to be elected as leader as a last
  resort, even though doing so may result in data loss
unclean.leader.election.interval.ms
  The frequency with which the controller checks if it should perform an unclean leader election
  for leaderless partitions.
"""


def _parse(text: str) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith("  "):
            out[name].append(line.strip())
        elif line:
            name = line
            out[name] = []
    return {n: " ".join(words) for n, words in out.items()}


DOCS: Mapping[str, str] = _parse(_TEXT)
