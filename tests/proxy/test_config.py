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
    assert parse_properties("just words") == {"just": "words"}  # blanks separate, as in Java


def test_java_properties_syntax_in_full() -> None:
    text = (
        "  key1   value one  \n"  # leading blanks skipped, trailing kept
        "key2\t:\tv2\n"
        "key3 = a \\\n"  # a continuation: the next line's leading blanks go
        "      b\\\n"
        "   c\n"
        "key\\=4=x\\ty\\u00e9\\\\\n"  # escaped separator, \t, \\u, a literal backslash
        "empty\n"
        "  # an indented comment\n"
        "dup=1\ndup=2\n"
        "last=ends with a continuation\\"
    )
    assert parse_properties(text) == {
        "key1": "value one  ",
        "key2": "v2",
        "key3": "a b" + "c",
        "key=4": "x\ty\u00e9\\",
        "empty": "",
        "dup": "2",
        "last": "ends with a continuation",
    }
    with pytest.raises(ConfigError, match="line 1: malformed"):
        parse_properties("a=\\uZZ")


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
