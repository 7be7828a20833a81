"""Option parsing of the kafkad data source: Spark's names, fail-fast errors. No Spark."""

from __future__ import annotations

import re

import pytest

from pipeline.options import (
    OptionError,
    check_sink_columns,
    parse_offset_spec,
    parse_read_options,
    parse_write_options,
)

BS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_read_defaults_mirror_spark_except_isolation() -> None:
    o = parse_read_options({**BS, "subscribe": "a, b"}, streaming=True)
    assert o.subscription.topics == ("a", "b")
    assert (o.starting, o.ending) == ("latest", "latest")
    assert o.isolation_level == "read_committed"
    assert o.fail_on_data_loss and not o.include_headers
    assert o.max_offsets_per_trigger is None
    assert o.group_id_prefix == "spark-kafka-source"
    assert (o.fetch_offset_num_retries, o.fetch_offset_retry_interval_ms) == (3, 1000)
    batch = parse_read_options({**BS, "subscribe": "a"}, streaming=False)
    assert batch.starting == "earliest"
    assert batch.group_id_prefix == "spark-kafka-relation"  # Spark's batch prefix


def test_fetch_offset_options_are_honoured() -> None:
    o = parse_read_options(
        {**BS, "subscribe": "a", "fetchoffset.numretries": "0", "fetchoffset.retryintervalms": "5"},
        streaming=True,
    )
    assert (o.fetch_offset_num_retries, o.fetch_offset_retry_interval_ms) == (0, 5)
    with pytest.raises(OptionError, match=r"fetchOffset\.retryIntervalMs"):
        parse_read_options(
            {**BS, "subscribe": "a", "fetchoffset.retryintervalms": "x"}, streaming=True
        )


def test_java_client_settings_are_translated() -> None:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required"
        ' username="alice" password="s3\\"cret";'
    )
    o = parse_read_options(
        {
            **BS,
            "subscribe": "a",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": jaas,
            "kafka.ssl.truststore.location": "/etc/ca.pem",
            "kafka.ssl.truststore.type": "PEM",
            "kafka.fetch.max.wait.ms": "100",
            "kafka.max.poll.records": "500",
            "kafka.receive.buffer.bytes": "65536",
        },
        streaming=True,
    )
    assert o.client == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": 's3"cret',
        "ssl.ca.location": "/etc/ca.pem",
        "fetch.wait.max.ms": "100",
        "max.poll.records": "500",  # librdkafka's own name too
        "socket.receive.buffer.bytes": "65536",
    }
    w = parse_write_options(
        {
            **BS,
            "topic": "t",
            "kafka.buffer.memory": "33554432",
            "kafka.max.request.size": "2000000",
            "kafka.ssl.keystore.location": "/etc/me.p12",
            "kafka.ssl.keystore.type": "PKCS12",
            "kafka.ssl.keystore.password": "pw",
        }
    )
    assert w.client == {
        "queue.buffering.max.kbytes": "32768",
        "message.max.bytes": "2000000",
        "ssl.keystore.location": "/etc/me.p12",
        "ssl.keystore.password": "pw",
    }


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("kafka.ssl.truststore.location", "/etc/ts.jks", "kafka.ssl.truststore.type"),
        ("kafka.sasl.jaas.config", "x.OAuthBearerLoginModule required;", "sasl.jaas.config"),
        ("kafka.default.api.timeout.ms", "1000", "kafka.default.api.timeout.ms"),
        ("kafka.max.block.ms", "1000", "kafka.max.block.ms"),
    ],
)
def test_java_client_settings_without_equivalent_are_refused(
    key: str, value: str, named: str
) -> None:
    with pytest.raises(OptionError, match=re.escape(named)):
        parse_read_options({**BS, "subscribe": "a", key: value}, streaming=True)


def test_read_options_are_case_insensitive_and_kafka_ones_pass_through() -> None:
    o = parse_read_options(
        {
            **BS,
            "SUBSCRIBEPATTERN": "t-.*",
            "maxOffsetsPerTrigger": "100",
            "kafka.isolation.level": "read_uncommitted",
            "kafka.fetch.max.bytes": "1000",
            "includeHeaders": "TRUE",
        },
        streaming=True,
    )
    assert o.subscription.matches("t-1") and not o.subscription.matches("x")
    assert not o.subscription.matches("__consumer_offsets")
    assert o.max_offsets_per_trigger == 100
    assert o.isolation_level == "read_uncommitted"
    assert o.client == {"fetch.max.bytes": "1000"}
    assert o.include_headers


def test_assign_and_json_offsets() -> None:
    o = parse_read_options(
        {
            **BS,
            "assign": '{"t": [1, 0]}',
            "startingOffsets": '{"t": {"0": 5, "1": -2}}',
            "endingOffsets": '{"t": {"0": -1, "1": 9}}',
        },
        streaming=False,
    )
    assert o.subscription.assigned == (("t", 0), ("t", 1))
    assert o.starting == {("t", 0): 5, ("t", 1): -2}
    assert o.ending == {("t", 0): -1, ("t", 1): 9}


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"subscribe": "t"}, True, "kafka.bootstrap.servers"),
        ({**BS}, True, "exactly one of"),
        ({**BS, "subscribe": "t", "assign": '{"t":[0]}'}, True, "exactly one of"),
        ({**BS, "subscribe": "t", "sbuscribe": "x"}, True, "unknown option 'sbuscribe'"),
        ({**BS, "subscribe": "t", "startingTimestamp": "1"}, True, "not supported"),
        ({**BS, "subscribe": "t", "maxOffsetsPerTrigger": "0"}, True, "at least 1"),
        ({**BS, "subscribe": "t", "maxOffsetsPerTrigger": "x"}, True, "integer"),
        ({**BS, "subscribe": "t", "maxOffsetsPerTrigger": "5"}, False, "streaming queries only"),
        ({**BS, "subscribe": "t", "endingOffsets": "latest"}, True, "batch queries only"),
        ({**BS, "subscribe": "t", "startingOffsets": "latest"}, False, "cannot be latest"),
        ({**BS, "subscribe": "t", "startingOffsets": "{oops"}, True, "neither a keyword nor JSON"),
        ({**BS, "subscribe": "t", "kafka.auto.offset.reset": "x"}, True, "startingOffsets"),
        ({**BS, "subscribe": "t", "kafka.isolation.level": "x"}, True, "isolation.level"),
        ({**BS, "subscribe": "t", "failOnDataLoss": "maybe"}, True, "true or false"),
        ({**BS, "subscribePattern": "("}, True, "not a regex"),
        ({**BS, "assign": '{"t": ["0"]}'}, True, "assign"),
        ({**BS, "subscribe": "t", "path": "/x"}, True, "no path"),
    ],
)
def test_bad_read_options_fail_with_the_option_named(
    options: dict[str, str], streaming: bool, message: str
) -> None:
    with pytest.raises(OptionError, match=message.replace("(", r"\(")):
        parse_read_options(options, streaming=streaming)


def test_offset_specs() -> None:
    assert parse_offset_spec(None, "x", "earliest", ending=False) == "earliest"
    assert parse_offset_spec(" Latest ", "x", "earliest", ending=True) == "latest"
    with pytest.raises(OptionError, match="cannot be 'earliest'"):
        parse_offset_spec("earliest", "endingOffsets", "latest", ending=True)
    with pytest.raises(OptionError, match="offset -2"):
        parse_offset_spec('{"t":{"0":-2}}', "endingOffsets", "latest", ending=True)
    with pytest.raises(OptionError, match="bad entry"):
        parse_offset_spec('{"t":{"zero":1}}', "startingOffsets", "latest", ending=False)


def test_write_options() -> None:
    o = parse_write_options({**BS, "topic": "out", "checkpointLocation": "/c", "queryName": "q"})
    assert (o.topic, o.marker_topic, o.transactional_id_prefix) == ("out", "out", "kafkad-sink-")
    o = parse_write_options({**BS, "markerTopic": "m", "transactionalIdPrefix": "job1."})
    assert (o.topic, o.marker_topic, o.transactional_id_prefix) == (None, "m", "job1.")
    with pytest.raises(OptionError, match="markerTopic"):
        parse_write_options({**BS})
    with pytest.raises(OptionError, match="derives it"):
        parse_write_options({**BS, "topic": "t", "kafka.transactional.id": "x"})
    with pytest.raises(OptionError, match="transactionalIdPrefix"):
        parse_write_options({**BS, "topic": "t", "transactionalIdPrefix": "a b"})
    with pytest.raises(OptionError, match="unknown option 'subscribe'"):
        parse_write_options({**BS, "topic": "t", "subscribe": "x"})


def test_sink_columns_follow_spark() -> None:
    topic = parse_write_options({**BS, "topic": "out"})
    check_sink_columns({"value": "string", "key": "binary", "other": "int"}, topic)
    with pytest.raises(OptionError, match="'value' column"):
        check_sink_columns({"key": "binary"}, topic)
    with pytest.raises(OptionError, match="column 'key' is int"):
        check_sink_columns({"value": "binary", "key": "int"}, topic)
    per_row = parse_write_options({**BS, "markerTopic": "m"})
    with pytest.raises(OptionError, match="'topic' column"):
        check_sink_columns({"value": "binary"}, per_row)
    check_sink_columns({"value": "binary", "topic": "string", "partition": "int"}, per_row)


def test_java_empty_endpoint_identification_turns_host_checks_off() -> None:
    # Java disables host name verification with an empty value; librdkafka refuses an empty
    # value ("cannot be set to empty value") and spells it "none"
    o = parse_write_options({**BS, "topic": "t", "kafka.ssl.endpoint.identification.algorithm": ""})
    assert o.client == {"ssl.endpoint.identification.algorithm": "none"}
    kept = parse_write_options(
        {**BS, "topic": "t", "kafka.ssl.endpoint.identification.algorithm": "https"}
    )
    assert kept.client == {"ssl.endpoint.identification.algorithm": "https"}
