"""Every way a topic's effective config changes reaches the next Produce at once: the topic's
own overrides (IncrementalAlterConfigs SET and DELETE, AlterConfigs) and the broker defaults a
topic without an override follows (dynamic ``log.*`` / ``message.max.bytes``). The produce
path caches the rules it reads from a topic's settings (storage/log_validator.py); these are
the writers that cache must see."""

from __future__ import annotations

import time

import pytest
from kio.schema.errors import ErrorCode

from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_alter_configs import incremental, replace_all
from tests.proxy.test_broker_requests import create, produce
from tests.proxy.test_dynamic_broker_configs import DELETE, SET, alter
from wire.record_codec import Record, build_batch


def batch(key: bytes | None = b"k", value: bytes = b"v") -> bytes:
    now = int(time.time() * 1000)
    return build_batch([Record(0, 0, key, value)], base_timestamp=now)


async def alter_topic(c: RawClient, name: str, op: int, config: str, value: str | None) -> None:
    answer = await incremental(c, name, (config, op, value))
    assert answer.error_code == ErrorCode.none, answer


async def test_topic_overrides_reach_the_next_produce() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        assert await create(c, "t") == ErrorCode.none
        topic = server.broker.topics.get("t")
        assert topic is not None
        before = topic.settings
        with pytest.raises(TypeError):  # never edited in place: the cache could not see it
            topic.settings["cleanup.policy"] = "compact"  # type: ignore[index]
        assert (await produce(c, "t", batch(key=None))).error_code == ErrorCode.none
        await alter_topic(c, "t", SET, "cleanup.policy", "compact")
        assert topic.settings is not before and before["cleanup.policy"] == "delete"
        assert (await produce(c, "t", batch(key=None))).error_code == ErrorCode.invalid_record
        await alter_topic(c, "t", DELETE, "cleanup.policy", None)
        assert (await produce(c, "t", batch(key=None))).error_code == ErrorCode.none
        answer = await replace_all(c, "t", {"max.message.bytes": "100"})
        assert answer.error_code == ErrorCode.none
        big = batch(value=b"x" * 200)
        assert (await produce(c, "t", big)).error_code == ErrorCode.message_too_large
        await alter_topic(c, "t", SET, "message.timestamp.type", "LogAppendTime")
        answer = await produce(c, "t", batch())
        assert answer.error_code == ErrorCode.none and answer.log_append_time is not None


async def test_dynamic_broker_defaults_reach_the_next_produce() -> None:
    async with running_broker() as (_server, port), connect(port) as c:
        assert await create(c, "t") == ErrorCode.none
        assert await create(c, "own", max_message_bytes="100000") == ErrorCode.none
        answer = await produce(c, "t", batch())
        assert answer.error_code == ErrorCode.none and answer.log_append_time is None
        assert await alter(c, "", ("log.message.timestamp.type", SET, "LogAppendTime")) == (
            ErrorCode.none,
            None,
        )
        answer = await produce(c, "t", batch())
        assert answer.error_code == ErrorCode.none and answer.log_append_time is not None
        big = batch(value=b"x" * 300)
        assert (await produce(c, "t", big)).error_code == ErrorCode.none
        assert await alter(c, "", ("message.max.bytes", SET, "200")) == (ErrorCode.none, None)
        assert (await produce(c, "t", big)).error_code == ErrorCode.message_too_large
        assert (await produce(c, "own", big)).error_code == ErrorCode.none  # its override
        assert await alter(c, "", ("message.max.bytes", DELETE, None)) == (ErrorCode.none, None)
        assert (await produce(c, "t", big)).error_code == ErrorCode.none
