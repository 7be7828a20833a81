"""An empty ``cleanup.policy`` (Kafka 4.2, KIP-1161's ``ValidList.in`` allows an empty list):
accepted by CreateTopics, IncrementalAlterConfigs and AlterConfigs, shown as "", and meaning
"infinite retention" (``TopicConfig.CLEANUP_POLICY_DOC``): neither retention nor the cleaner
removes anything (``UnifiedLog.deleteOldSegments``), DeleteRecords still may."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_alter_configs import incremental, replace_all
from tests.proxy.test_broker_requests import create
from tests.proxy.test_dynamic_broker_configs import SET, describe

TOPIC = 2


async def alter_topic(c: RawClient, name: str, op: int, value: str) -> tuple[ErrorCode, str | None]:
    answer = await incremental(c, name, ("cleanup.policy", op, value))
    return answer.error_code, answer.error_message


async def test_empty_cleanup_policy_through_every_api() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        assert await create(c, "a", cleanup_policy="") == ErrorCode.none
        assert (await describe(c, TOPIC, "a"))["cleanup.policy"].value == ""
        topic = server.broker.topics.get("a")
        assert topic is not None
        p = topic.partitions[0]
        assert (p.config.compact, p.config.delete) == (False, False)
        assert await create(c, "b") == ErrorCode.none
        assert await alter_topic(c, "b", SET, "") == (ErrorCode.none, None)
        assert (await describe(c, TOPIC, "b"))["cleanup.policy"].value == ""
        assert await create(c, "c", cleanup_policy="compact") == ErrorCode.none
        assert (await replace_all(c, "c", {"cleanup.policy": ""})).error_code == ErrorCode.none
        assert (await describe(c, TOPIC, "c"))["cleanup.policy"].value == ""
        # duplicates and empty items are still refused (ValidList)
        assert await alter_topic(c, "b", SET, "delete,delete") == (
            ErrorCode.invalid_config,
            "Configuration 'cleanup.policy' values must not be duplicated.",
        )
        assert await alter_topic(c, "b", SET, "delete,") == (
            ErrorCode.invalid_config,
            "Configuration 'cleanup.policy' values must not be empty.",
        )
