"""The versions Kafka 4.x added to APIs kafkad served at older ones: ListOffsets v8-11
(EARLIEST_LOCAL, LATEST_TIERED, a remote-lookup timeout, EARLIEST_PENDING_UPLOAD), CreateTopics
v6-7 (the topic id), DeleteTopics v6 (topics by name or id, Kafka's ControllerApis.deleteTopics
rules)."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from kio.schema.create_topics.v7 import request as ct7
from kio.schema.delete_topics.v6 import request as dt6
from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v8 import request as lo8
from kio.schema.list_offsets.v9 import request as lo9
from kio.schema.list_offsets.v10 import request as lo10
from kio.schema.list_offsets.v11 import request as lo11

from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_admin_validation import list_offsets
from tests.proxy.test_broker_requests import batch, create, produce

MS = datetime.timedelta(milliseconds=1)
ZERO = uuid.UUID(int=0)
NO_ID = None  # kio reads the zero UUID as None


async def test_list_offsets_earliest_local_and_latest_tiered() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "lo", 2) == ErrorCode.none
        await produce(c, "lo", batch([b"a", b"b"], ts=1000))
        # -4 EARLIEST_LOCAL from v8: the log start offset (no tiered storage)
        assert await list_offsets(c, lo8, (0, -4, -1)) == [(0, ErrorCode.none, 0)]
        # -5 LATEST_TIERED needs v9
        assert await list_offsets(c, lo8, (0, -5, -1)) == [(0, ErrorCode.unsupported_version, -1)]
        resp = await c.request(_list(lo9, -5))
        [part] = resp.topics[0].partitions
        assert (part.error_code, part.offset, part.timestamp, part.leader_epoch) == (
            ErrorCode.none,
            -1,
            -1,
            -1,
        )
        resp = await c.request(_list(lo10, -1, timeout=5000 * MS))  # v10: the timeout field
        assert resp.topics[0].partitions[0].offset == 2


async def test_list_offsets_earliest_pending_upload_from_v11() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "lo", 1) == ErrorCode.none
        await produce(c, "lo", batch([b"a", b"b"], ts=1000))
        # -6 EARLIEST_PENDING_UPLOAD (KIP-1023) needs v11
        resp = await c.request(_list(lo10, -6, timeout=5000 * MS))
        assert resp.topics[0].partitions[0].error_code == ErrorCode.unsupported_version
        resp = await c.request(_list(lo11, -6, timeout=5000 * MS))
        [part] = resp.topics[0].partitions
        # no remote storage: nothing pending upload, answered as unknown (KAFKA-17108)
        assert (part.error_code, part.offset, part.timestamp, part.leader_epoch) == (
            ErrorCode.none,
            -1,
            -1,
            -1,
        )
        # and v11 answers the other timestamps as before
        resp = await c.request(_list(lo11, -1, timeout=5000 * MS))
        assert resp.topics[0].partitions[0].offset == 2


def _list(mod: Any, timestamp: int, **extra: Any) -> Any:
    return mod.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=(
            mod.ListOffsetsTopic(
                name="lo",
                partitions=(
                    mod.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=-1, timestamp=timestamp
                    ),
                ),
            ),
        ),
        **extra,
    )


async def _create_v7(c: RawClient, name: str, validate_only: bool = False) -> Any:
    resp = await c.request(
        ct7.CreateTopicsRequest(
            topics=(
                ct7.CreatableTopic(
                    name=name, num_partitions=1, replication_factor=1, assignments=(), configs=()
                ),
            ),
            timeout=1000 * MS,
            validate_only=validate_only,
        )
    )
    return resp.topics[0]


async def test_create_topics_v7_answers_the_topic_id() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        assert server.broker is not None
        made = await _create_v7(c, "with-id")
        assert made.error_code == ErrorCode.none
        assert made.topic_id == server.broker.topics.get("with-id").topic_id
        again = await _create_v7(c, "with-id")
        assert (again.error_code, again.topic_id) == (ErrorCode.topic_already_exists, NO_ID)
        checked = await _create_v7(c, "only-checked", validate_only=True)
        assert checked.error_code == ErrorCode.none and checked.topic_id not in (None, ZERO)
        assert server.broker.topics.get("only-checked") is None


async def _delete_v6(c: RawClient, *topics: tuple[str | None, uuid.UUID]) -> list[Any]:
    resp = await c.request(
        dt6.DeleteTopicsRequest(
            topics=tuple(dt6.DeleteTopicState(name=n, topic_id=i) for n, i in topics),
            timeout=1000 * MS,
        )
    )
    return sorted(
        ((r.name, r.topic_id, r.error_code, r.error_message) for r in resp.responses),
        key=repr,
    )


async def test_delete_topics_v6_by_name_or_id() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        topics = server.broker.topics if server.broker is not None else None
        assert topics is not None
        for name in ("by-id", "by-name", "twice", "both", "mapped"):
            assert await create(c, name) == ErrorCode.none
        by_id, by_name, twice, both, mapped = (
            topics.get(n).topic_id for n in ("by-id", "by-name", "twice", "both", "mapped")
        )
        unknown = uuid.uuid4()
        got = await _delete_v6(
            c,
            (None, by_id),
            ("by-name", ZERO),
            (None, twice),
            (None, twice),
            ("both", both),
            (None, ZERO),
            (None, unknown),
            (None, mapped),
            ("mapped", ZERO),
        )
        assert got == sorted(
            [
                ("by-id", by_id, ErrorCode.none, None),
                ("by-name", by_name, ErrorCode.none, None),
                (None, twice, ErrorCode.invalid_request, "Duplicate topic id."),
                (
                    "both",
                    both,
                    ErrorCode.invalid_request,
                    "You may not specify both topic name and topic id.",
                ),
                (
                    None,
                    NO_ID,
                    ErrorCode.invalid_request,
                    "Neither topic name nor id were specified.",
                ),
                (None, unknown, ErrorCode.unknown_topic_id, None),
                (
                    "mapped",
                    mapped,
                    ErrorCode.invalid_request,
                    "The provided topic name maps to an ID that was already supplied.",
                ),
            ],
            key=repr,
        )
        assert topics.get("by-id") is None and topics.get("by-name") is None
        for kept in ("twice", "both", "mapped"):
            assert topics.get(kept) is not None, kept


async def _epoch_end(c: RawClient, version: int, *parts: tuple[int, int, int]) -> list[Any]:
    """OffsetForLeaderEpoch for topic "oe": (partition, current leader epoch, epoch) each."""
    from kio.index import load_request_schema

    cls = load_request_schema(23, version)
    mod = __import__(cls.__module__, fromlist=["x"])
    resp = await c.request(
        cls(
            topics=(
                mod.OffsetForLeaderTopic(
                    topic="oe",
                    partitions=tuple(
                        mod.OffsetForLeaderPartition(
                            partition=p, current_leader_epoch=cur, leader_epoch=e
                        )
                        for p, cur, e in parts
                    ),
                ),
            ),
        )
    )
    [topic] = resp.topics
    return [(p.partition, p.error_code, p.leader_epoch, p.end_offset) for p in topic.partitions]


async def test_offset_for_leader_epoch_answers_from_one_epoch() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "oe", 2) == ErrorCode.none
        await produce(c, "oe", batch([b"a", b"b", b"c"]))
        for version in (2, 3, 4):
            got = await _epoch_end(
                c, version, (0, -1, 0), (0, -1, -1), (0, -1, 3), (1, 0, 0), (0, 1, 0), (0, -3, 0)
            )
            assert got == [
                (0, ErrorCode.none, 0, 3),  # the current epoch: the log end offset
                (0, ErrorCode.none, -1, -1),  # no epoch
                (0, ErrorCode.none, -1, -1),  # an epoch this partition never had
                (1, ErrorCode.none, 0, 0),  # an empty partition
                (0, ErrorCode.unknown_leader_epoch, -1, -1),
                (0, ErrorCode.fenced_leader_epoch, -1, -1),
            ], version
        got = await _epoch_end(c, 4, (7, -1, 0))
        assert got == [(7, ErrorCode.unknown_topic_or_partition, -1, -1)]


async def test_describe_log_dirs_sizes_every_partition_asked_for(tmp_path: Any) -> None:
    from kio.schema.describe_log_dirs.v1 import request as dl1
    from kio.schema.describe_log_dirs.v4 import request as dl4

    async with running_broker(data_dir=f"file://{tmp_path}") as (_, port), connect(port) as c:
        assert await create(c, "ld", 2) == ErrorCode.none
        await produce(c, "ld", batch([b"x" * 100]))
        everything = await c.request(dl4.DescribeLogDirsRequest(topics=None))
        assert everything.error_code == ErrorCode.none
        [result] = everything.results
        assert result.log_dir == str(tmp_path.absolute())
        assert 0 < result.usable_bytes <= result.total_bytes
        sizes = {
            (t.name, p.partition_index): (p.partition_size, p.offset_lag, p.is_future_key)
            for t in result.topics
            for p in t.partitions
        }
        assert sizes[("ld", 0)][0] > 100 and sizes[("ld", 1)] == (0, 0, False)
        some = await c.request(
            dl1.DescribeLogDirsRequest(
                topics=(dl1.DescribableLogDirTopic(topic="ld", partitions=(1, 7)),)
            )
        )
        [result] = some.results
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [
            ("ld", [1])
        ]


async def test_alter_replica_log_dirs_to_the_one_log_dir(tmp_path: Any) -> None:
    from kio.schema.alter_replica_log_dirs.v1 import request as ar1
    from kio.schema.alter_replica_log_dirs.v2 import request as ar2

    def move(mod: Any, *dirs: tuple[str, str, tuple[int, ...]]) -> Any:
        return mod.AlterReplicaLogDirsRequest(
            dirs=tuple(
                mod.AlterReplicaLogDir(
                    path=path, topics=(mod.AlterReplicaLogDirTopic(name=topic, partitions=parts),)
                )
                for path, topic, parts in dirs
            )
        )

    def answers(resp: Any) -> dict[tuple[str, int], ErrorCode]:
        return {
            (t.topic_name, p.partition_index): p.error_code
            for t in resp.results
            for p in t.partitions
        }

    ours = str(tmp_path.absolute())
    long_topic = "l" * 215  # a legal name whose "-0.<32 hex>-future" dir name is over 255
    async with running_broker(data_dir=f"file://{tmp_path}") as (_, port), connect(port) as c:
        assert await create(c, "ard", 2) == ErrorCode.none
        assert await create(c, long_topic, 1) == ErrorCode.none
        for mod in (ar1, ar2):
            got = answers(
                await c.request(
                    move(
                        mod,
                        (ours, "ard", (0, 1, 9)),
                        (str(tmp_path / "elsewhere"), "nope", (0,)),
                        (ours, long_topic, (0,)),
                    )
                )
            )
            assert got == {
                ("ard", 0): ErrorCode.none,  # already there: nothing to move
                ("ard", 1): ErrorCode.none,
                ("ard", 9): ErrorCode.unknown_topic_or_partition,
                ("nope", 0): ErrorCode.log_dir_not_found,  # checked before the partition
                (long_topic, 0): ErrorCode.invalid_topic_exception,
            }, mod
        # named under two dirs: answered once, for the last
        twice = await c.request(move(ar2, (ours, "ard", (0,)), ("/not/ours", "ard", (0,))))
        assert answers(twice) == {("ard", 0): ErrorCode.log_dir_not_found}
        # and DescribeLogDirs names the same dir
        from kio.schema.describe_log_dirs.v4 import request as dl4

        described = await c.request(dl4.DescribeLogDirsRequest(topics=None))
        assert described.results[0].log_dir == ours


async def test_elect_leaders_is_never_needed_on_one_node() -> None:
    from kio.schema.elect_leaders.v0 import request as el0
    from kio.schema.elect_leaders.v2 import request as el2

    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "el", 2) == ErrorCode.none
        named = await c.request(
            el2.ElectLeadersRequest(
                election_type=0,
                topic_partitions=(
                    el2.TopicPartitions(topic="el", partitions=(0, 5)),
                    el2.TopicPartitions(topic="nope", partitions=(0,)),
                ),
                timeout=1000 * MS,
            )
        )
        assert named.error_code == ErrorCode.none
        got = [
            (r.topic, p.partition_id, p.error_code, p.error_message)
            for r in named.replica_election_results
            for p in r.partition_result
        ]
        assert got == [
            ("el", 0, ErrorCode.election_not_needed, None),
            ("el", 5, ErrorCode.unknown_topic_or_partition, "No such partition as el-5"),
            ("nope", 0, ErrorCode.unknown_topic_or_partition, "No such topic as nope"),
        ]
        everything = await c.request(
            el0.ElectLeadersRequest(topic_partitions=None, timeout=1000 * MS)
        )
        assert {(r.topic, r.partition_result) for r in everything.replica_election_results} >= {
            ("el", ())
        }
        bad = await c.request(
            el2.ElectLeadersRequest(
                election_type=7,
                topic_partitions=(el2.TopicPartitions(topic="el", partitions=(0,)),),
                timeout=1000 * MS,
            )
        )
        assert bad.error_code == ErrorCode.invalid_request
        [[part]] = [r.partition_result for r in bad.replica_election_results]
        assert (part.error_code, part.error_message) == (
            ErrorCode.invalid_request,
            "Unknown election type 7",
        )


async def test_partition_reassignments_to_this_node_only() -> None:
    from kio.schema.alter_partition_reassignments.v0 import request as ap
    from kio.schema.list_partition_reassignments.v0 import request as lp

    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "ra", 2) == ErrorCode.none

        def part(index: int, replicas: tuple[int, ...] | None) -> Any:
            return ap.ReassignablePartition(partition_index=index, replicas=replicas)

        resp = await c.request(
            ap.AlterPartitionReassignmentsRequest(
                timeout=1000 * MS,
                topics=(
                    ap.ReassignableTopic(
                        name="ra",
                        partitions=(
                            part(0, (1,)),
                            part(1, None),
                            part(0, ()),
                            part(0, (2, 1)),
                            part(0, (1, 1)),
                            part(9, (1,)),
                        ),
                    ),
                    ap.ReassignableTopic(name="nope", partitions=(part(0, (1,)),)),
                ),
            )
        )
        assert resp.error_code == ErrorCode.none
        got = [
            (t.name, p.partition_index, p.error_code, p.error_message)
            for t in resp.responses
            for p in t.partitions
        ]
        prefix = "The manual partition assignment includes"
        assert got == [
            ("ra", 0, ErrorCode.none, None),
            (
                "ra",
                1,
                ErrorCode.no_reassignment_in_progress,
                "No partition reassignment is in progress.",
            ),
            ("ra", 0, ErrorCode.invalid_replica_assignment, f"{prefix} an empty replica list."),
            (
                "ra",
                0,
                ErrorCode.invalid_replica_assignment,
                f"{prefix} broker 2, but no such broker is registered.",
            ),
            (
                "ra",
                0,
                ErrorCode.invalid_replica_assignment,
                f"{prefix} the broker 1 more than once.",
            ),
            ("ra", 9, ErrorCode.unknown_topic_or_partition, "Unable to find partition ra:9."),
            ("nope", 0, ErrorCode.unknown_topic_or_partition, "Unable to find a topic named nope."),
        ]
        listed = await c.request(
            lp.ListPartitionReassignmentsRequest(timeout=1000 * MS, topics=None)
        )
        assert (listed.error_code, listed.topics) == (ErrorCode.none, ())


async def test_describe_topic_partitions_pages_with_a_cursor() -> None:
    from kio.schema.describe_topic_partitions.v0 import request as dtp

    async with running_broker() as (server, port), connect(port) as c:
        assert server.broker is not None
        assert await create(c, "a-three", 3) == ErrorCode.none
        assert await create(c, "b-two", 2) == ErrorCode.none

        async def ask(names: tuple[str, ...], limit: int, cursor: Any = None) -> Any:
            return await c.request(
                dtp.DescribeTopicPartitionsRequest(
                    topics=tuple(dtp.TopicRequest(name=n) for n in names),
                    response_partition_limit=limit,
                    cursor=cursor,
                )
            )

        def seen(resp: Any) -> list[Any]:
            return [
                (t.name, t.error_code, [p.partition_index for p in t.partitions])
                for t in resp.topics
            ]

        first = await ask(("b-two", "a-three", "missing", "bad name!"), 2)
        assert seen(first) == [("a-three", ErrorCode.none, [0, 1])]
        assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("a-three", 2)
        [topic] = first.topics
        assert topic.topic_id == server.broker.topics.get("a-three").topic_id
        second = await ask(
            ("b-two", "a-three", "missing", "bad name!"),
            2,
            dtp.Cursor(topic_name="a-three", partition_index=2),
        )
        assert seen(second) == [
            ("a-three", ErrorCode.none, [2]),
            ("b-two", ErrorCode.none, [0]),
        ]
        third = await ask(
            ("b-two", "a-three", "missing", "bad name!"),
            2,
            dtp.Cursor(topic_name="b-two", partition_index=1),
        )
        assert seen(third) == [
            ("b-two", ErrorCode.none, [1]),
            ("bad name!", ErrorCode.invalid_topic_exception, []),
            ("missing", ErrorCode.unknown_topic_or_partition, []),
        ]
        assert third.next_cursor is None
        everything = await ask((), 2000)
        assert [n for n, *_ in seen(everything)] == ["a-three", "b-two"]
        refused = await ask(("a-three",), 10, dtp.Cursor(topic_name="b-two", partition_index=0))
        assert seen(refused) == [("a-three", ErrorCode.invalid_request, [])]


async def test_describe_cluster_v2_lists_the_node_unfenced() -> None:
    from kio.schema.describe_cluster.v1 import request as dc1
    from kio.schema.describe_cluster.v2 import request as dc2

    async with running_broker() as (_, port), connect(port) as c:
        for fenced_too in (False, True):
            resp = await c.request(
                dc2.DescribeClusterRequest(
                    include_cluster_authorized_operations=False,
                    endpoint_type=1,
                    include_fenced_brokers=fenced_too,
                )
            )
            assert resp.error_code == ErrorCode.none
            [node] = resp.brokers
            assert (node.broker_id, node.port, node.is_fenced) == (resp.controller_id, port, False)
        older = await c.request(
            dc1.DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1)
        )
        assert [b.broker_id for b in older.brokers] == [resp.controller_id]


@pytest.mark.parametrize(
    ("endpoint_type", "code", "message"),
    [
        (
            2,
            ErrorCode.mismatched_endpoint_type,
            "The request was sent to an endpoint of type BROKER, "
            "but we wanted an endpoint of type CONTROLLER",
        ),
        (0, ErrorCode.unsupported_endpoint_type, "Unsupported endpoint type 0"),
        (3, ErrorCode.unsupported_endpoint_type, "Unsupported endpoint type 3"),
    ],
)
async def test_describe_cluster_refuses_other_endpoint_types_as_kafka(
    endpoint_type: int, code: ErrorCode, message: str
) -> None:
    """Kafka's AuthHelper.computeDescribeClusterResponse: the code and its message on an
    otherwise default response (no cluster id, no brokers, controller -1, endpoint type 1)."""
    from kio.schema.describe_cluster.v2 import request as dc2

    async with running_broker() as (_, port), connect(port) as c:
        resp = await c.request(
            dc2.DescribeClusterRequest(
                include_cluster_authorized_operations=False,
                endpoint_type=endpoint_type,
                include_fenced_brokers=False,
            )
        )
        assert (resp.error_code, resp.error_message) == (code, message)
        assert (resp.cluster_id, resp.brokers, resp.controller_id, resp.endpoint_type) == (
            "",
            (),
            -1,
            1,
        )
        assert resp.cluster_authorized_operations == -(2**31)


async def test_metadata_v13_answers_a_top_level_error_code_of_none() -> None:
    from kio.schema.metadata.v12 import request as md12
    from kio.schema.metadata.v13 import request as md13

    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "m13", 2) == ErrorCode.none
        for mod in (md12, md13):
            resp = await c.request(
                mod.MetadataRequest(
                    topics=(
                        mod.MetadataRequestTopic(name="m13", topic_id=None),
                        mod.MetadataRequestTopic(name="missing13", topic_id=None),
                    ),
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
            )
            got = {t.name: (t.error_code, len(t.partitions)) for t in resp.topics}
            assert got == {
                "m13": (ErrorCode.none, 2),
                "missing13": (ErrorCode.unknown_topic_or_partition, 0),
            }
        assert resp.error_code == ErrorCode.none  # v13's field; a missing topic is per topic


async def test_alter_partition_reassignments_v1_echoes_the_replication_factor_flag() -> None:
    from kio.schema.alter_partition_reassignments.v1 import request as ap1

    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "ra1", 1) == ErrorCode.none
        for allowed in (True, False):
            resp = await c.request(
                ap1.AlterPartitionReassignmentsRequest(
                    timeout=1000 * MS,
                    allow_replication_factor_change=allowed,
                    topics=(
                        ap1.ReassignableTopic(
                            name="ra1",
                            partitions=(
                                ap1.ReassignablePartition(partition_index=0, replicas=(1,)),
                                ap1.ReassignablePartition(partition_index=0, replicas=(1, 2)),
                            ),
                        ),
                    ),
                )
            )
            assert resp.allow_replication_factor_change is allowed
            got = [p.error_code for t in resp.responses for p in t.partitions]
            # the same replica count is accepted; a new broker is refused before the
            # replication factor is looked at, whatever the flag
            assert got == [ErrorCode.none, ErrorCode.invalid_replica_assignment]


async def test_describe_groups_v6_answers_a_missing_group_with_group_id_not_found() -> None:
    from kio.schema.describe_groups.v5 import request as dg5
    from kio.schema.describe_groups.v6 import request as dg6

    from tests.proxy.test_group_offsets import commit

    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "dg6", 1) == ErrorCode.none
        await commit(c, "dg6-empty", "dg6", {0: 1})  # an Empty classic group
        for mod in (dg5, dg6):
            resp = await c.request(
                mod.DescribeGroupsRequest(
                    groups=("dg6-empty", "dg6-missing"), include_authorized_operations=False
                )
            )
            got = {
                g.group_id: (g.error_code, g.group_state, getattr(g, "error_message", None))
                for g in resp.groups
            }
            assert got["dg6-empty"] == (ErrorCode.none, "Empty", None)
            if mod is dg5:  # below v6: Dead, no error
                assert got["dg6-missing"] == (ErrorCode.none, "Dead", None)
            else:  # KIP-1043: the error, Kafka's message, and still Dead (its describeGroups)
                assert got["dg6-missing"] == (
                    ErrorCode.group_id_not_found,
                    "Dead",
                    "Group dg6-missing not found.",
                )


async def test_metadata_v12_asked_by_id_ignores_the_names() -> None:
    # Kafka's handleTopicMetadataRequest: once any entry has a topic id, the ids alone are
    # looked up (names, even on an entry with an id, are ignored: nothing is auto-created)
    from kio.schema.metadata.v12 import request as md12

    async with running_broker() as (server, port), connect(port) as c:
        assert server.broker is not None
        assert await create(c, "by-id", 1) == ErrorCode.none
        assert await create(c, "by-name", 2) == ErrorCode.none
        by_id = server.broker.topics.get("by-id")
        assert by_id is not None
        unknown = uuid.uuid4()
        resp = await c.request(
            md12.MetadataRequest(
                topics=(
                    md12.MetadataRequestTopic(name="by-name", topic_id=None),
                    md12.MetadataRequestTopic(name="made-up", topic_id=by_id.topic_id),
                    md12.MetadataRequestTopic(name=None, topic_id=unknown),
                ),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            )
        )
        got = [(t.name, t.topic_id, t.error_code, len(t.partitions)) for t in resp.topics]
        assert got == [
            ("by-id", by_id.topic_id, ErrorCode.none, 1),
            (None, unknown, ErrorCode.unknown_topic_id, 0),
        ]
        assert server.broker.topics.get("made-up") is None


async def test_metadata_never_auto_creates_the_cluster_metadata_topic() -> None:
    # Kafka forwards the creation to its controller, which refuses it: the topic stays unknown
    from kio.schema.metadata.v12 import request as md12

    async with running_broker() as (server, port), connect(port) as c:
        assert server.broker is not None
        resp = await c.request(
            md12.MetadataRequest(
                topics=(md12.MetadataRequestTopic(name="__cluster_metadata", topic_id=None),),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            )
        )
        [t] = resp.topics
        assert (t.name, t.error_code) == (
            "__cluster_metadata",
            ErrorCode.unknown_topic_or_partition,
        )
        assert server.broker.topics.get("__cluster_metadata") is None


async def test_share_group_state_is_an_internal_topic() -> None:
    # Kafka's Topic.isInternal: __consumer_offsets, __transaction_state, __share_group_state
    from kio.schema.describe_topic_partitions.v0 import request as dtp
    from kio.schema.metadata.v12 import request as md12

    async with running_broker() as (server, port), connect(port) as c:
        assert server.broker is not None
        assert await create(c, "__share_group_state", 1) == ErrorCode.none
        topic = server.broker.topics.get("__share_group_state")
        assert topic is not None and topic.internal
        resp = await c.request(
            md12.MetadataRequest(
                topics=(md12.MetadataRequestTopic(name="__share_group_state", topic_id=None),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        assert [t.is_internal for t in resp.topics] == [True]
        described = await c.request(
            dtp.DescribeTopicPartitionsRequest(
                topics=(dtp.TopicRequest(name="__share_group_state"),),
                response_partition_limit=10,
                cursor=None,
            )
        )
        assert [t.is_internal for t in described.topics] == [True]


async def test_metadata_answers_a_name_asked_twice_once() -> None:
    # Kafka's handleTopicMetadataRequest looks up metadataRequest.topics.asScala.toSet: a name
    # given more than once (known, unknown, or auto-created) is answered once
    from kio.schema.metadata.v12 import request as md12

    async with running_broker() as (server, port), connect(port) as c:
        assert server.broker is not None
        assert await create(c, "twice", 1) == ErrorCode.none
        for auto in (False, True):
            names = ("twice", "nowhere", "twice", "nowhere", "twice")
            resp = await c.request(
                md12.MetadataRequest(
                    topics=tuple(md12.MetadataRequestTopic(name=n, topic_id=None) for n in names),
                    allow_auto_topic_creation=auto,
                    include_topic_authorized_operations=False,
                )
            )
            assert sorted(t.name for t in resp.topics) == ["nowhere", "twice"], auto


async def test_describe_topic_partitions_answers_a_name_asked_twice_once() -> None:
    # Kafka's DescribeTopicPartitionsRequestHandler collects the names in a HashSet
    from kio.schema.describe_topic_partitions.v0 import request as dtp

    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "dup", 1) == ErrorCode.none
        names = ("dup", "nope", "dup", "nope")
        resp = await c.request(
            dtp.DescribeTopicPartitionsRequest(
                topics=tuple(dtp.TopicRequest(name=n) for n in names),
                response_partition_limit=10,
                cursor=None,
            )
        )
        assert [(t.name, t.error_code) for t in resp.topics] == [
            ("dup", ErrorCode.none),
            ("nope", ErrorCode.unknown_topic_or_partition),
        ]
