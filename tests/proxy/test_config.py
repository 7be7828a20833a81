from __future__ import annotations

import pytest

from proxy.config import ConfigError, load_config, parse_properties, resolve_values


def test_defaults_are_kafkas() -> None:
    v = resolve_values({}, {}, {})
    assert v["auto.create.topics.enable"] is True
    assert v["num.partitions"] == 1
    assert v["group.initial.rebalance.delay.ms"] == 3000
    assert v["offsets.topic.num.partitions"] == 50
    assert v["transaction.state.log.num.partitions"] == 50
    assert v["message.max.bytes"] == 1048588


def test_later_sources_win() -> None:
    v = resolve_values(
        {"num.partitions": "3", "auto.create.topics.enable": "false"},
        {"KAFKAD_NUM_PARTITIONS": "5", "UNRELATED": "x"},
        {"auto.create.topics.enable": "true"},
    )
    assert v["num.partitions"] == 5
    assert v["auto.create.topics.enable"] is True


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"no.such.config": "1"}, "unknown config"),
        ({"num.partitions": "many"}, "num.partitions"),
        ({"num.partitions": "0"}, "num.partitions"),
        ({"auto.create.topics.enable": "maybe"}, "auto.create.topics.enable"),
    ],
)
def test_bad_values_are_refused(source: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_values({}, {}, source)


def test_properties_file_syntax() -> None:
    text = "# comment\n! also\n\nnum.partitions = 4\nlog.retention.ms:1000\n"
    assert parse_properties(text) == {"num.partitions": "4", "log.retention.ms": "1000"}
    with pytest.raises(ConfigError):
        parse_properties("just words")


def test_listen_and_advertise() -> None:
    cfg = load_config(
        listen="127.0.0.1:0",
        advertise="localhost:9092",
        data_dir="memory://",
        config_file=None,
        overrides={},
        environ={},
    )
    assert (cfg.listen_host, cfg.listen_port) == ("127.0.0.1", 0)
    assert (cfg.advertised_host, cfg.advertised_port) == ("localhost", 9092)
    with pytest.raises(ConfigError):
        load_config(
            listen="nohost",
            advertise=None,
            data_dir="memory://",
            config_file=None,
            overrides={},
            environ={},
        )


def test_flush_every_append_maps_to_log_config() -> None:
    cfg = load_config(
        listen="127.0.0.1:0",
        advertise=None,
        data_dir="memory://",
        config_file=None,
        overrides={"log.flush.interval.messages": "1"},
        environ={},
    )
    assert cfg.log_config().flush_every_append is True


def test_flush_intervals_map_to_log_config_as_given() -> None:
    """Issue 23.12: any value means what it says (not only 1), for the broker and a topic."""
    from storage.topic_config import topic_log_config, validate_overrides

    cfg = load_config(
        listen="127.0.0.1:0",
        advertise=None,
        data_dir="memory://",
        config_file=None,
        overrides={"log.flush.interval.messages": "500", "log.flush.interval.ms": "2000"},
        environ={},
    ).log_config()
    assert (cfg.flush_messages, cfg.flush_ms, cfg.flush_every_append) == (500, 2000, False)
    topic = topic_log_config(cfg, {"flush.messages": "7", "flush.ms": "30"})
    assert (topic.flush_messages, topic.flush_ms) == (7, 30)
    assert validate_overrides({"flush.messages": "0"}) is not None
    assert validate_overrides({"flush.ms": "-1"}) is not None
