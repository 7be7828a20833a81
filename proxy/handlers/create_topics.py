"""CreateTopics (key 19), v2-7. v2: error messages. v3-4: nothing new for the broker
(v4: num_partitions/replication_factor -1 take the broker defaults). v5: flexible; the
response carries the created topic's partition count, replication factor and configs. v6:
may answer THROTTLING_QUOTA_EXCEEDED (no controller mutation quota here). v7: the created
topic's id (a validate-only request gets a fresh random id, as Kafka's controller answers it;
a refused topic the zero id).

A name given more than once is answered once, INVALID_REQUEST "Duplicate topic name.", and
not created; ``__cluster_metadata`` is INVALID_REQUEST "Creation of internal topic
__cluster_metadata is prohibited." (Kafka's ``ControllerApis.createTopics``, which answers
both, and the authorization failures, after the topics it passes to the controller, in that
order). Per other topic, in the order of Kafka's ``ReplicationControlManager.createTopics``:
legal name; exists -> TOPIC_ALREADY_EXISTS; config
overrides known and valid -> else INVALID_CONFIG; then the layout: manual assignments must
name only this node, else the replication factor (only 1 replica exists: a higher factor is
INVALID_REPLICATION_FACTOR), then the partition count. ``validate_only`` checks all of it and
creates nothing. The checks and the creation are one atomic step per name
(``TopicManager.create``): of concurrent creators of a name, one wins and the rest get
TOPIC_ALREADY_EXISTS.

Authorization (Kafka's ``ControllerApis.createTopics``): a topic named once needs CREATE on the
cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED "Authorization failed."; a created
topic whose configs the principal may not DESCRIBE_CONFIGS is answered without configs,
partition count and replication factor, with ``topic_config_error_code``
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import replace

from kio.schema.create_topics.v7.request import CreateTopicsRequest
from kio.schema.create_topics.v7.response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsResponse,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i8, i16, i32

from proxy.acl.checks import allowed_names, cluster_allows
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.quotas.enforce import MutationQuota
from proxy.registry import handler
from storage.api import CLUSTER_METADATA
from storage.topic_config import effective_configs
from storage.topics import TopicError
from wire.values import NO_THROTTLE, ZERO_UUID

DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG = 5, 1


def _failed(name: TopicName, code: ErrorCode, message: str | None) -> CreatableTopicResult:
    return CreatableTopicResult(
        name=name,
        topic_id=ZERO_UUID,
        error_code=code,
        error_message=message,
        topic_config_error_code=i16(0),
        num_partitions=i32(-1),
        replication_factor=i16(-1),
        configs=(),
    )


def _error_reply(req: CreateTopicsRequest, code: ErrorCode) -> CreateTopicsResponse:
    return CreateTopicsResponse(
        throttle_time=NO_THROTTLE, topics=tuple(_failed(t.name, code, None) for t in req.topics)
    )


@handler(
    api_key=19,
    versions=(2, 7),
    request=CreateTopicsRequest,
    response=CreateTopicsResponse,
    error_reply=_error_reply,
)
async def create_topics(ctx: RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse:
    broker = ctx.broker
    values = broker.config.values or {}
    counts = Counter(t.name for t in req.topics)
    allowed = [name for name, n in counts.items() if n == 1 and name != CLUSTER_METADATA]
    creatable = (
        set(allowed)
        if cluster_allows(ctx, AclOperation.CREATE)
        else allowed_names(ctx, AclOperation.CREATE, ResourceType.TOPIC, allowed)
    )
    describable = allowed_names(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, allowed)
    mutation = MutationQuota(ctx, strict_since=6)  # controller_mutation_rate (proxy/quotas/)
    results = []
    refused = [  # answered after the others, as Kafka's ControllerApis does
        _failed(name, ErrorCode.invalid_request, "Duplicate topic name.")
        for name, n in counts.items()
        if n > 1
    ]
    for t in req.topics:
        if counts[t.name] > 1:
            continue
        if t.name == CLUSTER_METADATA:
            message = f"Creation of internal topic {CLUSTER_METADATA} is prohibited."
            refused.append(_failed(t.name, ErrorCode.invalid_request, message))
            continue
        if t.name not in creatable:
            code = ErrorCode.topic_authorization_failed
            refused.append(_failed(t.name, code, "Authorization failed."))
            continue
        err: TopicError | None = None
        topic_id = uuid.uuid4()  # validate_only: Kafka's controller answers a fresh random id
        partitions, replication = int(t.num_partitions), int(t.replication_factor)
        configs = {c.name: c.value for c in t.configs}
        layout: TopicError | None = None
        if t.assignments:
            if partitions != -1 or replication != -1:
                layout = TopicError(
                    ErrorCode.invalid_request,
                    "Both numPartitions or replicationFactor and replicasAssignments "
                    "were set. Both cannot be used at the same time.",
                )
            elif any(list(a.broker_ids) != [broker.node_id] for a in t.assignments) or sorted(
                a.partition_index for a in t.assignments
            ) != list(range(len(t.assignments))):
                layout = TopicError(
                    ErrorCode.invalid_replica_assignment,
                    f"Every partition must be assigned to broker {broker.node_id} "
                    "only, with partition ids 0..n-1",
                )
            else:
                partitions, replication = len(t.assignments), 1
        if partitions == -1:
            partitions = values["num.partitions"]
        if replication == -1:
            replication = values["default.replication.factor"]
        if req.validate_only or mutation.enabled:
            err = broker.topics.check_create(t.name, partitions, replication, configs, layout)
            if err is None and (throttled := mutation.charge(partitions)) is not None:
                err = TopicError(*throttled)  # KIP-599, charged even if validate_only
        if err is None and not req.validate_only:
            made = await broker.topics.create(t.name, partitions, configs, replication, layout)
            if isinstance(made, TopicError):
                err = made
            else:
                topic_id = made.topic_id
        if err is not None:
            results.append(_failed(t.name, err.code, err.message))
            continue
        if t.name not in describable:  # created, but its configs are not shown
            results.append(
                replace(
                    _failed(t.name, ErrorCode.none, None),
                    topic_id=topic_id,
                    topic_config_error_code=i16(ErrorCode.topic_authorization_failed.value),
                )
            )
            continue
        described = (
            ()
            if ctx.version < 5
            else tuple(
                CreatableTopicConfigs(
                    name=name,
                    value=value,
                    read_only=False,
                    config_source=i8(DYNAMIC_TOPIC_CONFIG if override else DEFAULT_CONFIG),
                    is_sensitive=False,
                )
                for name, (value, override) in sorted(
                    effective_configs(
                        {k: v for k, v in configs.items() if v is not None}, values
                    ).items()
                )
            )
        )
        results.append(
            CreatableTopicResult(
                name=t.name,
                topic_id=topic_id,
                error_code=ErrorCode.none,
                error_message=None,
                topic_config_error_code=i16(0),
                num_partitions=i32(partitions),
                replication_factor=i16(replication),
                configs=described,
            )
        )
    return CreateTopicsResponse(throttle_time=mutation.throttle_time(), topics=(*results, *refused))
