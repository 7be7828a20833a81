"""KIP-951 ``node_endpoints`` found in Produce and Fetch answers by walking the wire format
(proxy/forward/hints.py), without decoding them: pure, no sockets."""

from __future__ import annotations

import contextlib
import datetime
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v16 import response as f16
from kio.schema.fetch.v18 import response as f18
from kio.schema.produce.v10 import response as p10
from kio.schema.produce.v13 import response as p13
from kio.schema.types import BrokerId, ProducerId
from kio.static.primitive import i32, i32Timedelta, i64

from proxy.forward import rewrite
from proxy.forward.frames import response_body_start
from proxy.forward.hints import names_leaders
from tests.proxy.forward.test_rewrite import frame_of
from wire.errors import DecodeError

NO_TIME = i32Timedelta.parse(datetime.timedelta(0))


def _produce(m: Any, version: int, leaders: bool) -> bytes:
    errors = (m.BatchIndexAndErrorMessage(batch_index=i32(2), batch_index_error_message="bad"),)
    part = m.PartitionProduceResponse(
        index=i32(0),
        error_code=ErrorCode.not_leader_or_follower,
        base_offset=i64(-1),
        log_append_time=None,
        record_errors=errors,
        error_message="moved",
        current_leader=m.LeaderIdAndEpoch(leader_id=BrokerId(7), leader_epoch=i32(3)),
    )
    topic = (
        m.TopicProduceResponse(name="t-\u00e9", partition_responses=(part, part))
        if version <= 12
        else m.TopicProduceResponse(topic_id=uuid.uuid4(), partition_responses=(part,))
    )
    ends = (m.NodeEndpoint(node_id=BrokerId(7), host="new-host", port=i32(9), rack="r"),)
    body = m.ProduceResponse(
        responses=(topic, topic), throttle_time=NO_TIME, node_endpoints=ends if leaders else ()
    )
    return frame_of(0, version, body)


def _fetch(m: Any, version: int, leaders: bool) -> bytes:
    aborted = (m.AbortedTransaction(producer_id=ProducerId(5), first_offset=i64(1)),)
    parts = tuple(
        m.PartitionData(
            partition_index=i32(i),
            error_code=ErrorCode.none,
            high_watermark=i64(10),
            aborted_transactions=aborted if i else None,
            records=b"\x00" * (300 * i) if i != 1 else None,
            current_leader=m.LeaderIdAndEpoch(leader_id=BrokerId(7), leader_epoch=i32(3)),
        )
        for i in range(3)
    )
    topic = m.FetchableTopicResponse(topic_id=uuid.uuid4(), partitions=parts)
    ends = (m.NodeEndpoint(node_id=BrokerId(7), host="new-host", port=i32(9), rack=None),)
    body = m.FetchResponse(
        throttle_time=NO_TIME,
        error_code=ErrorCode.none,
        session_id=i32(4),
        responses=(topic, topic),
        node_endpoints=ends if leaders else (),
    )
    return frame_of(1, version, body)


CASES = [(0, 10, p10, _produce), (0, 13, p13, _produce), (1, 16, f16, _fetch), (1, 18, f18, _fetch)]


@pytest.mark.parametrize(("api", "version", "module", "build"), CASES)
def test_node_endpoints_found_without_decoding(
    api: int, version: int, module: Any, build: Any
) -> None:
    for leaders in (True, False):
        frame = build(module, version, leaders)
        start = response_body_start(api, version, frame)
        assert names_leaders(api, version, frame, start) is leaders
        # the proxy decodes exactly the answers that name a leader, on any host
        assert rewrite.might_carry_endpoints(api, version, frame) is leaders
        if leaders:
            found = rewrite.decode(api, version, frame).endpoints
            assert [(e.node_id, e.host, e.port) for e in found] == [(7, "new-host", 9)]


@pytest.mark.parametrize(("api", "version", "module", "build"), CASES)
def test_a_frame_cut_short_is_decoded_to_report_it(
    api: int, version: int, module: Any, build: Any
) -> None:
    frame = build(module, version, False)
    start = response_body_start(api, version, frame)
    with pytest.raises(DecodeError):
        names_leaders(api, version, frame[:-1], start)
    assert rewrite.might_carry_endpoints(api, version, frame[:-1])
    assert rewrite.might_carry_endpoints(3, 12, b"")  # other APIs: always decoded


def _plain_fetch(record_sizes: list[int | None]) -> bytes:
    m = f18
    parts = tuple(
        m.PartitionData(
            partition_index=i32(i),
            error_code=ErrorCode.none,
            high_watermark=i64(10),
            aborted_transactions=None if i % 2 else (),
            records=None if size is None else b"\x01" * size,
        )
        for i, size in enumerate(record_sizes)
    )
    topic = m.FetchableTopicResponse(topic_id=uuid.uuid4(), partitions=parts)
    body = m.FetchResponse(
        throttle_time=NO_TIME, error_code=ErrorCode.none, session_id=i32(4), responses=(topic,)
    )
    return frame_of(1, 18, body)


def _plain_produce(partitions: int) -> bytes:
    m = p10
    part = m.PartitionProduceResponse(
        index=i32(0),
        error_code=ErrorCode.none,
        base_offset=i64(5),
        log_append_time=None,
        record_errors=(),
        error_message=None,
    )
    topic = m.TopicProduceResponse(name="t", partition_responses=(part,) * partitions)
    return frame_of(0, 10, m.ProduceResponse(responses=(topic,), throttle_time=NO_TIME))


def test_records_of_every_length_encoding_are_skipped_exactly() -> None:
    # compact bytes lengths of 1, 2 and 3 varint bytes, at the edges, null and empty
    frame = _plain_fetch([None, 0, 125, 126, 127, 16382, 16383, 16384, 1 << 21])
    start = response_body_start(1, 18, frame)
    assert names_leaders(1, 18, frame, start) is False
    for cut in (len(frame) - 1, len(frame) // 2, start + 40):
        with pytest.raises(DecodeError):
            names_leaders(1, 18, frame[:cut], start)


@pytest.mark.parametrize(
    ("api", "frame"), [(0, _plain_produce(200)), (1, _plain_fetch([100] * 200))]
)
def test_plain_partitions_cost_no_call_each(
    api: int, frame: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hot path: the walk over 200 partitions without errors reads a handful of varints
    through a call (topic and partition counts, tagged sections), not several per partition."""
    from proxy.forward import hints

    calls = 0

    def counted(real: Any) -> Any:
        def call(*args: Any) -> Any:
            nonlocal calls
            calls += 1
            return real(*args)

        return call

    for name in ("read_uvarint", "skip_tagged_fields"):
        monkeypatch.setattr(hints, name, counted(getattr(hints, name)))
    version = 10 if api == 0 else 18
    assert names_leaders(api, version, frame, response_body_start(api, version, frame)) is False
    assert calls < 10


@pytest.mark.parametrize(("api", "version", "module", "build"), CASES)
def test_a_damaged_frame_never_crashes_the_walk(
    api: int, version: int, module: Any, build: Any
) -> None:
    """Every truncation and seeded random byte changes: a bool or DecodeError, nothing else
    (the fast paths read bytes by index)."""
    import random

    rnd = random.Random(version)
    frame = build(module, version, True)
    start = response_body_start(api, version, frame)
    damaged = [frame[:cut] for cut in range(len(frame))]
    for _ in range(500):
        b = bytearray(frame)
        for _ in range(rnd.randint(1, 4)):
            b[rnd.randrange(start, len(b))] = rnd.randrange(256)
        damaged.append(bytes(b))
    for one in damaged:
        with contextlib.suppress(DecodeError):
            assert names_leaders(api, version, one, start) in (True, False)
