"""controller_mutation_rate (KIP-599, Kafka's ControllerMutationQuotaManager): a token bucket
per sensor, strict for the newer CreateTopics / CreatePartitions / DeleteTopics versions
(THROTTLING_QUOTA_EXCEEDED once the bucket is below zero), permissive for the older ones."""

from __future__ import annotations

import datetime
from typing import Any

import trio
from kio.schema.create_partitions.v3 import request as cp
from kio.schema.create_topics.v5 import request as ct5
from kio.schema.create_topics.v7 import request as ct7
from kio.schema.delete_topics.v6 import request as dt
from kio.schema.errors import ErrorCode

from proxy.quotas.mutation import MutationQuotaManager
from tests.proxy.harness import connect, running_broker
from tests.proxy.quotas.test_throttle import API_VERSIONS, set_quota

S = datetime.timedelta(seconds=1)


def test_the_bucket_starts_full_and_refuses_only_once_below_zero() -> None:
    # Kafka's Strict/PermissiveControllerMutationQuota: (refused, throttle ms)
    m = MutationQuotaManager(samples=11, window_s=1)
    assert m.charge("u", "c", 100, strict=True, now_ms=0) == (False, 0)  # no quota
    m.set_quotas({(None, "c"): 2.0})  # 2 partitions/s, burst 22
    assert m.charge("", "c", 20, strict=True, now_ms=0) == (False, 0)  # 2 tokens left
    # strict: accepted while the bucket is not below zero, and no throttle for it (Kafka's
    # checkQuotas comes before the record, which does not check)
    assert m.charge("", "c", 10, strict=True, now_ms=0) == (False, 0)  # -8
    assert m.charge("", "c", 1, strict=True, now_ms=1000) == (True, 3000)  # -6: refused
    assert m.charge("", "c", 1, strict=False, now_ms=1000) == (False, 3500)  # permissive
    # back to 0 at 4.5 s: accepted, 1 short again, but strict: no throttle
    assert m.charge("", "c", 1, strict=True, now_ms=4500) == (False, 0)
    assert m.charge("", "c", 1, strict=False, now_ms=4500) == (False, 1000)


def create_request(module: Any, *topics: tuple[str, int]) -> Any:
    return module.CreateTopicsRequest(
        topics=tuple(
            module.CreatableTopic(
                name=name,
                num_partitions=n,
                replication_factor=1,
                assignments=(),
                configs=(),
            )
            for name, n in topics
        ),
        timeout=S,
        validate_only=False,
    )


async def test_create_topics_v6_plus_is_refused_once_the_quota_is_exhausted(
    autojump_clock: Any,
) -> None:
    async with running_broker() as (server, port), connect(port) as c:
        await set_quota(c, "controller_mutation_rate", 1.0)  # burst: 11 partitions
        start = trio.current_time()
        resp = await c.request(create_request(ct7, ("a", 20), ("b", 1)))
        got = [(t.name, t.error_code, t.error_message) for t in resp.topics]
        assert got == [
            ("a", ErrorCode.none, None),
            ("b", ErrorCode.throttling_quota_exceeded, "The throttling quota has been exceeded."),
        ]
        assert resp.throttle_time == 9 * S  # 9 tokens short at 1 a second
        assert server.broker.topics.get("b") is None
        await c.request(API_VERSIONS)
        assert trio.current_time() - start >= 9  # the connection was muted meanwhile
        resp = await c.request(
            cp.CreatePartitionsRequest(
                topics=(cp.CreatePartitionsTopic(name="a", count=30, assignments=None),),
                timeout=S,
                validate_only=False,
            )
        )
        assert resp.results[0].error_code == ErrorCode.none  # the bucket was back at 0
        # strict and nothing refused: no throttle though the bucket is now 10 short (Kafka
        # sets a strict quota's throttle time only when it refuses)
        assert resp.throttle_time == datetime.timedelta(0)
        start = trio.current_time()
        resp = await c.request(
            dt.DeleteTopicsRequest(
                topics=(dt.DeleteTopicState(name="a", topic_id=None),), timeout=S
            )
        )
        assert resp.responses[0].error_code == ErrorCode.throttling_quota_exceeded
        assert resp.throttle_time == 10 * S
        await c.request(API_VERSIONS)
        assert trio.current_time() - start >= 10  # muted for it
        resp = await c.request(
            dt.DeleteTopicsRequest(
                topics=(dt.DeleteTopicState(name="a", topic_id=None),), timeout=S
            )
        )
        assert resp.responses[0].error_code == ErrorCode.none  # the mute refilled it


async def test_older_versions_are_throttled_but_never_refused(autojump_clock: Any) -> None:
    async with running_broker() as (server, port), connect(port) as c:
        await set_quota(c, "controller_mutation_rate", 1.0)
        resp = await c.request(create_request(ct5, ("a", 20), ("b", 1)))
        assert [t.error_code for t in resp.topics] == [ErrorCode.none, ErrorCode.none]
        assert resp.throttle_time == 10 * S
        assert server.broker.topics.get("b") is not None


async def test_the_bucket_uses_the_controller_quota_windows_not_the_client_ones(
    autojump_clock: Any,
) -> None:
    # Kafka's ControllerMutationQuotaManager samples controller.quota.window.num windows of
    # controller.quota.window.size.seconds (QuotaConfig); quota.window.* are the client quotas'
    settings = {
        "controller.quota.window.num": "2",
        "controller.quota.window.size.seconds": "3",
        "quota.window.num": "50",
    }
    async with running_broker(**settings) as (server, port), connect(port) as c:
        await set_quota(c, "controller_mutation_rate", 1.0)  # burst: 2 * 3 s * 1/s = 6
        resp = await c.request(create_request(ct7, ("a", 7), ("b", 1)))
        assert [t.error_code for t in resp.topics] == [
            ErrorCode.none,
            ErrorCode.throttling_quota_exceeded,
        ]
        assert resp.throttle_time == S  # one token short
        values = server.broker.config.values or {}
        assert values["controller.quota.window.num"] == 2
        assert values["controller.quota.window.size.seconds"] == 3
