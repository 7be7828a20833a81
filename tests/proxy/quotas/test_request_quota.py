"""The request-time quota (``request_percentage``, Kafka's ClientRequestQuotaManager) and the
expiry of idle sensors: the manager's arithmetic, the per-task clock, then on the wire under
trio's MockClock (the clock of the request's own work is real time, so the quotas here are
set tiny enough that any request is over them)."""

from __future__ import annotations

import datetime
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from proxy.quotas.request_time import TaskClock
from proxy.quotas.throttle import SENSOR_EXPIRY_MS, QuotaManager
from tests.proxy.harness import connect, running_broker
from tests.proxy.quotas.test_throttle import API_VERSIONS, fetch_request, set_quota
from tests.proxy.test_broker_requests import create
from tests.proxy.test_transactions import plain, produce


def test_a_request_throttle_is_at_most_one_window() -> None:
    m = QuotaManager(samples=11, window_s=1, max_throttle_ms=1000)
    m.set_quotas({(None, "c"): 1.0})  # 1 % of a second per second
    assert m.record("", "c", 5.0, 0) == 0  # 0.5 %/s over the first 10 s
    assert m.record("", "c", 100.0, 0) == 1000  # (10.5 - 1) / 1 * 10 s, capped at 1 s
    uncapped = QuotaManager(samples=11, window_s=1)
    uncapped.set_quotas({(None, "c"): 1.0})
    assert uncapped.record("", "c", 105.0, 0) == 95_000


def test_a_value_recorded_without_a_throttle_counts_for_the_next_request() -> None:
    m = QuotaManager(max_throttle_ms=1000)
    m.set_quotas({(None, "c"): 1.0})
    m.record_no_throttle("", "c", 10.0, 0)  # 1 %/s: at the quota, not over it
    assert m.record("", "c", 0.0, 0) == 0
    m.record_no_throttle("", "c", 1.0, 0)
    assert m.record("", "c", 0.0, 0) == 1000


def test_an_idle_sensor_is_dropped_after_an_hour() -> None:
    m = QuotaManager()
    m.set_quotas({(None, "c"): 1e9})
    m.record("", "c", 1.0, 0)
    m.record("", "d", 1.0, 0)
    assert set(m.sensors) == {("", "c"), ("", "d")}
    m.record("", "d", 1.0, SENSOR_EXPIRY_MS)  # "c" idle for exactly an hour: kept
    assert set(m.sensors) == {("", "c"), ("", "d")}
    m.record("", "d", 1.0, SENSOR_EXPIRY_MS + 30_001)  # "c" idle for more: dropped
    assert set(m.sensors) == {("", "d")}


async def test_the_task_clock_counts_only_the_tasks_own_steps() -> None:
    clock = TaskClock()
    trio.lowlevel.add_instrument(clock)
    try:
        clock.start()
        with trio.CancelScope() as cancel:
            cancel.deadline = trio.current_time() + 0.05
            await trio.sleep_forever()  # parked: no step of this task runs
        parked = clock.elapsed()
        assert parked < 0.03
        deadline = trio.current_time() + 0.02
        while trio.current_time() < deadline:  # busy: all of it counts
            pass
        assert clock.stop() >= parked + 0.02
        assert clock.elapsed() == 0.0  # no longer followed
    finally:
        trio.lowlevel.remove_instrument(clock)


async def test_a_request_over_the_request_quota_is_throttled_and_muted(
    autojump_clock: Any,
) -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t") == ErrorCode.none
        resp = await c.request(API_VERSIONS)
        assert resp.throttle_time == datetime.timedelta(0)  # no quota yet
        await set_quota(c, "request_percentage", 1e-9)
        start = trio.current_time()
        resp = await c.request(API_VERSIONS)
        # over the quota by far: throttled for one window (quota.window.size.seconds), at most
        assert resp.throttle_time == datetime.timedelta(seconds=1)
        assert trio.current_time() - start < 1  # answered at once
        resp = await c.request(API_VERSIONS)
        assert trio.current_time() - start >= 1  # read again only after the throttle
        # a Produce is throttled too, and its records are written
        assert (await produce(c, "t", plain(), txn=None)).error_code == ErrorCode.none


async def test_a_fetch_over_the_request_quota_is_answered_empty(autojump_clock: Any) -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t") == ErrorCode.none
        assert (await produce(c, "t", plain(), txn=None)).error_code == ErrorCode.none
        await set_quota(c, "request_percentage", 1e-9)
        resp = await c.request(fetch_request("t"))
        assert (resp.error_code, resp.responses) == (ErrorCode.none, ())
        assert resp.throttle_time == datetime.timedelta(seconds=1)


async def test_a_request_quota_for_another_client_throttles_nothing(autojump_clock: Any) -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert await create(c, "t") == ErrorCode.none
        from tests.proxy.quotas.test_throttle import aq, f64

        resp = await c.request(
            aq.AlterClientQuotasRequest(
                entries=(
                    aq.EntryData(
                        entity=(aq.EntityData(entity_type="client-id", entity_name="other"),),
                        ops=(aq.OpData(key="request_percentage", value=f64(1e-9), remove=False),),
                    ),
                ),
                validate_only=False,
            )
        )
        assert resp.entries[0].error_code == ErrorCode.none
        for _ in range(3):
            assert (await c.request(API_VERSIONS)).throttle_time == datetime.timedelta(0)
        resp = await c.request(fetch_request("t"))
        assert len(resp.responses) == 1 and resp.throttle_time == datetime.timedelta(0)


async def test_a_request_that_closes_the_connection_leaves_no_task_behind() -> None:
    # the task clock follows the request's task until settle/stop; a handler closing the
    # connection (here an acks=0 Produce with a bad batch) must not leave it followed
    from tests.proxy.harness import encode_request
    from tests.proxy.test_produce_records import NOW, build_batch, malformed, records
    from tests.proxy.test_produce_records import two_partitions as batches

    async with running_broker() as (server, port), connect(port) as c:
        assert await create(c, "t", 2) == ErrorCode.none
        await set_quota(c, "request_percentage", 1e9)  # installs the task clock
        good = build_batch(records(1), base_timestamp=NOW)
        await c.send_raw(encode_request(batches(malformed("magic 3"), good, acks=0), 9))
        with trio.fail_after(10):
            assert await c.read_frame() is None
        clock = server.broker.throttles.clock
        assert clock is not None and clock._spent == {}


async def test_an_error_answer_is_charged_and_throttled_too(autojump_clock: Any) -> None:
    # Kafka's sendErrorResponseMaybeThrottle: a request refused as a whole still counts
    from kio.schema.sync_group.v5 import request as sg
    from kio.schema.types import GroupId
    from kio.static.primitive import i32

    async with running_broker() as (_, port), connect(port) as c:
        await set_quota(c, "request_percentage", 1e-9)
        start = trio.current_time()
        resp = await c.request(
            sg.SyncGroupRequest(
                group_id=GroupId("g"),
                generation_id=i32(1),
                member_id="m",
                group_instance_id=None,
                protocol_type=None,  # refused as a whole (INCONSISTENT_GROUP_PROTOCOL)
                protocol_name=None,
                assignments=(),
            )
        )
        assert resp.error_code == ErrorCode.inconsistent_group_protocol
        assert resp.throttle_time == datetime.timedelta(seconds=1)
        await c.request(API_VERSIONS)
        assert trio.current_time() - start >= 1  # muted meanwhile
