"""Metadata (key 3), v0-12. v1: null topics = all, controller id, is_internal. v2: cluster
id. v4: allow_auto_topic_creation. v5: offline replicas. v7: leader epoch. v8: authorized
operations. v9: flexible. v10: topic ids. v11: cluster authorized operations removed. v12:
topics requested by id (name null).

kafkad is one node: it leads every partition at leader epoch 0, with itself as the only
replica. Auto-creation (``auto.create.topics.enable`` and, from v4, the request's
allow_auto_topic_creation; never for a request for all topics): Kafka 4.x (KRaft) sends a
CreateTopics to the controller and answers UNKNOWN_TOPIC_OR_PARTITION for the topic at once
(``AutoTopicCreationManager``), so the client retries until the topic's metadata arrives
(LEADER_NOT_AVAILABLE was ZooKeeper mode's answer). kafkad creates the topic before it
answers (``TopicManager.auto_create``, atomic per name) and returns its metadata in the
same response: the answer Kafka gives on the retry. ``__consumer_offsets`` and
``__transaction_state`` are created with their coordinators' partition counts and configs.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from proxy.context import RequestContext
from proxy.registry import handler
from storage.partition import LEADER_EPOCH
from storage.topics import Topic, TopicError, topic_name_error

log = logging.getLogger("kafkad.metadata")

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: no ACLs.
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPERATIONS = sum(1 << op for op in (4, 5, 7, 8, 9, 10, 11, 12))
ZERO_UUID = uuid.UUID(int=0)


@handler(api_key=3, versions=(0, 12))
async def metadata(ctx: RequestContext, req: Any) -> Any:
    b, broker = ctx.b, ctx.broker
    topics = broker.topics
    want_ops = bool(getattr(req, "include_topic_authorized_operations", False))
    auto_create = broker.config.get("auto.create.topics.enable") and (
        ctx.version < 4 or req.allow_auto_topic_creation
    )

    def describe(t: Topic) -> Any:
        node = broker.node_id
        parts = tuple(
            b.MetadataResponsePartition(
                error_code=ErrorCode.none,
                partition_index=p.tp.partition,
                leader_id=node,
                leader_epoch=LEADER_EPOCH,
                replica_nodes=(node,),
                isr_nodes=(node,),
                offline_replicas=(),
            )
            for p in t.partitions
        )
        return b.MetadataResponseTopic(
            error_code=ErrorCode.none,
            name=t.name,
            topic_id=t.topic_id,
            is_internal=t.internal,
            partitions=parts,
            topic_authorized_operations=TOPIC_OPERATIONS
            if want_ops
            else AUTHORIZED_OPERATIONS_OMITTED,
        )

    def failed(name: str | None, code: ErrorCode, topic_id: uuid.UUID = ZERO_UUID) -> Any:
        return b.MetadataResponseTopic(
            error_code=code,
            name=name,
            topic_id=topic_id,
            is_internal=False,
            partitions=(),
            topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )

    requested = req.topics
    if requested is None or (ctx.version == 0 and not requested):
        out = [describe(t) for t in topics]
    else:
        out = []
        for entry in requested:
            name = entry.name
            topic_id = getattr(entry, "topic_id", None)
            if name is None:
                if topic_id is None or topic_id == ZERO_UUID:
                    out.append(failed(None, ErrorCode.invalid_request))
                    continue
                found = topics.by_id(topic_id)
                out.append(
                    describe(found) if found else failed(None, ErrorCode.unknown_topic_id, topic_id)
                )
                continue
            if (t := topics.get(name)) is not None:
                out.append(describe(t))
            elif topic_name_error(name) is not None:
                out.append(failed(name, ErrorCode.invalid_topic_exception))
            elif auto_create:
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
                    failed(name, made.code) if isinstance(made, TopicError) else describe(made)
                )
            else:
                out.append(failed(name, ErrorCode.unknown_topic_or_partition))
    host, port = ctx.advertised
    brokers = (
        b.MetadataResponseBroker(
            node_id=broker.node_id,
            host=host,
            port=port,
            rack=None,
        ),
    )
    return b.MetadataResponse(
        throttle_time=0,
        brokers=brokers,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=tuple(out),
        cluster_authorized_operations=CLUSTER_OPERATIONS
        if getattr(req, "include_cluster_authorized_operations", False)
        else AUTHORIZED_OPERATIONS_OMITTED,
    )
