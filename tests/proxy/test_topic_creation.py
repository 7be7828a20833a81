"""Topic creation: atomic per name under concurrent creators (issue 21.3), internal topics
created with their coordinators' spec whoever asks first (26.1), and CreateTopics' check order
(26.7). Real brokers on loopback with file storage, so every store write really awaits."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import trio
from kio.schema.alter_configs.v2 import request as ac
from kio.schema.create_partitions.v3 import request as cp
from kio.schema.create_topics.v5 import request as ct
from kio.schema.delete_topics.v5 import request as dt
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import request as md

from storage.api import Store
from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_alter_configs import described, incremental
from tests.proxy.test_transactions import commit_request

MS = datetime.timedelta(milliseconds=1)


def creatable(
    name: str, partitions: int = 1, replication: int = -1, **configs: str
) -> ct.CreatableTopic:
    return ct.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication,
        assignments=(),
        configs=tuple(
            ct.CreatableTopicConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()
        ),
    )


async def create_one(c: RawClient, topic: ct.CreatableTopic) -> Any:
    resp = await c.request(
        ct.CreateTopicsRequest(topics=(topic,), timeout=1000 * MS, validate_only=False)
    )
    return resp.topics[0]


async def metadata(c: RawClient, *names: str, auto_create: bool = True) -> Any:
    return await c.request(
        md.MetadataRequest(
            topics=tuple(md.MetadataRequestTopic(topic_id=None, name=n) for n in names),
            allow_auto_topic_creation=auto_create,
            include_topic_authorized_operations=False,
        )
    )


def count_topic_writes(store: Store) -> list[str]:
    """Wrap the store's ``create_topic`` to record every topic whose metadata it writes."""
    written: list[str] = []
    create_topic = store.create_topic

    async def counted(meta: Any) -> None:
        written.append(meta.name)
        await create_topic(meta)

    store.create_topic = counted  # type: ignore[method-assign]
    return written


async def test_concurrent_create_topics_one_winner(tmp_path: Path) -> None:
    async with running_broker(str(tmp_path)) as (server, port):
        assert server.broker is not None
        written = count_topic_writes(server.broker.store)
        answers: list[tuple[int, Any]] = []

        async def creator(partitions: int) -> None:
            async with connect(port) as c:
                answers.append((partitions, await create_one(c, creatable("race", partitions))))

        async def auto_creator() -> None:
            async with connect(port) as c:
                resp = await metadata(c, "race")
                answers.append((0, resp.topics[0]))

        async with trio.open_nursery() as n:
            for partitions in (1, 2, 3, 4, 5, 6):
                n.start_soon(creator, partitions)
            n.start_soon(auto_creator)
        created = [a for a in answers if a[0] > 0]
        winners = [p for p, r in created if r.error_code == ErrorCode.none]
        # one creator wins: a CreateTopics, or the Metadata request (num.partitions = 1)
        assert len(winners) <= 1, [(p, r.error_code, r.error_message) for p, r in created]
        losers = [r.error_code for p, r in created if r.error_code != ErrorCode.none]
        assert losers == [ErrorCode.topic_already_exists] * (6 - len(winners))
        assert written == ["race"]
        won_partitions = winners[0] if winners else 1
        async with connect(port) as c:
            (seen,) = (await metadata(c, "race")).topics
        assert len(seen.partitions) == won_partitions
        (auto,) = [r for p, r in answers if p == 0]
        assert auto.error_code == ErrorCode.none and len(auto.partitions) == won_partitions
    async with running_broker(str(tmp_path)) as (_, port), connect(port) as c:
        (after,) = (await metadata(c, "race")).topics
        assert (after.topic_id, len(after.partitions)) == (seen.topic_id, won_partitions)


async def test_concurrent_auto_creation_writes_once(tmp_path: Path) -> None:
    async with running_broker(str(tmp_path)) as (server, port):
        assert server.broker is not None
        written = count_topic_writes(server.broker.store)
        ids: list[Any] = []

        async def asker() -> None:
            async with connect(port) as c:
                (t,) = (await metadata(c, "auto-race")).topics
                assert t.error_code == ErrorCode.none
                ids.append(t.topic_id)

        async with trio.open_nursery() as n:
            for _ in range(5):
                n.start_soon(asker)
        assert written == ["auto-race"]
        assert len(set(ids)) == 1


async def test_metadata_creates_internal_topics_as_their_coordinators_do(tmp_path: Path) -> None:
    overrides = {
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.num.partitions": "4",
        "num.partitions": "1",
    }
    async with running_broker(str(tmp_path), **overrides) as (_, port), connect(port) as c:
        offsets, txns = (await metadata(c, "__consumer_offsets", "__transaction_state")).topics
        assert (offsets.error_code, txns.error_code) == (ErrorCode.none, ErrorCode.none)
        assert offsets.is_internal and txns.is_internal
        assert (len(offsets.partitions), len(txns.partitions)) == (3, 4)
        for name in ("__consumer_offsets", "__transaction_state"):
            configs = await described(c, name)
            assert configs["cleanup.policy"][0] == "compact", name
            assert configs["segment.bytes"][0] == "1048576", name
        # the group coordinator then uses the topic the Metadata request created
        commit = await c.request(commit_request("g", "__consumer_offsets", {0: 7}))
        assert commit.topics[0].partitions[0].error_code == ErrorCode.none
        (again,) = (await metadata(c, "__consumer_offsets")).topics
        assert again.topic_id == offsets.topic_id and len(again.partitions) == 3


async def test_coordinator_and_metadata_race_for_the_offsets_topic(tmp_path: Path) -> None:
    overrides = {"offsets.topic.num.partitions": "5"}
    async with running_broker(str(tmp_path), **overrides) as (server, port):
        assert server.broker is not None
        async with connect(port) as c:
            assert (await create_one(c, creatable("data"))).error_code == ErrorCode.none
        written = count_topic_writes(server.broker.store)

        async def by_metadata() -> None:
            async with connect(port) as c:
                (t,) = (await metadata(c, "__consumer_offsets")).topics
                assert t.error_code == ErrorCode.none and len(t.partitions) == 5

        async def by_commit(group: str) -> None:
            async with connect(port) as c:
                resp = await c.request(commit_request(group, "data", {0: 3}))
                assert resp.topics[0].partitions[0].error_code == ErrorCode.none

        async with trio.open_nursery() as n:
            n.start_soon(by_metadata)
            n.start_soon(by_commit, "g1")
            n.start_soon(by_metadata)
            n.start_soon(by_commit, "g2")
        assert written == ["__consumer_offsets"]
        async with connect(port) as c:
            assert (await described(c, "__consumer_offsets"))["cleanup.policy"][0] == "compact"


async def test_create_topics_checks_configs_then_replication_then_partitions() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        bad_all = await create_one(c, creatable("o1", 0, 3, no_such_config="1"))
        assert bad_all.error_code == ErrorCode.invalid_config
        bad_layout = await create_one(c, creatable("o2", 0, 0))
        assert bad_layout.error_code == ErrorCode.invalid_replication_factor
        assert bad_layout.error_message == (
            "Replication factor must be larger than 0, or -1 to use the default value."
        )
        bad_partitions = await create_one(c, creatable("o3", -5, 3))
        assert bad_partitions.error_code == ErrorCode.invalid_partitions
        assert bad_partitions.error_message == (
            "Number of partitions was set to an invalid non-positive value."
        )
        assert (await create_one(c, creatable("o4", 1, 3))).error_code == (
            ErrorCode.invalid_replication_factor
        )
        manual = ct.CreatableTopic(
            name="o5",
            num_partitions=2,
            replication_factor=-1,
            assignments=(ct.CreatableReplicaAssignment(partition_index=0, broker_ids=(1,)),),
            configs=(ct.CreatableTopicConfig(name="retention.ms", value="abc"),),
        )
        assert (await create_one(c, manual)).error_code == ErrorCode.invalid_config


async def test_concurrent_grow_alter_and_delete_of_one_topic(tmp_path: Path) -> None:
    """CreatePartitions, AlterConfigs and DeleteTopics of one topic at once take the lock of
    creation and deletion: each is answered a Kafka code (never UNKNOWN_SERVER_ERROR or
    KAFKA_STORAGE_ERROR from two writers of the topic's metadata file), one grow wins, and a
    delete answered NONE stays deleted after a restart (no later write brings the file back)."""
    async with running_broker(str(tmp_path)) as (_, port):
        async with connect(port) as c:
            assert (await create_one(c, creatable("grow"))).error_code == ErrorCode.none
        grown: list[int] = []
        altered: list[int] = []
        deleted: list[int] = []

        async def grow() -> None:
            async with connect(port) as c:
                resp = await c.request(
                    cp.CreatePartitionsRequest(
                        topics=(cp.CreatePartitionsTopic(name="grow", count=3, assignments=None),),
                        timeout=1000 * MS,
                        validate_only=False,
                    )
                )
                grown.append(resp.results[0].error_code)

        async def alter() -> None:
            async with connect(port) as c:
                resp = await c.request(
                    ac.AlterConfigsRequest(
                        resources=(
                            ac.AlterConfigsResource(
                                resource_type=2,
                                resource_name="grow",
                                configs=(ac.AlterableConfig(name="retention.ms", value="60000"),),
                            ),
                        ),
                        validate_only=False,
                    )
                )
                altered.append(resp.responses[0].error_code)

        async def delete() -> None:
            async with connect(port) as c:
                resp = await c.request(
                    dt.DeleteTopicsRequest(topic_names=("grow",), timeout=1000 * MS)
                )
                deleted.append(resp.responses[0].error_code)

        async with trio.open_nursery() as n:
            for _ in range(3):
                n.start_soon(grow)
                n.start_soon(alter)
            n.start_soon(delete)
        assert deleted == [ErrorCode.none]
        assert grown.count(ErrorCode.none) <= 1
        assert set(grown) <= {
            ErrorCode.none,
            ErrorCode.invalid_partitions,
            ErrorCode.unknown_topic_or_partition,
        }, grown
        assert set(altered) <= {ErrorCode.none, ErrorCode.unknown_topic_or_partition}, altered
    async with running_broker(str(tmp_path)) as (_, port), connect(port) as c:
        resp = await metadata(c, "grow", auto_create=False)
        assert resp.topics[0].error_code == ErrorCode.unknown_topic_or_partition


async def test_concurrent_incremental_alters_of_one_topic_all_apply(tmp_path: Path) -> None:
    """Each IncrementalAlterConfigs applies its operations to the overrides as they are when
    its change runs (under the topic lock), as Kafka's controller applies them one at a time:
    concurrent SETs of different configs all land, none overwritten by a stale copy."""
    keys = ("retention.ms", "segment.ms", "retention.bytes", "segment.bytes", "max.message.bytes")
    values = ("60000", "70000", "80000", "2000000", "90000")
    async with running_broker(str(tmp_path)) as (_, port):
        async with connect(port) as c:
            assert (await create_one(c, creatable("inc"))).error_code == ErrorCode.none

        async def set_one(key: str, value: str) -> None:
            async with connect(port) as c:
                assert (await incremental(c, "inc", (key, 0, value))).error_code == ErrorCode.none

        async with trio.open_nursery() as n:
            for key, value in zip(keys, values, strict=True):
                n.start_soon(set_one, key, value)
        async with connect(port) as c:
            configs = await described(c, "inc")
        assert {k: configs[k] for k in keys} == {
            k: (v, 1) for k, v in zip(keys, values, strict=True)
        }
