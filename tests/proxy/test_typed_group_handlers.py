"""Typed group, offset, topic and config handlers: OffsetFetch v1-7's single group goes through
the handler's conversions (it takes requests as sent, for v10's topic ids), and every error
reply that echoes the request's items (Kafka's ``getErrorResponse``) reaches each version's
client with those items and the error."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.offset_fetch.v8 import response as of8
from kio.schema.offset_fetch.v9 import response as of9
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i64

import proxy.handlers  # noqa: F401  (fills the registry)
from proxy.handlers.offset_fetch import downgrade_answer, upgrade_request
from proxy.registry import entry as handler_for
from wire.values import NO_THROTTLE
from wire.versions import convert

OFFSET_FETCH, OFFSET_COMMIT, TXN_OFFSET_COMMIT = 9, 8, 28
CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44


def _answer_group(code: ErrorCode, offsets: dict[tuple[str, int], int]) -> of8.OffsetFetchResponse:
    by_topic: dict[str, list[of8.OffsetFetchResponsePartitions]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            of8.OffsetFetchResponsePartitions(
                partition_index=i32(partition),
                committed_offset=i64(offset),
                committed_leader_epoch=i32(3),
                metadata="m",
                error_code=ErrorCode.none,
            )
        )
    group = of8.OffsetFetchResponseGroup(
        group_id=GroupId("g"),
        topics=tuple(
            of8.OffsetFetchResponseTopics(name=TopicName(t), partitions=tuple(ps))
            for t, ps in by_topic.items()
        ),
        error_code=code,
    )
    return of8.OffsetFetchResponse(throttle_time=NO_THROTTLE, groups=(group,))


def _down(resp: of8.OffsetFetchResponse, old: Any, version: int) -> Any:
    return downgrade_answer(convert(resp, of9.OffsetFetchResponse), old, version)


def _old_offset_fetch(version: int, topics: dict[str, list[int]] | None) -> Any:
    module = __import__(f"kio.schema.offset_fetch.v{version}.request", fromlist=["_"])
    wanted = (
        None
        if topics is None
        else tuple(
            module.OffsetFetchRequestTopic(
                name=TopicName(t), partition_indexes=tuple(i32(p) for p in ps)
            )
            for t, ps in topics.items()
        )
    )
    return module.OffsetFetchRequest(group_id=GroupId("g"), topics=wanted)


@pytest.mark.parametrize("version", [1, 2, 5, 7])
def test_offset_fetch_v1_to_v7_ask_for_one_group_and_get_it_at_the_top_level(
    version: int,
) -> None:
    old = _old_offset_fetch(version, {"t": [0, 1]})
    req = upgrade_request(old, version)
    (group,) = req.groups
    assert group.group_id == "g"
    assert [(t.name, list(t.partition_indexes)) for t in group.topics or ()] == [("t", [0, 1])]
    resp = _down(_answer_group(ErrorCode.none, {("t", 0): 5, ("t", 1): 7}), old, version)
    assert [
        (t.name, p.partition_index, p.committed_offset, p.metadata, p.error_code)
        for t in resp.topics
        for p in t.partitions
    ] == [("t", 0, 5, "m", ErrorCode.none), ("t", 1, 7, "m", ErrorCode.none)]
    if version >= 2:
        assert resp.error_code is ErrorCode.none
    if version >= 5:
        assert [p.committed_leader_epoch for t in resp.topics for p in t.partitions] == [3, 3]


def test_offset_fetch_v2_asks_for_every_partition_with_null_topics() -> None:
    old = _old_offset_fetch(2, None)
    (group,) = upgrade_request(old, 2).groups
    assert group.topics is None


def test_offset_fetch_v1_answers_a_group_error_on_every_partition_asked_for() -> None:
    """v1 has no group-level error code (Kafka's OffsetFetchResponse v0-1)."""
    old = _old_offset_fetch(1, {"t": [0, 1], "u": [2]})
    resp = _down(_answer_group(ErrorCode.coordinator_load_in_progress, {}), old, 1)
    assert [
        (t.name, p.partition_index, p.committed_offset, p.error_code)
        for t in resp.topics
        for p in t.partitions
    ] == [
        ("t", 0, -1, ErrorCode.coordinator_load_in_progress),
        ("t", 1, -1, ErrorCode.coordinator_load_in_progress),
        ("u", 2, -1, ErrorCode.coordinator_load_in_progress),
    ]


@pytest.mark.parametrize("version", [2, 7])
def test_offset_fetch_error_reply_carries_the_group_error_at_the_top_level(version: int) -> None:
    entry = handler_for(OFFSET_FETCH)
    old = _old_offset_fetch(version, {"t": [0]})
    reply = entry.error_reply(entry.read(old), ErrorCode.not_coordinator)
    resp = entry.write(reply, old, version)
    assert resp.error_code is ErrorCode.not_coordinator
    assert resp.topics == ()


def test_offset_fetch_v8_error_reply_answers_every_group() -> None:
    from kio.schema.offset_fetch.v8 import request as rq8

    entry = handler_for(OFFSET_FETCH)
    req = rq8.OffsetFetchRequest(
        groups=(
            rq8.OffsetFetchRequestGroup(group_id=GroupId("a"), topics=None),
            rq8.OffsetFetchRequestGroup(group_id=GroupId("b"), topics=None),
        ),
        require_stable=False,
    )
    resp = entry.write(entry.error_reply(req, ErrorCode.not_coordinator), req, 8)
    assert [(g.group_id, g.error_code) for g in resp.groups] == [
        ("a", ErrorCode.not_coordinator),
        ("b", ErrorCode.not_coordinator),
    ]


def _commit_topics(module: Any, prefix: str) -> tuple[Any, ...]:
    partition = getattr(module, f"{prefix}RequestPartition")
    topic = getattr(module, f"{prefix}RequestTopic")
    return tuple(
        topic(
            name=TopicName(name),
            partitions=tuple(
                partition(partition_index=i32(p), committed_offset=i64(9), committed_metadata="")
                for p in parts
            ),
        )
        for name, parts in (("t", [0, 2]), ("u", [1]))
    )


def _per_partition(resp: Any) -> list[tuple[str, int, ErrorCode]]:
    return [(t.name, p.partition_index, p.error_code) for t in resp.topics for p in t.partitions]


@pytest.mark.parametrize("version", [2, 9])
def test_offset_commit_error_reply_answers_every_partition(version: int) -> None:
    module = __import__(f"kio.schema.offset_commit.v{version}.request", fromlist=["_"])
    extra = {"retention_time": i64(-1)} if version < 5 else {}
    old = module.OffsetCommitRequest(
        group_id=GroupId("g"),
        generation_id_or_member_epoch=i32(-1),
        member_id="",
        topics=_commit_topics(module, "OffsetCommit"),
        **extra,
    )
    entry = handler_for(OFFSET_COMMIT)
    resp = entry.write(entry.error_reply(entry.read(old), ErrorCode.not_coordinator), old, version)
    assert _per_partition(resp) == [
        ("t", 0, ErrorCode.not_coordinator),
        ("t", 2, ErrorCode.not_coordinator),
        ("u", 1, ErrorCode.not_coordinator),
    ]


@pytest.mark.parametrize("version", [0, 4])
def test_txn_offset_commit_error_reply_answers_every_partition(version: int) -> None:
    module = __import__(f"kio.schema.txn_offset_commit.v{version}.request", fromlist=["_"])
    old = module.TxnOffsetCommitRequest(
        transactional_id="tx",
        group_id=GroupId("g"),
        producer_id=i64(1),
        producer_epoch=0,
        topics=_commit_topics(module, "TxnOffsetCommit"),
    )
    entry = handler_for(TXN_OFFSET_COMMIT)
    reply = entry.error_reply(entry.read(old), ErrorCode.coordinator_not_available)
    assert _per_partition(entry.write(reply, old, version)) == [
        ("t", 0, ErrorCode.coordinator_not_available),
        ("t", 2, ErrorCode.coordinator_not_available),
        ("u", 1, ErrorCode.coordinator_not_available),
    ]


def _reply(api_key: int, version: int, old: Any, code: ErrorCode) -> Any:
    entry = handler_for(api_key)
    return entry.write(entry.error_reply(entry.read(old), code), old, version)


@pytest.mark.parametrize("version", [2, 5])
def test_create_topics_error_reply_answers_every_topic(version: int) -> None:
    module = __import__(f"kio.schema.create_topics.v{version}.request", fromlist=["_"])
    topics = tuple(
        module.CreatableTopic(
            name=TopicName(n),
            num_partitions=i32(1),
            replication_factor=1,
            assignments=(),
            configs=(),
        )
        for n in ("a", "b")
    )
    old = module.CreateTopicsRequest(topics=topics, timeout=NO_THROTTLE, validate_only=False)
    resp = _reply(CREATE_TOPICS, version, old, ErrorCode.not_controller)
    assert [(t.name, t.error_code) for t in resp.topics] == [
        ("a", ErrorCode.not_controller),
        ("b", ErrorCode.not_controller),
    ]
    if version >= 5:
        assert [(t.num_partitions, t.replication_factor) for t in resp.topics] == [(-1, -1)] * 2


@pytest.mark.parametrize("version", [1, 5])
def test_delete_topics_error_reply_answers_every_topic(version: int) -> None:
    module = __import__(f"kio.schema.delete_topics.v{version}.request", fromlist=["_"])
    old = module.DeleteTopicsRequest(
        topic_names=(TopicName("a"), TopicName("b")), timeout=NO_THROTTLE
    )
    resp = _reply(DELETE_TOPICS, version, old, ErrorCode.not_controller)
    assert [(t.name, t.error_code) for t in resp.responses] == [
        ("a", ErrorCode.not_controller),
        ("b", ErrorCode.not_controller),
    ]


@pytest.mark.parametrize("version", [0, 3])
def test_create_partitions_error_reply_answers_every_topic(version: int) -> None:
    module = __import__(f"kio.schema.create_partitions.v{version}.request", fromlist=["_"])
    old = module.CreatePartitionsRequest(
        topics=(module.CreatePartitionsTopic(name=TopicName("a"), count=i32(3), assignments=None),),
        timeout=NO_THROTTLE,
        validate_only=False,
    )
    resp = _reply(CREATE_PARTITIONS, version, old, ErrorCode.not_controller)
    assert [(t.name, t.error_code, t.error_message) for t in resp.results] == [
        ("a", ErrorCode.not_controller, None)
    ]


@pytest.mark.parametrize("version", [1, 4])
def test_describe_configs_error_reply_answers_every_resource(version: int) -> None:
    module = __import__(f"kio.schema.describe_configs.v{version}.request", fromlist=["_"])
    extra = {"include_documentation": False} if version >= 3 else {}
    old = module.DescribeConfigsRequest(
        resources=(
            module.DescribeConfigsResource(
                resource_type=i8(2), resource_name="t", configuration_keys=None
            ),
            module.DescribeConfigsResource(
                resource_type=i8(4), resource_name="1", configuration_keys=None
            ),
        ),
        include_synonyms=False,
        **extra,
    )
    resp = _reply(DESCRIBE_CONFIGS, version, old, ErrorCode.kafka_storage_error)
    assert [(r.resource_type, r.resource_name, r.error_code, r.configs) for r in resp.results] == [
        (2, "t", ErrorCode.kafka_storage_error, ()),
        (4, "1", ErrorCode.kafka_storage_error, ()),
    ]


@pytest.mark.parametrize(
    ("api_key", "version"),
    [
        (ALTER_CONFIGS, 0),
        (ALTER_CONFIGS, 2),
        (INCREMENTAL_ALTER_CONFIGS, 0),
        (INCREMENTAL_ALTER_CONFIGS, 1),
    ],
)
def test_alter_configs_error_replies_answer_every_resource(api_key: int, version: int) -> None:
    name = "alter_configs" if api_key == ALTER_CONFIGS else "incremental_alter_configs"
    module = __import__(f"kio.schema.{name}.v{version}.request", fromlist=["_"])
    request_cls = getattr(
        module,
        "AlterConfigsRequest" if api_key == ALTER_CONFIGS else "IncrementalAlterConfigsRequest",
    )
    old = request_cls(
        resources=tuple(
            module.AlterConfigsResource(resource_type=i8(2), resource_name=n, configs=())
            for n in ("a", "b")
        ),
        validate_only=False,
    )
    resp = _reply(api_key, version, old, ErrorCode.unknown_server_error)
    assert [
        (r.resource_type, r.resource_name, r.error_code, r.error_message) for r in resp.responses
    ] == [
        (2, "a", ErrorCode.unknown_server_error, None),
        (2, "b", ErrorCode.unknown_server_error, None),
    ]


def test_v10_error_replies_name_topics_by_id() -> None:
    """OffsetCommit and OffsetFetch v10 are taken as sent: their error replies echo topic ids
    (OffsetCommit) and every group (OffsetFetch) in v10's classes."""
    import uuid

    from kio.schema.offset_commit.v10 import request as oc10
    from kio.schema.offset_fetch.v10 import request as of10

    tid = uuid.UUID(int=5)
    commit = oc10.OffsetCommitRequest(
        group_id=GroupId("g"),
        member_id="",
        topics=(
            oc10.OffsetCommitRequestTopic(
                topic_id=tid,
                partitions=(
                    oc10.OffsetCommitRequestPartition(
                        partition_index=i32(3), committed_offset=i64(1), committed_metadata=None
                    ),
                ),
            ),
        ),
    )
    entry = handler_for(OFFSET_COMMIT)
    resp = entry.write(entry.error_reply(entry.read(commit), ErrorCode.not_coordinator), commit, 10)
    assert [
        (t.topic_id, p.partition_index, p.error_code) for t in resp.topics for p in t.partitions
    ] == [(tid, 3, ErrorCode.not_coordinator)]
    fetch = of10.OffsetFetchRequest(
        groups=(of10.OffsetFetchRequestGroup(group_id=GroupId("a"), topics=None),)
    )
    entry = handler_for(OFFSET_FETCH)
    resp = entry.write(entry.error_reply(entry.read(fetch), ErrorCode.not_coordinator), fetch, 10)
    assert [(g.group_id, g.error_code, g.topics) for g in resp.groups] == [
        ("a", ErrorCode.not_coordinator, ())
    ]
