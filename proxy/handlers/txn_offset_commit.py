"""TxnOffsetCommit (key 28), v0-5: a transactional producer commits consumer offsets as part
of its transaction; sent to the *group* coordinator (spec §4.9, KIP-447). v1: nothing new.
v2: committed leader epoch per partition; COORDINATOR_LOAD_IN_PROGRESS (older versions get
COORDINATOR_NOT_AVAILABLE, wire/errors.py). v3: flexible; generation id, member id and group
instance id (KIP-447 zombie fencing). v4: TRANSACTION_ABORTABLE (older versions get
INVALID_TXN_STATE). v5 (TV2, KIP-890 part 2): no AddOffsetsToTxn came first; the group's
``__consumer_offsets`` partition is added to the transaction through the coordinator
(``proxy/txn_implicit_add.add_offsets_for_commit``) before the verification below, once the
group id is known to be valid; the add's error answers every partition (as a verification
error is mapped).

Authorization first (Kafka's ``handleTxnOffsetCommitRequest``): WRITE on the transactional id,
else every partition is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED; READ on the group,
else GROUP_AUTHORIZATION_FAILED; READ on each topic, else its partitions get
TOPIC_AUTHORIZATION_FAILED. Then the checks, in Kafka 4.x's order
(coordinator/group/offsets_api.py ``txn_commit_offsets``): no
transaction coordinator (``Broker.txn_verifier`` is None) -> COORDINATOR_NOT_AVAILABLE; empty
group id -> INVALID_GROUP_ID; unknown topic or partition -> UNKNOWN_TOPIC_OR_PARTITION. Then the
transaction (KIP-890 verification of the group's ``__consumer_offsets`` partition, before any
group check): not in the transaction -> TRANSACTION_ABORTABLE (INVALID_TXN_STATE below v4), a
fenced producer -> INVALID_PRODUCER_EPOCH, CONCURRENT_TRANSACTIONS / COORDINATOR_LOAD_IN_PROGRESS
/ NOT_COORDINATOR as the transaction coordinator answered. Then KIP-447 group metadata: a
missing group with generation >= 0 -> ILLEGAL_GENERATION, otherwise with any group metadata set
the member must be known (UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID) and of the group's generation
(ILLEGAL_GENERATION); no REBALANCE_IN_PROGRESS. Metadata over 4096 bytes ->
OFFSET_METADATA_TOO_LARGE. The offsets are appended to the group's ``__consumer_offsets``
partition as one transactional batch of the producer and held as pending until the
transaction's marker lands (spec §5.5); a missing group becomes an empty "simple" group only
then, so a refused commit creates nothing.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.txn_offset_commit.v5.request import TxnOffsetCommitRequest
from kio.schema.txn_offset_commit.v5.response import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

from coordinator.group.offsets_api import TXN_VERIFY_ERRORS
from coordinator.txn.feature import client_transaction_version
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.handlers.offset_commit import (
    Codes,
    authorize_commit,
    commit_codes,
    every_partition,
    parse_commits,
)
from proxy.outcomes import ErrorReply
from proxy.registry import handler
from proxy.txn_implicit_add import add_offsets_for_commit
from storage.api import TopicPartition
from wire.values import NO_THROTTLE


def _response(codes: Codes) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            TxnOffsetCommitResponseTopic(
                name=name,
                partitions=tuple(
                    TxnOffsetCommitResponsePartition(partition_index=i, error_code=c)
                    for i, c in parts
                ),
            )
            for name, parts in codes
        ),
    )


def _error_reply(req: TxnOffsetCommitRequest, code: ErrorCode) -> TxnOffsetCommitResponse:
    return _response(every_partition(req.topics, code))


@handler(
    api_key=28,
    versions=(0, 5),
    request=TxnOffsetCommitRequest,
    response=TxnOffsetCommitResponse,
    error_reply=_error_reply,
)
async def txn_offset_commit(
    ctx: RequestContext, req: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse:
    broker = ctx.broker
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        raise ErrorReply(ErrorCode.transactional_id_authorization_failed)
    readable = authorize_commit(ctx, req.group_id, req.topics)
    codes, commits = parse_commits(broker, req.topics, readable)
    result: ErrorCode | dict[TopicPartition, ErrorCode] | None = None
    tv2 = client_transaction_version(28, ctx.version) == 2
    if commits and tv2 and req.group_id and broker.txn_verifier is not None:
        added = await add_offsets_for_commit(
            broker.txns,
            broker.topics,
            broker.config.get("offsets.topic.num.partitions"),
            req.transactional_id,
            req.producer_id,
            req.producer_epoch,
            req.group_id,
        )
        if added is not ErrorCode.none:
            result = TXN_VERIFY_ERRORS.get(added, added)
    if commits and result is None:
        result = await broker.groups.txn_commit_offsets(
            req.transactional_id,
            req.group_id,
            req.producer_id,
            req.producer_epoch,
            req.member_id,
            req.group_instance_id,
            req.generation_id,
            commits,
            broker.txn_verifier,
        )
    return _response(commit_codes(req.topics, codes, commits, result))
