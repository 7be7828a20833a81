"""Metadata (key 3), v0-13. v1: null topics = all, controller id, is_internal. v2: cluster
id. v4: allow_auto_topic_creation. v5: offline replicas. v7: leader epoch. v8: authorized
operations. v9: flexible. v10: topic ids. v11: cluster authorized operations removed. v12:
topics requested by id (name null). v13: a top-level error code (KIP-1102, for a broker that
asks clients to rebootstrap: REBOOTSTRAP_REQUIRED, which a single node never needs): NONE in
answers, the error in an error reply (next to each topic's; clients act on the top-level
code only for REBOOTSTRAP_REQUIRED).

kafkad is one node: it leads every partition at leader epoch 0, with itself as the only
replica. Auto-creation (``auto.create.topics.enable`` and, from v4, the request's
allow_auto_topic_creation; never for a request for all topics): Kafka 4.x (KRaft) sends a
CreateTopics to the controller and answers UNKNOWN_TOPIC_OR_PARTITION for the topic at once
(``AutoTopicCreationManager``), so the client retries until the topic's metadata arrives
(LEADER_NOT_AVAILABLE was ZooKeeper mode's answer). kafkad creates the topic before it
answers (``TopicManager.auto_create``, atomic per name) and returns its metadata in the
same response: the answer Kafka gives on the retry. ``__consumer_offsets`` and
``__transaction_state`` are created with their coordinators' partition counts and configs;
``__cluster_metadata`` never is (Kafka's controller refuses it): UNKNOWN_TOPIC_OR_PARTITION.

v12+ by topic id (Kafka's ``handleTopicMetadataRequest``): once any entry carries a topic id,
the ids alone are looked up, each once, and every name in the request is ignored (an unknown
id is UNKNOWN_TOPIC_ID). Asked by name, each name is answered once however often it is given
(Kafka looks the names up as a set).

Authorization (Kafka's ``handleTopicMetadataRequest``): a topic the principal may not
DESCRIBE is left out of an all-topics answer; named, it is answered TOPIC_AUTHORIZATION_FAILED
with no id (whether it exists is not revealed); asked for by id, TOPIC_AUTHORIZATION_FAILED with
its id and no name (ids are not secret). Auto-creating a topic needs CREATE on the cluster or
on the topic, else TOPIC_AUTHORIZATION_FAILED. Authorized operations (v8+, when asked for):
per topic looked up (an unknown or invalid one too, not a refused one or an unknown id), and
(v8-10) the cluster's if the principal may DESCRIBE it, else 0; every operation without an
authorizer.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v13.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v13.response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32

from proxy.acl.checks import CLUSTER_OPERATIONS, allowed_names, authorized_operations
from proxy.acl.checks import TOPIC_OPERATIONS as TOPIC_OPERATIONS
from proxy.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from storage.api import CLUSTER_METADATA, KAFKA_INTERNAL_TOPICS
from storage.partition import LEADER_EPOCH
from storage.topics import Topic, TopicError, topic_name_error
from wire.values import AUTHORIZED_OPERATIONS_OMITTED, NO_THROTTLE, ZERO_UUID

log = logging.getLogger("kafkad.metadata")

# The cluster's authorized operations a v8-10 answer carries if its request asked for them:
# the handler sets it (it has the principal), the downgrade hook reads it (it has the request).
_cluster_operations_answer: ContextVar[int] = ContextVar(
    "metadata_cluster_operations", default=CLUSTER_OPERATIONS
)


def _cluster_operations(_resp: MetadataResponse, old: Any, version: int) -> Mapping[str, Any]:
    """v8-10 may ask for the cluster's authorized operations (v11 moved that to
    DescribeCluster): every operation the principal may do on the cluster if it may DESCRIBE
    it, else 0. Not in the error reply (the only answer without this node in ``brokers``):
    Kafka's getErrorResponse leaves the field at its default, "omitted"."""
    if not 8 <= version <= 10:
        return {}
    wanted = old.include_cluster_authorized_operations and bool(_resp.brokers)
    return {
        "cluster_authorized_operations": i32(
            _cluster_operations_answer.get() if wanted else AUTHORIZED_OPERATIONS_OMITTED
        )
    }


def _failed(
    name: TopicName | None,
    code: ErrorCode,
    topic_id: uuid.UUID = ZERO_UUID,
    is_internal: bool = False,
    operations: int = AUTHORIZED_OPERATIONS_OMITTED,
) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=code,
        name=name,
        topic_id=topic_id,
        is_internal=is_internal,
        partitions=(),
        topic_authorized_operations=i32(operations),
    )


def _error_reply(req: MetadataRequest, code: ErrorCode) -> MetadataResponse:
    """Every topic asked for, carrying ``code``; a topic asked for by id gets name "" (Kafka's
    ``MetadataRequest.getErrorResponse``, unlike the handler's null for an unknown id)."""
    return MetadataResponse(
        throttle_time=NO_THROTTLE,
        brokers=(),
        error_code=code,
        topics=tuple(
            _failed(t.name or TopicName(""), code, t.topic_id or ZERO_UUID)
            for t in req.topics or ()
        ),
    )


@handler(
    api_key=3,
    versions=(0, 13),
    request=MetadataRequest,
    response=MetadataResponse,
    error_reply=_error_reply,
    downgrade=_cluster_operations,
)
async def metadata(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    topics = broker.topics
    want_ops = req.include_topic_authorized_operations
    auto_create = broker.config.get("auto.create.topics.enable") and (
        ctx.version < 4 or req.allow_auto_topic_creation
    )
    node = BrokerId(broker.node_id)

    def operations(name: str) -> i32:
        """Kafka sets the topic operations on every topic its metadata lookup answers (an
        unknown or invalid one too), not on the refused ones nor unknown ids."""
        if not want_ops:
            return i32(AUTHORIZED_OPERATIONS_OMITTED)
        return authorized_operations(ctx, ResourceType.TOPIC, name)

    def describe(t: Topic) -> MetadataResponseTopic:
        parts = tuple(
            MetadataResponsePartition(
                error_code=ErrorCode.none,
                partition_index=i32(p.tp.partition),
                leader_id=node,
                leader_epoch=i32(LEADER_EPOCH),
                replica_nodes=(node,),
                isr_nodes=(node,),
                offline_replicas=(),
            )
            for p in t.partitions
        )
        return MetadataResponseTopic(
            error_code=ErrorCode.none,
            name=TopicName(t.name),
            topic_id=t.topic_id,
            is_internal=t.internal,
            partitions=parts,
            topic_authorized_operations=operations(t.name),
        )

    requested = req.topics
    if ctx.version < 12 and any(
        e.name is None or (e.topic_id or ZERO_UUID) != ZERO_UUID for e in requested or ()
    ):
        # v10-11 carry topic ids but may not ask by them (Kafka: InvalidRequestException for
        # the whole request, answered by getErrorResponse)
        return _error_reply(req, ErrorCode.invalid_request)
    if 8 <= ctx.version <= 10:
        _cluster_operations_answer.set(
            authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
            if ctx.authorized(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
            else 0
        )
    describable: set[str]
    out: list[MetadataResponseTopic]
    if requested is None or (ctx.version == 0 and not requested):
        # every topic: those the principal may not DESCRIBE are left out, unmentioned
        describable = allowed_names(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, [t.name for t in topics]
        )
        out = [describe(t) for t in topics if t.name in describable]
    else:
        if any((e.topic_id or ZERO_UUID) != ZERO_UUID for e in requested):
            # Kafka: once any entry has a topic id, the ids alone are looked up, each once;
            # names (an id's entry's too) are ignored, so nothing is auto-created
            ids = dict.fromkeys(
                e.topic_id for e in requested if e.topic_id not in (None, ZERO_UUID)
            )
            requested = tuple(MetadataRequestTopic(topic_id=i, name=None) for i in ids)
        else:
            # Kafka looks the names up as a set: a name given twice is answered once
            requested = tuple({e.name: e for e in requested}.values())
        out = []
        asked: list[str] = []
        for e in requested:
            if e.name is not None:
                asked.append(e.name)
            elif e.topic_id is not None and (by_id := topics.by_id(e.topic_id)) is not None:
                asked.append(by_id.name)
        describable = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, asked)
        cluster_create: bool | None = None

        def may_create(name: str) -> bool:
            """Auto-creation needs CREATE on the cluster or on the topic."""
            nonlocal cluster_create
            if cluster_create is None:
                cluster_create = ctx.authorized(
                    AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME
                )
            return cluster_create or ctx.authorized(AclOperation.CREATE, ResourceType.TOPIC, name)

        for entry in requested:
            name = entry.name
            topic_id = entry.topic_id
            if name is None:
                if topic_id is None or topic_id == ZERO_UUID:
                    out.append(_failed(None, ErrorCode.invalid_request))
                    continue
                found = topics.by_id(topic_id)
                if found is None:
                    out.append(_failed(None, ErrorCode.unknown_topic_id, topic_id))
                elif found.name not in describable:
                    # topic ids are not secret: refused with its id, without its name
                    out.append(_failed(None, ErrorCode.topic_authorization_failed, topic_id))
                else:
                    out.append(describe(found))
                continue
            if name not in describable:
                # whether it exists is not revealed
                out.append(_failed(name, ErrorCode.topic_authorization_failed))
            elif (t := topics.get(name)) is not None:
                out.append(describe(t))
            elif auto_create and not may_create(name):
                out.append(
                    _failed(
                        name,
                        ErrorCode.topic_authorization_failed,
                        is_internal=name in KAFKA_INTERNAL_TOPICS,
                    )
                )
            elif topic_name_error(name) is not None:
                code = ErrorCode.invalid_topic_exception
                out.append(_failed(name, code, operations=operations(name)))
            elif auto_create and name != CLUSTER_METADATA:  # Kafka's controller refuses it
                made = await topics.auto_create(name)
                if not isinstance(made, TopicError):
                    log.info(
                        "auto-created topic %s (%d partitions) for client %r at %s",
                        name,
                        made.meta.partitions,
                        ctx.header.client_id,
                        ctx.peer,
                    )
                out.append(
                    _failed(name, made.code, operations=operations(name))
                    if isinstance(made, TopicError)
                    else describe(made)
                )
            else:
                code = ErrorCode.unknown_topic_or_partition
                out.append(_failed(name, code, operations=operations(name)))
    host, port = ctx.advertised
    return MetadataResponse(
        throttle_time=NO_THROTTLE,
        brokers=(MetadataResponseBroker(node_id=node, host=host, port=i32(port), rack=None),),
        cluster_id=broker.cluster_id,
        controller_id=node,
        topics=tuple(out),
        error_code=ErrorCode.none,
    )
