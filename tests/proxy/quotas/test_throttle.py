"""Byte-rate quotas as Kafka's ClientQuotaManager computes them: the sensor a request is
charged to, the quota that applies, the windowed rate and the throttle time; then on the wire
(Produce answered at once with the throttle time, the connection read again only after it,
a throttled Fetch answered empty), under trio's MockClock."""

from __future__ import annotations

import datetime
from typing import Any

import trio
from kio.schema.alter_client_quotas.v1 import request as aq
from kio.schema.api_versions.v3 import request as av
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fr
from kio.schema.produce.v9 import request as pr
from kio.static.primitive import f64

from proxy.quotas.throttle import DEFAULT, QuotaManager, Rate, quota_keys
from tests.proxy.harness import connect, encode_request, running_broker
from tests.proxy.test_broker_requests import create
from tests.proxy.test_transactions import plain, produce
from wire.records import Record, build_batch


def test_rate_counts_at_least_samples_minus_one_windows() -> None:
    rate = Rate(samples=11, window_ms=1000)
    rate.record(100, 0)
    assert rate.measure(0) == 100 / 10
    rate.record(100, 5500)  # a new sample; the oldest started at 0
    # 5.5 s since the oldest sample: 5 whole windows, short of 10 by 5
    assert rate.window_size(5500) == 10_500
    assert rate.measure(5500) == 200 / 10.5
    assert rate.window_size(10_900) == 10_900  # 10 whole windows since the oldest sample
    assert rate.window_size(12_700) == 10_200  # the first sample expired at 11 s
    # no event for samples * window: every sample reset
    assert rate.measure(5500 + 11_000) == 0


def test_throttle_time() -> None:
    m = QuotaManager(samples=11, window_s=1)
    assert m.record("alice", "c", 1e9, 0) == 0  # no quota ever set: nothing recorded
    assert m.sensors == {}
    m.set_quotas({("alice", None): 5.0})
    assert m.record("alice", "c", 40, 0) == 0  # 4 bytes/s
    assert m.record("alice", "c", 60, 0) == 10_000  # 10 bytes/s: (10 - 5) / 5 * 10 s
    assert m.record("bob", "c", 1000, 0) == 0  # no quota for bob: unlimited
    assert m.max_value_in_window("alice", "x") == 5.0 * 10
    assert m.max_value_in_window("bob", "x") == float("inf")


def test_quota_resolution_order() -> None:
    m = QuotaManager()
    m.set_quotas(
        {
            ("u", "c"): 1.0,
            ("u", DEFAULT): 2.0,
            ("u", None): 3.0,
            (DEFAULT, "c"): 4.0,
            (DEFAULT, DEFAULT): 5.0,
            (DEFAULT, None): 6.0,
            (None, "c"): 7.0,
            (None, DEFAULT): 8.0,
        }
    )

    def quota(user: str, client: str) -> float:
        return m.limit(m.metric_tags(user, client))

    assert quota("u", "c") == 1.0
    assert quota("u", "other") == 2.0
    assert quota("v", "c") == 4.0
    assert quota("v", "other") == 5.0
    m.set_quotas({("u", None): 3.0, (DEFAULT, None): 6.0, (None, "c"): 7.0})
    assert m.metric_tags("u", "c") == ("u", "")
    assert quota("u", "c") == 3.0
    assert m.metric_tags("v", "c") == ("v", "")
    m.set_quotas({(None, "c"): 7.0, (None, DEFAULT): 8.0, (DEFAULT, None): 6.0})
    assert quota("v", "c") == 6.0
    m.set_quotas({(None, "c"): 7.0, (None, DEFAULT): 8.0})
    assert (quota("v", "c"), quota("v", "d")) == (7.0, 8.0)


def test_only_one_kind_of_quota_uses_its_tags_directly() -> None:
    m = QuotaManager()
    m.set_quotas({(None, "c"): 7.0})
    assert m.metric_tags("u", "d") == ("", "d")  # the sensor of client d, unlimited
    m = QuotaManager()
    m.set_quotas({("u", None): 7.0})
    assert m.metric_tags("u", "d") == ("u", "")


def test_quota_keys_from_the_store() -> None:
    stored = {
        (("user", "u"),): {"producer_byte_rate": 1.0, "consumer_byte_rate": 2.0},
        (("client-id", None), ("user", None)): {"producer_byte_rate": 3.0},
        (("ip", "1.2.3.4"),): {"connection_creation_rate": 4.0},
    }
    assert quota_keys(stored, "producer_byte_rate") == {("u", None): 1.0, (DEFAULT, DEFAULT): 3.0}
    assert quota_keys(stored, "consumer_byte_rate") == {("u", None): 2.0}


async def set_quota(c: Any, key: str, value: float) -> None:
    resp = await c.request(
        aq.AlterClientQuotasRequest(
            entries=(
                aq.EntryData(
                    entity=(aq.EntityData(entity_type="client-id", entity_name="test"),),
                    ops=(aq.OpData(key=key, value=f64(float(value)), remove=False),),
                ),
            ),
            validate_only=False,
        )
    )
    assert resp.entries[0].error_code == ErrorCode.none


def produce_request(topic: str) -> Any:
    return pr.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=1),
        topic_data=(
            pr.TopicProduceData(
                name=topic, partition_data=(pr.PartitionProduceData(index=0, records=plain()),)
            ),
        ),
    )


def fetch_request(topic: str) -> Any:
    return fr.FetchRequest(
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=50 * 1024 * 1024,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            fr.FetchTopic(
                topic=topic,
                partitions=(
                    fr.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


API_VERSIONS = av.ApiVersionsRequest(client_software_name="t", client_software_version="1")


async def test_produce_is_answered_at_once_then_the_connection_waits(autojump_clock: Any) -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t") == ErrorCode.none
        await set_quota(c, "producer_byte_rate", 10.0)
        req = produce_request("t")
        size = len(encode_request(req, 0)) - 4  # Kafka's request.sizeInBytes
        expected = round((size / 10 - 10) / 10 * 10_000)  # the first window counts as 10 s
        assert expected > 0
        start = trio.current_time()
        resp = await c.request(req)
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
        assert resp.throttle_time == datetime.timedelta(milliseconds=expected)
        assert trio.current_time() - start < 1  # answered at once
        await c.request(API_VERSIONS)
        assert trio.current_time() - start >= expected / 1000  # read again only after


async def test_no_quota_for_this_client_no_throttle(autojump_clock: Any) -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t") == ErrorCode.none
        resp = await c.request(
            aq.AlterClientQuotasRequest(
                entries=(
                    aq.EntryData(
                        entity=(aq.EntityData(entity_type="client-id", entity_name="other"),),
                        ops=(aq.OpData(key="producer_byte_rate", value=f64(1.0), remove=False),),
                    ),
                ),
                validate_only=False,
            )
        )
        assert resp.entries[0].error_code == ErrorCode.none
        for _ in range(3):
            resp = await c.request(produce_request("t"))
            assert resp.throttle_time == datetime.timedelta(0)


async def test_a_throttled_fetch_is_answered_empty(autojump_clock: Any) -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t") == ErrorCode.none
        for _ in range(5):
            assert (await produce(c, "t", plain(), txn=None)).error_code == ErrorCode.none
        await c.send_raw(encode_request(fetch_request("t"), 99))  # no quota yet: not charged
        frame = await c.read_frame()
        assert frame is not None
        size = len(frame) - 5 + 4  # FetchResponse.sizeOf: the body (no v12 header) plus 4
        quota = size * 15 // 100  # 1.5 responses per 10 s
        await set_quota(c, "consumer_byte_rate", quota)
        assert len((await c.request(fetch_request("t"))).responses) == 1  # 1 in 10 s: within
        start = trio.current_time()
        resp = await c.request(fetch_request("t"))
        assert (resp.error_code, resp.session_id, resp.responses) == (ErrorCode.none, 0, ())
        expected = round((2 * size / 10 - quota) / quota * 10_000)
        assert resp.throttle_time == datetime.timedelta(milliseconds=expected)
        await c.request(API_VERSIONS)
        assert trio.current_time() - start >= expected / 1000
        # the throttled fetch's bytes were taken back out: two responses in the window, not
        # three (three would throttle for ~9.6 s), over a window now grown by the throttle
        resp = await c.request(fetch_request("t"))
        assert resp.responses == ()
        assert (
            datetime.timedelta(0) < resp.throttle_time < datetime.timedelta(milliseconds=expected)
        )


async def test_a_muted_connection_does_not_hold_up_shutdown(autojump_clock: Any) -> None:
    with trio.fail_after(5):  # the throttle is longer: the clock would jump past this
        async with running_broker() as (_, port), connect(port) as c:
            assert await create(c, "t") == ErrorCode.none
            await set_quota(c, "producer_byte_rate", 1.0)
            resp = await c.request(produce_request("t"))
            assert resp.throttle_time > datetime.timedelta(seconds=5)


def session_fetch(topic: str, session_id: int, epoch: int, partitions: bool) -> Any:
    parts = (fr.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),)
    return fr.FetchRequest(
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=50 * 1024 * 1024,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=(fr.FetchTopic(topic=topic, partitions=parts),) if partitions else (),
        forgotten_topics_data=(),
        rack_id="",
    )


async def test_a_throttled_incremental_fetch_leaves_the_session_as_it_was(
    autojump_clock: Any,
) -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t") == ErrorCode.none
        assert (await produce(c, "t", plain(), txn=None)).error_code == ErrorCode.none
        full = await c.request(session_fetch("t", 0, 0, partitions=True))  # a new session
        assert full.session_id != 0 and len(full.responses) == 1
        await set_quota(c, "consumer_byte_rate", 1.0)
        assert (await produce(c, "t", plain(), txn=None)).error_code == ErrorCode.none
        resp = await c.request(session_fetch("t", full.session_id, 1, partitions=False))
        assert (resp.error_code, resp.session_id, resp.responses) == (
            ErrorCode.none,
            full.session_id,
            (),
        )
        assert resp.throttle_time > datetime.timedelta(0)
        # the session went on (epoch 2 is next) and answers the partition, its new high
        # watermark included, once the quota allows
        await set_quota(c, "consumer_byte_rate", 1e9)
        resp = await c.request(session_fetch("t", full.session_id, 2, partitions=False))
        assert (resp.error_code, resp.throttle_time) == (ErrorCode.none, datetime.timedelta(0))
        (part,) = resp.responses[0].partitions
        assert part.high_watermark == 2


def test_a_fetch_session_preview_remembers_nothing() -> None:
    from proxy.fetch_session import CachedPartition

    class A:
        records, high_watermark, log_start_offset, error_code = b"", 5, 0, ErrorCode.none

    cached = CachedPartition(tp=None, request=None, high_watermark=4, local_log_start_offset=0)  # type: ignore[arg-type]
    assert cached.would_respond(A()) and cached.high_watermark == 4
    assert cached.must_respond(A()) and cached.high_watermark == 5
    assert not cached.would_respond(A())


def test_a_throttle_time_past_an_int_wraps_as_kafkas_to_int() -> None:
    m = QuotaManager()
    m.set_quotas({(None, "c"): 1.0})
    assert m.record("", "c", 2_000_000, 0) == round((2_000_000 / 10 - 1) * 10_000)  # fits
    # 3.5e9 ms: Kafka's (long).toInt gives 3.5e9 - 2**32 < 0, so no throttle at all
    assert m.record("", "c", 1_500_000, 0) == 0
    # 4.5e9 ms wraps to a small positive time
    assert m.record("", "c", 1_000_000, 0) == round((4_500_000 / 10 - 1) * 10_000) - 2**32


def big_produce(topic: str) -> Any:
    data = build_batch(
        [Record(offset_delta=0, timestamp_delta=0, key=None, value=b"x" * 900_000, headers=[])],
        base_timestamp=1_700_000_000_000,
    )
    part = pr.PartitionProduceData(index=0, records=data)
    return pr.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=1),
        topic_data=(pr.TopicProduceData(name=topic, partition_data=(part,)),),
    )


async def test_a_huge_throttle_does_not_fail_an_appended_produce(autojump_clock: Any) -> None:
    async with running_broker() as (_, port):
        async with connect(port) as c:
            assert await create(c, "t") == ErrorCode.none
            await set_quota(c, "producer_byte_rate", 1.0)
        for _ in range(3):  # each throttles its connection for weeks: a new one each time
            async with connect(port) as c:
                resp = await c.request(big_produce("t"))
                assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
        assert resp.throttle_time == datetime.timedelta(0)  # ~2.7e9 ms wrapped negative
