"""CreateTopics (key 19), v2-5. v2: error messages. v3-4: nothing new for the broker
(v4: num_partitions/replication_factor -1 take the broker defaults). v5: flexible; the
response carries the created topic's partition count, replication factor and configs.

Per topic, in the order of Kafka's ``ReplicationControlManager.createTopics``: duplicate
names in one request -> INVALID_REQUEST; legal name; exists -> TOPIC_ALREADY_EXISTS; config
overrides known and valid -> else INVALID_CONFIG; then the layout: manual assignments must
name only this node, else the replication factor (only 1 replica exists: a higher factor is
INVALID_REPLICATION_FACTOR), then the partition count. ``validate_only`` checks all of it and
creates nothing. The checks and the creation are one atomic step per name
(``TopicManager.create``): of concurrent creators of a name, one wins and the rest get
TOPIC_ALREADY_EXISTS.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from proxy.context import RequestContext
from proxy.registry import handler
from storage.topic_config import effective_configs
from storage.topics import TopicError

DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG = 5, 1


@handler(api_key=19, versions=(2, 5))
async def create_topics(ctx: RequestContext, req: Any) -> Any:
    b, broker = ctx.b, ctx.broker
    values = broker.config.values or {}
    counts = Counter(t.name for t in req.topics)
    results = []
    for t in req.topics:
        err: TopicError | None = None
        partitions = t.num_partitions
        replication = t.replication_factor
        configs = {c.name: c.value for c in t.configs}
        if counts[t.name] > 1:
            err = TopicError(
                ErrorCode.invalid_request,
                f"Create topics request from client contains multiple entries "
                f"for the topic {t.name}",
            )
        layout: TopicError | None = None
        if err is None and t.assignments:
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
        if err is None:
            if partitions == -1:
                partitions = values["num.partitions"]
            if replication == -1:
                replication = values["default.replication.factor"]
            if req.validate_only:
                err = broker.topics.check_create(t.name, partitions, replication, configs, layout)
            else:
                made = await broker.topics.create(t.name, partitions, configs, replication, layout)
                err = made if isinstance(made, TopicError) else None
        if err is not None:
            results.append(
                b.CreatableTopicResult(
                    name=t.name,
                    error_code=err.code,
                    error_message=err.message,
                    topic_config_error_code=0,
                    num_partitions=-1,
                    replication_factor=-1,
                    configs=(),
                )
            )
            continue
        described = (
            ()
            if ctx.version < 5
            else tuple(
                b.CreatableTopicConfigs(
                    name=name,
                    value=value,
                    read_only=False,
                    config_source=DYNAMIC_TOPIC_CONFIG if override else DEFAULT_CONFIG,
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
            b.CreatableTopicResult(
                name=t.name,
                error_code=ErrorCode.none,
                error_message=None,
                topic_config_error_code=0,
                num_partitions=partitions,
                replication_factor=replication,
                configs=described,
            )
        )
    return b.CreateTopicsResponse(throttle_time=0, topics=tuple(results))
