"""wire.versions: kio objects moved between versions of one message.

Moving a request of any version up to the newest and back gives it unchanged wherever the
newest version keeps all its fields; a response moved down keeps every field the older version
has and encodes; fields a version lacks take the schema's defaults."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v4 import request as fetch4
from kio.schema.fetch.v12 import request as fetch12
from kio.schema.metadata.v0 import response as md0
from kio.schema.metadata.v12 import response as md12

from tests.wire.conftest import entities
from tests.wire.supported import KEYS, kio_versions
from wire.codec import RequestHeader, encode_response, request_class, response_class
from wire.versions import convert, error_response, removed_fields

PAIRS = [(k, v) for k in KEYS for v in kio_versions(k) if not (k == 0 and v < 3)]
KEEPING = [
    (k, v)
    for k, v in PAIRS
    if not removed_fields(request_class(k, v), request_class(k, max(kio_versions(k))))
]
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(st.sampled_from(KEEPING).flatmap(lambda p: entities(request_class(*p))))
def test_a_request_moved_up_and_back_is_unchanged(req: Any) -> None:
    key = int(req.__api_key__)
    newest = convert(req, request_class(key, max(kio_versions(key))))
    assert convert(newest, type(req)) == req


@SETTINGS
@given(
    st.sampled_from(PAIRS).flatmap(
        lambda p: st.tuples(st.just(p), entities(response_class(p[0], max(kio_versions(p[0])))))
    )
)
def test_a_newest_response_moved_down_keeps_its_fields_and_encodes(case: Any) -> None:
    (key, version), resp = case
    old = convert(resp, response_class(key, version))
    assert type(old).__version__ == version
    encode_response(RequestHeader(key, version, 1, "t"), old)
    newest_fields = {f.name for f in dataclasses.fields(resp)}
    for name in (f.name for f in dataclasses.fields(old)):
        if name in newest_fields and not isinstance(getattr(resp, name), tuple):
            value = getattr(resp, name)
            assert getattr(old, name) == value or value is None


def test_fields_an_old_version_lacks_take_the_schema_default() -> None:
    old = fetch4.FetchRequest(
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=1000,
        isolation_level=1,
        topics=(
            fetch4.FetchTopic(
                topic="t",
                partitions=(
                    fetch4.FetchPartition(partition=0, fetch_offset=7, partition_max_bytes=99),
                ),
            ),
        ),
    )
    new = convert(old, fetch12.FetchRequest)
    assert (new.session_id, new.session_epoch, new.rack_id) == (0, -1, "")
    assert new.forgotten_topics_data == ()  # no default in the schema: an empty list
    [topic] = new.topics
    assert type(topic) is fetch12.FetchTopic
    [part] = topic.partitions
    assert (part.fetch_offset, part.current_leader_epoch, part.log_start_offset) == (7, -1, -1)
    assert convert(new, fetch12.FetchRequest) is new  # the newest version: no copy


def test_a_null_in_a_field_the_old_version_declares_non_nullable_becomes_its_zero() -> None:
    topic = md12.MetadataResponseTopic(
        error_code=ErrorCode.invalid_request,
        name=None,
        topic_id=None,
        partitions=(),
    )
    resp = md12.MetadataResponse(
        throttle_time=datetime.timedelta(0), brokers=(), topics=(topic,), cluster_id=None
    )
    old = convert(resp, md0.MetadataResponse)
    assert [(t.name, t.error_code) for t in old.topics] == [("", ErrorCode.invalid_request)]


def test_overrides_fill_fields_only_the_old_version_has() -> None:
    resp = md12.MetadataResponse(throttle_time=datetime.timedelta(0), brokers=(), topics=())
    md10 = response_class(3, 10)
    assert removed_fields(md10, md12.MetadataResponse) == ["cluster_authorized_operations"]
    old = convert(resp, md10, cluster_authorized_operations=5)
    assert old.cluster_authorized_operations == 5


@SETTINGS
@given(st.sampled_from(PAIRS))
def test_error_response_sets_every_code_and_encodes(pair: tuple[int, int]) -> None:
    resp = error_response(response_class(*pair), ErrorCode.not_coordinator)
    encode_response(RequestHeader(pair[0], pair[1], 1, "t"), resp)
    codes = [
        getattr(resp, f.name)
        for f in dataclasses.fields(resp)
        if f.metadata.get("kafka_type") == "error_code"
    ]
    assert all(c is ErrorCode.not_coordinator for c in codes)
