"""The fault-injection switch (``kafkad.fault.injection``): the spec parser and the seeded
decisions (pure), error replies in each API's own shape, and the switch on a real broker."""

from __future__ import annotations

import dataclasses
import importlib
import uuid
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9 import request as pr

from proxy.config import resolve_values
from proxy.fault_injection import NO_FAULT, CrashRule, Fault, FaultInjector, parse_spec
from proxy.properties_file import ConfigError
from proxy.registry import entry, served
from tests.proxy.harness import connect, encode_request, running_broker
from tests.proxy.test_broker_requests import MS, batch, create, fetch_request, produce
from tests.wire.conftest import entities
from wire.codec import RequestHeader, encode_response, request_class

# -- the spec ------------------------------------------------------------------------------


def test_parse_spec() -> None:
    spec = parse_spec(
        "seed=7; produce,1:error=NOT_LEADER_OR_FOLLOWER@0.5; find_coordinator:delay=250;"
        " *:drop@0.01; metadata:drop_after@0"
    )
    assert spec is not None and spec.seed == 7
    error, delay, drop, after = spec.rules
    assert (error.api_keys, error.error, error.probability) == (
        frozenset({0, 1}),
        ErrorCode.not_leader_or_follower,
        0.5,
    )
    assert (delay.api_keys, delay.delay_ms, delay.probability) == (frozenset({10}), 250, 1.0)
    assert drop.api_keys is None and drop.matches(0) and not drop.matches(18)
    assert after.action == "drop_after" and after.probability == 0
    assert parse_spec("") is None and parse_spec(" ; seed=3 ;") is None


@pytest.mark.parametrize(
    "bad",
    [
        "produce",
        "produce:error=NO_SUCH_ERROR",
        "nope:drop",
        "produce:delay=-1",
        "produce:drop@1.5",
        "produce:explode",
        "produce:drop=1",
        "seed=x",
    ],
)
def test_bad_specs_are_refused_at_startup(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_spec(bad)
    with pytest.raises(ConfigError, match=r"kafkad\.fault\.injection"):
        resolve_values({}, {}, {"kafkad.fault.injection": bad})


def test_crash_points() -> None:
    spec = parse_spec("seed=3; crash=txn_after_prepare@0.5; crash=TXN_AFTER_FIRST_MARKER")
    assert spec is not None and not spec.rules
    assert spec.crashes == (
        CrashRule("txn_after_prepare", 0.5),
        CrashRule("txn_after_first_marker", 1.0),
    )
    one, two = FaultInjector(spec), FaultInjector(spec)
    series = [one.crash_here("txn_after_prepare") for _ in range(200)]
    assert series == [two.crash_here("txn_after_prepare") for _ in range(200)]  # seeded
    assert 60 < sum(series) < 140  # about half
    assert FaultInjector(spec).crash_here("txn_after_first_marker")
    # the request faults' draws do not move when a crash item is added
    plain = FaultInjector(parse_spec("seed=3; produce:drop@0.5") or spec)
    mixed = FaultInjector(parse_spec("seed=3; produce:drop@0.5; crash=txn_after_prepare") or spec)
    mixed.crash_here("txn_after_prepare")
    assert [plain.decide(0) for _ in range(20)] == [mixed.decide(0) for _ in range(20)]
    with pytest.raises(ValueError, match="crash point"):
        parse_spec("crash=somewhere")


def test_off_by_default() -> None:
    assert resolve_values({}, {}, {})["kafkad.fault.injection"] == ""


def test_decisions_are_seeded_and_follow_the_probability() -> None:
    spec = parse_spec("seed=42; produce:error=request_timed_out@0.25; fetch:delay=10")
    assert spec is not None
    a, b = FaultInjector(spec), FaultInjector(spec)
    runs = [a.decide(0) for _ in range(2000)]
    assert runs == [b.decide(0) for _ in range(2000)]
    hits = sum(f.error is ErrorCode.request_timed_out for f in runs)
    assert 400 < hits < 600
    assert a.decide(1) == Fault(delay_ms=10)
    assert a.decide(3) == NO_FAULT  # no rule for Metadata: no draw either
    other = FaultInjector(dataclasses.replace(spec, seed=43))
    assert [other.decide(0) for _ in range(2000)] != runs


def test_combined_rules() -> None:
    spec = parse_spec(
        "*:delay=5; produce:delay=7; produce:error=not_coordinator;"
        " produce:error=concurrent_transactions; produce:drop_after"
    )
    assert spec is not None
    fault = FaultInjector(spec).decide(0)
    assert fault == Fault(ErrorCode.not_coordinator, 12, drop=False, drop_after=True)


# -- error replies in the API's own shape --------------------------------------------------


def _codes(entity: Any) -> list[ErrorCode]:
    out = []
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if f.metadata.get("kafka_type") == "error_code":
            out.append(value)
        elif isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    out += _codes(item)
        elif dataclasses.is_dataclass(value):
            out += _codes(value)
    return out


# Every served API at every version it serves.
PAIRS = [(k, v) for k, (lo, hi) in served().items() for v in range(lo, hi + 1)]


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(PAIRS).flatmap(lambda p: entities(request_class(*p))))
def test_error_replies_carry_the_error_everywhere_and_encode(req: Any) -> None:
    """Each handler's registered error reply, in the version the client spoke."""
    key, version = int(req.__api_key__), int(req.__version__)
    header = RequestHeader(key, version, 9, "t")
    h = entry(key)
    resp = h.write(h.error_reply(h.read(req), ErrorCode.not_coordinator), req, version)
    encode_response(header, resp)
    codes = _codes(resp)
    assert all(c is ErrorCode.not_coordinator for c in codes)


def _reply(req: Any) -> Any:
    key, version = int(req.__api_key__), int(req.__version__)
    h = entry(key)
    return h.write(h.error_reply(h.read(req), ErrorCode.not_coordinator), req, version)


@pytest.mark.parametrize("version", range(4))
def test_add_partitions_to_txn_error_reply_echoes_a_topic_without_partitions(version: int) -> None:
    """Kafka's ``errorResponseForTopics`` lists every topic asked for, even one with no
    partitions; the typed handler's first error reply dropped it (the old table kept it)."""
    ap = importlib.import_module(f"kio.schema.add_partitions_to_txn.v{version}.request")
    req = ap.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=1,
        v3_and_below_producer_epoch=0,
        v3_and_below_topics=(
            ap.AddPartitionsToTxnTopic(name="empty", partitions=()),
            ap.AddPartitionsToTxnTopic(name="t", partitions=(2,)),
        ),
    )
    resp = _reply(req)
    assert [
        (t.name, [p.partition_index for p in t.results_by_partition])
        for t in resp.results_by_topic_v3_and_below
    ] == [("empty", []), ("t", [2])]


@pytest.mark.parametrize("version", range(6))
def test_describe_groups_error_reply_has_kafkas_unknown_state(version: int) -> None:
    """Kafka's ``DescribeGroupsResponse.groupError``: state, protocol type and protocol are
    "" (UNKNOWN_STATE), not Dead."""
    extra = {"include_authorized_operations": False} if version >= 3 else {}
    req = request_class(15, version)(groups=("g",), **extra)
    (group,) = _reply(req).groups
    assert (group.group_id, group.error_code, group.group_state) == (
        "g",
        ErrorCode.not_coordinator,
        "",
    )


@pytest.mark.parametrize("version", [8, 9, 10])
def test_metadata_error_reply_omits_cluster_operations(version: int) -> None:
    """Kafka's MetadataRequest.getErrorResponse leaves ClusterAuthorizedOperations at its
    default (-2^31) even when the request asked for them."""
    req = request_class(3, version)(
        topics=None,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=False,
    )
    assert _reply(req).cluster_authorized_operations == -(2**31)


def test_metadata_error_reply_names_a_topic_asked_for_by_id_with_an_empty_name() -> None:
    """Kafka's MetadataRequest.getErrorResponse turns a null name into "" (v12 asks by id)."""
    from kio.schema.metadata.v12 import request as md12

    some_id = uuid.UUID(int=5)
    req = md12.MetadataRequest(
        topics=(md12.MetadataRequestTopic(topic_id=some_id, name=None),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    (topic,) = _reply(req).topics
    assert (topic.name, topic.topic_id, topic.error_code) == (
        "",
        some_id,
        ErrorCode.not_coordinator,
    )


# -- on a running broker -------------------------------------------------------------------


def injected(spec: str) -> Any:
    return running_broker(**{"kafkad.fault.injection": spec})


async def test_injected_produce_error_writes_nothing() -> None:
    with trio.fail_after(10):
        async with (
            injected("produce:error=NOT_LEADER_OR_FOLLOWER") as (_, port),
            connect(port) as c,
        ):
            assert await create(c, "fi") == ErrorCode.none
            part = await produce(c, "fi", batch([b"a"]))
            assert part.error_code == ErrorCode.not_leader_or_follower
            assert part.index == 0 and part.base_offset == -1
            fetched = (await c.request(fetch_request("fi", 0))).responses[0].partitions[0]
            assert fetched.error_code == ErrorCode.none and fetched.high_watermark == 0


async def test_injected_errors_follow_the_probability_and_seed() -> None:
    spec = "seed=5; produce:error=not_leader_or_follower@0.5"
    expected = FaultInjector(parse_spec(spec)).decide  # type: ignore[arg-type]
    want = [expected(0).error or ErrorCode.none for _ in range(20)]
    with trio.fail_after(20):
        async with injected(spec) as (_, port), connect(port) as c:
            assert await create(c, "fp") == ErrorCode.none
            got = [(await produce(c, "fp", batch([b"x"]))).error_code for _ in range(20)]
            assert got == want and ErrorCode.none in got and len(set(got)) == 2
            fetched = (await c.request(fetch_request("fp", 0))).responses[0].partitions[0]
            assert fetched.high_watermark == got.count(ErrorCode.none)


async def test_fetch_and_metadata_errors_in_their_own_shape() -> None:
    with trio.fail_after(10):
        async with (
            injected("fetch,metadata:error=kafka_storage_error") as (_, port),
            connect(port) as c,
        ):
            assert await create(c, "fm") == ErrorCode.none
            resp = await c.request(fetch_request("fm", 0))
            part = resp.responses[0].partitions[0]
            assert (resp.responses[0].topic, part.partition_index) == ("fm", 0)
            assert part.error_code == ErrorCode.kafka_storage_error
            from kio.schema.metadata.v12 import request as md

            meta = await c.request(
                md.MetadataRequest(
                    topics=(md.MetadataRequestTopic(topic_id=None, name="fm"),),
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
            )
            assert [(t.name, t.error_code) for t in meta.topics] == [
                ("fm", ErrorCode.kafka_storage_error)
            ]


async def test_delay(autojump_clock: trio.testing.MockClock) -> None:
    with trio.fail_after(100):
        async with injected("fetch:delay=30000") as (_, port), connect(port) as c:
            assert await create(c, "fd") == ErrorCode.none
            start = trio.current_time()
            resp = await c.request(fetch_request("fd", 0))
            assert resp.responses[0].partitions[0].error_code == ErrorCode.none
            assert trio.current_time() - start >= 30


async def test_drop_closes_the_connection_before_the_handler() -> None:
    with trio.fail_after(10):
        async with injected("produce:drop") as (_, port):
            async with connect(port) as c:
                assert await create(c, "fdrop") == ErrorCode.none
                await c.send_raw(encode_request(produce_req("fdrop"), 99))
                assert await c.read_frame() is None
            async with connect(port) as c:
                fetched = (await c.request(fetch_request("fdrop", 0))).responses[0].partitions[0]
                assert fetched.high_watermark == 0


async def test_drop_after_handles_then_closes() -> None:
    with trio.fail_after(10):
        async with injected("produce:drop_after") as (_, port):
            async with connect(port) as c:
                assert await create(c, "fda") == ErrorCode.none
                await c.send_raw(encode_request(produce_req("fda"), 99))
                assert await c.read_frame() is None
            async with connect(port) as c:
                fetched = (await c.request(fetch_request("fda", 0))).responses[0].partitions[0]
                assert fetched.high_watermark == 1  # written, never acknowledged


async def test_acks0_produce_error_closes_the_connection() -> None:
    with trio.fail_after(10):
        async with (
            injected("produce:error=not_leader_or_follower") as (_, port),
            connect(port) as c,
        ):
            assert await create(c, "fa0") == ErrorCode.none
            await c.send_raw(encode_request(produce_req("fa0", acks=0), 99))
            assert await c.read_frame() is None


def produce_req(topic: str, acks: int = -1) -> Any:
    return pr.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=1000 * MS,
        topic_data=(
            pr.TopicProduceData(
                name=topic,
                partition_data=(pr.PartitionProduceData(index=0, records=batch([b"z"])),),
            ),
        ),
    )


# -- per client id, and partitions (kafkad proxy) --------------------------------------------


def test_rules_narrowed_to_a_client_id_glob() -> None:
    spec = parse_spec("produce,fetch[billing-*]:error=not_coordinator; *[]:drop")
    assert spec is not None
    narrowed, _anonymous = spec.rules
    assert narrowed.api_keys == frozenset({0, 1}) and narrowed.client == "billing-*"
    faults = FaultInjector(spec)
    assert faults.decide(0, "billing-7").error == ErrorCode.not_coordinator
    assert faults.decide(0, "shipping") == NO_FAULT
    assert faults.decide(3, None).drop  # a null client id is matched as ""
    assert not faults.decide(3, "x").drop


def test_partition_items() -> None:
    spec = parse_spec("seed=1; partition broker=2 for=5000 after=1000 client=app-*")
    assert spec is not None and spec.rules == ()
    (rule,) = spec.partitions
    faults = FaultInjector(spec)
    assert not faults.partitioned(2, "app-1", 999)
    assert faults.partitioned(2, "app-1", 1000) and faults.partitioned(2, "app-1", 5999)
    assert not faults.partitioned(2, "app-1", 6000)
    assert not faults.partitioned(1, "app-1", 2000) and not faults.partitioned(2, "x", 2000)
    assert rule.after_ms == 1000
    for bad in (
        "partition broker=1",
        "partition for=5",
        "partition broker=x for=1",
        "partition broker=1 for=0",
        "partition broker=1 for=5 color=red",
    ):
        with pytest.raises(ValueError):
            parse_spec(bad)
